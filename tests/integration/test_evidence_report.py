"""Evidence for every failure (issue 25 point 6), through real pytest runs.

The demo run against its regressed profile (docs/demo.md) fails a test of each kind: each
failing test must show, in the HTML report rendered by headless Chromium, at least three
entities (directors, cities, questions) with their lists; the Markdown report and the
terminal (``-v``) name them too. The run goes through pytest-xdist (``-n 2``), so the
evidence also travels in the workers' payloads. Shards + merge give the unsharded
evidence.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_html_report import _chromium, _run
from tests.support.plugin import make_project, plugin_args
from tests.support.reports import render_reports

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
MIN_ROWS = 3
#: one entity's collapsible row (its reply texts are <details> nested inside it)
ROW = r'<details class="row">(.*?)</details>\s*(?=<details class="row">|</section>)'


@pytest.fixture(scope="module")
def regressed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("regressed")
    env = {**os.environ, "RECFAIR_DEMO_PROFILE": "audits/profiles/regressed.yaml", "COLUMNS": "120"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--fairness", "-p", "no:cacheprovider",
         "-p", "no:randomly", "-n", "2", "-v", "audits", f"--fairness-report={out / 'r.json'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=False, env=env,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-2000:]
    results = render_reports(out, ROOT)
    return {"dir": out, "results": results, "terminal": run.stdout}


def _failing(results: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[str]]]:
    """Each failing result with the attributes its gate failed on."""
    out = []
    for r in results:
        failures = (r.get("gate") or {}).get("failures") or []
        attrs = list(dict.fromkeys(f["attribute"] for f in failures if f.get("attribute")))
        if attrs:
            out.append((r, attrs))
    return out


def _words(text: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


def test_every_kind_fails_and_carries_evidence_in_json(regressed: dict[str, Any]) -> None:
    failing = _failing(regressed["results"])
    # the four list-overlap tests, item side, candidate position, role play
    assert len(failing) == 7, [r["meta"]["test_id"] for r, _ in failing]
    for r, attrs in failing:
        for attr in attrs:
            rows = r["evidence"][attr]["rows"]
            assert len(rows) >= MIN_ROWS, (r["meta"]["test_id"], attr)
            for row in rows:
                where = (r["meta"]["test_id"], attr, row["entity"])
                # an empty list (a refusal) says so; its reply text shows why
                assert all(lst["titles"] or lst["notes"] for lst in row["lists"]), where
                # a neutral list comes with the conditioned one(s) beside it; a role-play
                # question's list is its answer in every round
                assert row["lists"][0]["label"] != "neutral" or len(row["lists"]) >= 2, where
                assert any(lst.get("reply") for lst in row["lists"])


def test_html_shows_three_entities_with_lists_per_failing_test(
    regressed: dict[str, Any], tmp_path: Path
) -> None:
    chromium = _chromium()
    done = _run(chromium, tmp_path, "--dump-dom", (regressed["dir"] / "r.html").as_uri())
    dom = done.stdout
    assert "Fairness report" in dom, f"no DOM dumped; chromium said:\n{done.stderr[-2000:]}"
    sections = dom.split('<section class="test"')[1:]
    for r, attrs in _failing(regressed["results"]):
        test_id = r["meta"]["test_id"]
        (section,) = [s for s in sections if html.escape(test_id) in s or test_id in s]
        rows = re.findall(ROW, section, flags=re.S)
        assert len(rows) >= MIN_ROWS, test_id
        for row in rows:
            table = re.search(r'<table class="lists">(.*?)</table>', row, flags=re.S)
            assert table is not None, test_id
            cells = re.findall(r"<td>(.*?)</td>", table.group(1), flags=re.S)
            assert cells, test_id
            assert all("<li" in c for c in cells), test_id  # every list shows its entries
            assert '<pre class="reply">' in row, test_id  # the reply text, one click away
        text = _words(section)
        for attr in attrs:
            assert f"Evidence: {attr}" in text
            for row in r["evidence"][attr]["rows"]:
                assert " ".join(row["entity"].split()) in text, (test_id, row["entity"])


def test_markdown_and_terminal_name_the_entities(regressed: dict[str, Any]) -> None:
    md = (regressed["dir"] / "r.md").read_text(encoding="utf-8").replace("\\", "")
    terminal = " ".join(regressed["terminal"].split())
    for r, attrs in _failing(regressed["results"]):
        for attr in attrs:
            assert f"**Evidence, {attr}**" in md
            assert f"evidence {attr}: " in terminal
            for row in r["evidence"][attr]["rows"]:
                name = " ".join(row["entity"].split())
                assert name in md, (attr, name)
                assert name in terminal, (attr, name)


def test_without_v_the_terminal_keeps_the_summary_short(tmp_path: Path) -> None:
    env = {**os.environ, "RECFAIR_DEMO_PROFILE": "audits/profiles/regressed.yaml"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--fairness", "-p", "no:cacheprovider", "-p",
         "no:randomly", "audits/test_kinds.py", f"--fairness-report={tmp_path / 'r.json'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout[-3000:]
    assert "fairness summary" in run.stdout
    assert "evidence " not in run.stdout


# --- shards + merge ------------------------------------------------------------------

TESTS = """
from pytest_recfair import fairness


