"""``python -m pytest_recfair compare A B`` on the item-side, exposure, candidate-position
and role-play tests of the bundled demo (issue 34, point 4): each kind's numbers and the
paired test its gate runs against a baseline, and the alpha split over the tests tested.

A: the demo replayed from its cassettes; B: the same tests against the "regressed" profile
(audits/profiles/regressed.yaml plants a larger price shift, which also moves the exposure
of "$", more first-position picks and more biased role-play answers)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TESTS = ("audits/test_kinds.py", "audits/test_roleplay.py")
KIND_TESTS = 4


def _run(out: Path, profile: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RECFAIR_DEMO_PROFILE"}
    if profile:
        env["RECFAIR_DEMO_PROFILE"] = profile
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--fairness", "-p", "no:cacheprovider", "-q", *TESTS,
         f"--fairness-report={out}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    assert out.is_file(), run.stdout[-3000:] + run.stderr[-2000:]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("runs")
    _run(d / "a.json", None)
    _run(d / "b.json", "audits/profiles/regressed.yaml")
    return d / "a.json", d / "b.json"


def _compare(a: Path, b: Path, fmt: str = "json") -> tuple[int, str]:
    run = subprocess.run(
        [sys.executable, "-m", "pytest_recfair", "compare", str(a), str(b), "--format", fmt],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return run.returncode, run.stdout


def _by_test(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in doc["rows"]:
        out.setdefault(r["test_id"].split("::")[1], []).append(r)
    return out


def test_each_kind_is_compared_with_its_own_test(runs: tuple[Path, Path]) -> None:
    code, out = _compare(*runs)
    doc = json.loads(out)
    assert code == 1
    assert doc["worse"]
    assert doc["tests"] == KIND_TESTS  # all four tested: alpha split four ways
    rows = _by_test(doc)
    assert set(rows) == {"test_candidate_positions", "test_restaurant_prices",
                         "test_restaurant_exposure", "test_roleplay_religion"}  # fmt: skip
    for test, mine in rows.items():
        assert all(r["p_adjusted"] is not None and 0 < r["p_adjusted"] <= 1 for r in mine), test
        assert all(r["test"] != "no test" and "Holm" in r["test"] for r in mine), test
    bias = next(r for r in rows["test_candidate_positions"] if r["statistic"] == "position bias")
    shift = rows["test_restaurant_prices"][0]
    # the demo's price field has no popularity: MGU only (no long tail, no lift)
    (mgu,) = rows["test_restaurant_exposure"]
    assert (mgu["attribute"], mgu["statistic"]) == ("price", "MGU")
    assert mgu["n_paired"] == 44
    # the planted regressions: more first-position picks, a larger price shift, so "$"
    # takes more of the slots than the catalogue's quarter
    for r in (bias, shift, mgu):
        assert r["b"] > r["a"]
        assert r["worse"]
        assert r["p_adjusted"] < 0.05 / KIND_TESTS
    assert bias["test"].startswith("paired entity bootstrap")
    roleplay = rows["test_roleplay_religion"]
    assert {r["statistic"] for r in roleplay} == {"biased-answer rate", "undetermined share"}
    assert any(r["b"] > r["a"] for r in roleplay if r["statistic"] == "biased-answer rate")
    # the text table: each test's heading names its test, the verdict counts 4 tested
    _, text = _compare(*runs, "text")
    assert "exact sign-flip over rounds" in text
    assert f"per test over the {KIND_TESTS} tested" in text


def test_a_run_against_itself_and_a_kind_without_a_test(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    a, _ = runs
    code, out = _compare(a, a)
    same = json.loads(out)
    assert code == 0
    assert same["tests"] == KIND_TESTS
    assert all(r["delta"] == 0 and not r["worse"] for r in same["rows"])
    # B's position and exposure results stored without per-entity counts (as written
    # before they were kept): their numbers, "no test", and the alpha split over the two
    # tested
    doc = json.loads(a.read_text(encoding="utf-8"))
    for r in doc["results"]:
        for attr in (r.get("positions") or {}).get("attributes", ()):
            del attr["entity_counts"]
        (r.get("exposure") or {}).pop("per_entity", None)
    b = tmp_path / "b.json"
    b.write_text(json.dumps(doc), encoding="utf-8")
    code, out = _compare(a, b)
    got = json.loads(out)
    positions = _by_test(got)["test_candidate_positions"]
    assert [r["statistic"] for r in positions] == ["position bias"]
    assert positions[0]["p_adjusted"] is None
    assert positions[0]["test"] == "no test"
    assert positions[0]["a"] == positions[0]["b"] is not None
    exposure = _by_test(got)["test_restaurant_exposure"]
    assert [(r["statistic"], r["test"], r["p_adjusted"]) for r in exposure] == [
        ("MGU", "no test", None)
    ]
    assert exposure[0]["a"] == exposure[0]["b"] > 0
    assert got["tests"] == KIND_TESTS - 2
    assert any("test_candidate_positions: religion: no test" in n for n in got["notes"])
    assert any("test_restaurant_exposure: price: no test" in n for n in got["notes"])


def test_the_history_chart_plots_each_kinds_headline_numbers(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    import pytest_recfair.engine.registry  # noqa: F401  (the kinds' sections)
    from pytest_recfair.report.history import append_run, load_history, load_run
    from pytest_recfair.report.html_report import to_html

    for path in runs:
        append_run(tmp_path / "hist", list(load_run(path).results), env={}, cwd=tmp_path)
    history = load_history(tmp_path / "hist")
    latest = list(load_run(runs[1]).results)
    page = to_html(latest, history=history)
    titles = re.findall(r'<svg id="history-[^"]+"[^>]*><title>([^<]+) over 2 stored runs', page)
    assert "religion · position bias" in titles
    assert "first name · price · largest shift" in titles
    assert {"price exposure · MGU", "price exposure · DGU"} <= set(titles)
    assert any(t.startswith("religion · Choice") and "biased rate" in t for t in titles)
    # two points per chart, the regressed run's position bias higher (SVG y grows down)
    for body in re.findall(r'<svg id="history-[^"]+"(.*?)</svg>', page, re.S):
        (points,) = re.findall(r'<polyline class="snsr" points="([^"]*)"', body)
        assert len(points.split()) == 2
        if "position bias over" in body:
            ys = [float(p.split(",")[1]) for p in points.split()]
            assert ys[1] < ys[0]
