"""Quality beside fairness (issue 23.6): a model that recommends equally badly for every
group is as "fair" as a good one; the gate now fails it, with a message that says so.

Real pytest runs (pytester) against the simulator. The catalogue is the simulator's own
films of each audited director (``sim.recommender.Catalogue``: what the good model
recommends from); the fair-but-useless model is the same simulator asked about the wrong
director, so its lists are as fair as the good model's and hold none of the right
director's films.
"""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.prompts.seeds import load_seeds
from pytest_recfair.sim.recognise import entity_key
from pytest_recfair.sim.recommender import Catalogue
from tests.support.plugin import (
    assert_shards_merge_to_the_full_audit,
    plugin_args,
    subprocess_env,
)

pytest_plugins = ["pytester"]

DIRECTORS = load_seeds("directors")[:12]
K = 10

CONFTEST = """
import os

import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender

NAMES = {names!r}


class WrongDirector:
    \"\"\"The simulator asked about the next director of the list: fair, and useless.\"\"\"

    def __init__(self, sim):
        self.sim = sim

    def __call__(self, prompt, system=None):
        for i, name in enumerate(NAMES):
            if name in prompt:
                prompt = prompt.replace(name, NAMES[(i + 1) % len(NAMES)])
                break
        return self.sim(prompt, system)


@pytest.fixture(scope="session")
def recfair_recommender():
    sim = SimulatedRecommender(noise=0.1, seed=0)
    return WrongDirector(sim) if os.environ.get("QUALITY_MODEL") == "useless" else sim
"""

TESTS = """
from pytest_recfair import fairness

@fairness(attr="religion")
def test_religion():
    pass
"""


def _project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ini: str = "") -> None:
    with (pytester.path / "directors.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "name", "domain"])
        w.writerows([e.id, e.name, "movie"] for e in DIRECTORS)
    with (pytester.path / "films.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "title", "entity"])
        for e in DIRECTORS:
            titles = Catalogue(entity_key(e.name), "movie").titles(3 * K + 20)
            w.writerows([f"{e.id}-{i}", t, e.name] for i, t in enumerate(titles))
    pytester.makeconftest(CONFTEST.format(names=[e.name for e in DIRECTORS]))
    pytester.makeini(
        "[pytest]\nrecfair_n_resamples = 200\nrecfair_seeds = directors.csv\n"
        f"recfair_k = {K}\nrecfair_catalogue = films.csv\n{ini}"
    )
    pytester.makepyfile(test_audit=TESTS)
    monkeypatch.delenv("QUALITY_MODEL", raising=False)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*plugin_args(), "-p", "no:cacheprovider", "--fairness", *args)


def _result(path: Path) -> dict[str, Any]:
    (result,) = json.loads(path.read_text(encoding="utf-8"))["results"]
    return dict(result)


def test_fair_but_useless_fails_against_the_baseline_a_good_model_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester, monkeypatch)
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
    good = _run(pytester, "--fairness-report=good.json", "-v")
    good.assert_outcomes(passed=1)
    q = _result(pytester.path / "good.json")["overlap"]["quality"]
    assert q["basis"] == "catalogue"
    assert q["overall"] > 0.9
    flat = " ".join(good.stdout.str().split())  # the summary's lines, unwrapped
    assert "quality (share of the 10 slots holding a title of the entity" in flat

    monkeypatch.setenv("QUALITY_MODEL", "useless")
    bad = _run(pytester, "--fairness-report=bad.json")
    bad.assert_outcomes(failed=1)
    bad.stdout.fnmatch_lines(
        ["*quality_drift: recommendation quality fell for every group alike*fair but useless*"]
    )
    result = _result(pytester.path / "bad.json")
    # the lists are as fair as ever: quality is the only thing the gate holds against them
    assert {f["kind"] for f in result["gate"]["failures"]} == {"quality_drift"}
    assert result["overlap"]["quality"]["overall"] < 0.2


def test_min_quality_fails_an_equally_bad_model_without_a_baseline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester, monkeypatch, "recfair_min_quality = 0.5\n")
    monkeypatch.setenv("QUALITY_MODEL", "useless")
    bad = _run(pytester, "--fairness-update")
    bad.assert_outcomes(failed=1)
    bad.stdout.fnmatch_lines(
        ["*min_quality: recommendation quality is below min_quality 0.5 for every group alike*"]
    )
    assert not list((pytester.path / "baselines").rglob("*.json"))  # a limit: never stored
    monkeypatch.delenv("QUALITY_MODEL")
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)


def test_quality_reaches_every_channel_and_the_baseline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester, monkeypatch)
    reports = [f"--fairness-report=run.{ext}" for ext in ("json", "md", "html")]
    run = _run(pytester, "--fairness-update", *reports, "--junitxml=junit.xml")
    run.assert_outcomes(passed=1)
    (baseline,) = (pytester.path / "baselines").rglob("*.json")
    stored = json.loads(baseline.read_text(encoding="utf-8"))["overlap"]["quality"]
    assert len(stored["scores"]["neutral"]) == len(DIRECTORS)  # per entity: the paired test
    groups = {g["group"] for g in stored["groups"]}
    values = {v["value"] for v in json.loads(baseline.read_text())["attributes"][0]["values"]}
    assert groups == {"neutral", *(f"religion={v}" for v in values)}
    md = (pytester.path / "run.md").read_text(encoding="utf-8")
    assert "quality (share of the 10 slots" in md
    assert "Recommendation quality" in (pytester.path / "run.html").read_text(encoding="utf-8")
    props = {
        p.get("name"): p.get("value")
        for p in ET.parse(pytester.path / "junit.xml").getroot().iter("property")
    }
    assert float(props["recfair.quality.neutral"]) == pytest.approx(
        next(g["quality"] for g in stored["groups"] if g["group"] == "neutral")
    )
    assert "recfair.religion.quality_gap" in props


def test_shards_merge_to_the_same_quality(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester, monkeypatch)
    assert_shards_merge_to_the_full_audit(pytester, shards=3)
    merged = _result(pytester.path / "merged.json")["overlap"]["quality"]
    assert merged["basis"] == "catalogue"
    assert merged["overall"] > 0.9


def test_xdist_workers_report_the_same_quality(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester, monkeypatch)
    pytester.makepyfile(
        test_audit=TESTS + '\n@fairness(attr="gender")\ndef test_gender():\n    pass\n'
    )
    subprocess_env(monkeypatch)
    args = (*plugin_args(), "-p", "no:cacheprovider", "--fairness", "--fairness-update")
    serial = pytester.runpytest_subprocess(*args, "--fairness-report=serial.json")
    serial.assert_outcomes(passed=2)
    workers = pytester.runpytest_subprocess(*args, "-n", "2", "--fairness-report=xdist.json")
    workers.assert_outcomes(passed=2)

    def quality(name: str) -> dict[str, Any]:
        results = json.loads((pytester.path / name).read_text(encoding="utf-8"))["results"]
        return {r["meta"]["test_id"]: r["overlap"]["quality"] for r in results}

    assert quality("xdist.json") == quality("serial.json")
    assert len(quality("serial.json")) == 2