@fairness(attr="religion", metric="jaccard,serp", repeats=2)
def test_religion():
    pass
"""


def test_merged_shards_give_the_unsharded_evidence(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.4")
    monkeypatch.setenv("RECFAIR_TEST_NOISE", "0.1")
    # one repeat: the in-process simulator draws a repeated prompt's noise in call order,
    # so which reply is "the first repeat" would depend on the workers' timing
    make_project(pytester, TESTS.replace("repeats=2", "repeats=1, entities=30"))

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", *args)

    run("--fairness", "--fairness-report=full.json")
    for i in (1, 2, 3):
        run("--fairness", f"--fairness-shard={i}/3").assert_outcomes(skipped=1)
    run("--fairness", "--fairness-merge=fairness-shards", "--fairness-report=merged.json")
    full = json.loads((pytester.path / "full.json").read_text())["results"][0]
    merged = json.loads((pytester.path / "merged.json").read_text())["results"][0]
    assert set(full["evidence"]) == {"religion.jaccard", "religion.serp"}
    for entry in full["evidence"].values():
        assert len(entry["rows"]) >= MIN_ROWS
    assert merged["evidence"] == full["evidence"]
    shards = list((pytester.path / "fairness-shards").iterdir())
    # bounded: each shard file carries at most KEEP candidates per attribute
    from pytest_recfair.engine.overlap.evidence import KEEP

    for path in shards:
        kept = json.loads(path.read_text())["tally"]["evidence"]
        assert all(0 < len(c) <= KEEP for c in kept.values())


def test_replay_keeps_evidence_and_a_passing_page_shows_none(tmp_path: Path) -> None:
    """Replaying the committed cassettes (record mode none): the JSON holds each
    attribute's evidence; the test passes, so no channel shows it."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--fairness", "-p", "no:cacheprovider", "-p",
         "no:randomly", "-v", "audits/test_demo.py::test_religion_all_metrics",
         f"--fairness-report={tmp_path / 'r.json'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:]
    (result,) = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["results"]
    assert set(result["evidence"]) == {a["attribute"] for a in result["attributes"]}
    for entry in result["evidence"].values():
        assert len(entry["rows"]) >= MIN_ROWS
    assert "evidence " not in run.stdout
    subprocess.run(
        [sys.executable, "-m", "pytest_recfair", "report", str(tmp_path / "r.json"), "--to",
         "html", "-o", str(tmp_path / "r.html")],
        cwd=ROOT, check=True, timeout=120,
    )  # fmt: skip
    assert 'class="evidence"' not in (tmp_path / "r.html").read_text(encoding="utf-8")
