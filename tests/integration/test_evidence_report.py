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
from tests.support.plugin import before_summary, make_project, plugin_args
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
    # a replay-only run on workers: said once that they do not pay
    assert before_summary(run.stdout).count("xdist: 2 workers on a replay") == 1
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


def _demo(*args: str, regressed: bool = False) -> str:
    """The demo's terminal output, run serially at the repository's root (80 columns)."""
    profile = {"RECFAIR_DEMO_PROFILE": "audits/profiles/regressed.yaml"} if regressed else {}
    env = {**os.environ, **profile, "COLUMNS": "80"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--fairness", "-p", "no:cacheprovider",
         "-p", "no:randomly", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    assert run.returncode == (1 if regressed else 0), run.stdout[-3000:] + run.stderr[-2000:]
    return run.stdout


def _summary(out: str) -> list[str]:
    """The lines of the "fairness summary" section."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if "= fairness summary =" in ln)
    end = next(i for i, ln in enumerate(lines) if i > start and ln.startswith("====="))
    return lines[start + 1 : end]


def test_a_passing_run_summary_is_a_line_per_test_and_v_shows_the_tables(
    tmp_path: Path,
) -> None:
    report = f"--fairness-report={tmp_path / 'r.json'}"
    short = _summary(_demo(report))
    results = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["results"]
    assert len(results) == 10
    assert len(short) <= 15, "\n".join(short)
    for r in results:  # each test on one line: its status, name and what it found
        name = r["meta"]["test_id"].rpartition("::")[2]
        (line,) = [ln for ln in short if ln.split()[1:2] == [name]]
        assert line.split()[0] == "PASS"
        attributes = r.get("attributes", [])  # the kinds' own: their figure (unit-tested)
        for a in attributes:  # the largest SNSR is the one named
            if a["snsr"]["value"] == max(b["snsr"]["value"] for b in attributes):
                assert f"{a['attribute']} SNSR {a['snsr']['value']:.3f}" in line
    assert not any(ln.lstrip().startswith(("note:", "tokens:", "attribute")) for ln in short)
    full = _summary(_demo("-v"))
    assert len(full) > 100  # the tables, quality, notes and tokens of every test
    assert sum(ln.split()[:2] == ["attribute", "gate"] for ln in full) == 6
    assert any(ln.lstrip().startswith("note: religion (jaccard): this test") for ln in full)


def _failure_blocks(out: str) -> dict[str, list[str]]:
    """Each failed test's text in pytest's FAILURES section, by test name."""
    failures = before_summary(out).split("= FAILURES =", 1)[1]
    failures = failures.split("\n=", 1)[0]  # up to the next section
    blocks = re.split(r"^_{3,} (\w+) _{3,}$", failures, flags=re.M)[1:]
    return {
        name: text.strip("\n").splitlines()
        for name, text in zip(blocks[::2], blocks[1::2], strict=True)
    }


def _least(a: dict[str, Any]) -> str:
    return min(a["values"], key=lambda v: v["mean"]["value"])["value"]


def test_a_failure_is_a_headline_per_statistic_before_its_evidence(tmp_path: Path) -> None:
    out = _demo(f"--fairness-report={tmp_path / 'r.json'}", regressed=True)
    results = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["results"]
    blocks = _failure_blocks(out)
    failing = [r for r in results if r["gate"]["failures"]]
    assert len(blocks) == len(failing) == 7  # every kind fails but exposure (within limits)
    for r in failing:
        block = blocks[r["meta"]["test_id"].rpartition("::")[2]]
        first = next(i for i, ln in enumerate(block) if ln.startswith("  evidence "))
        assert first <= 8, "\n".join(block)  # what failed, before the evidence
        assert sum(ln.startswith("  note:") for ln in block) <= 1
        assert block[first + 1].startswith("    ")  # the top evidence row follows
    grid = next(r for r in failing if r["meta"]["test_id"].endswith("::test_default_grid"))
    (note,) = [ln for ln in blocks["test_default_grid"] if ln.startswith("  note:")]
    routine = [n for n in grid["gate"]["notes"] if "this test can detect" in n]
    assert f"{len(routine) + 1} more on power and noise floor: -v" in note  # + the floor
    for f in (f for f in grid["gate"]["failures"] if f["kind"] == "drift"):
        a = next(a for a in grid["attributes"] if a["attribute"] == f["attribute"])
        change = f"{f['baseline']:.3f} → {f['value']:.3f} ({f['value'] - f['baseline']:+.3f}"
        floor = "" if f.get("tolerance") is None else f" (noise floor; {f['tolerance']:g} set)"
        headline = f"  {f['attribute']} SNSR {change}, tolerance {f['limit']:.3g}{floor}, p "
        (line,) = [ln for ln in blocks["test_default_grid"] if ln.startswith(headline)]
        assert line.endswith(f": {_least(a)} least favoured")
    # the summary: a line per test, a failing one with its headlines, no evidence
    summary = _summary(out)
    assert "evidence " not in "\n".join(summary)
    assert sum(ln.lstrip().startswith("✗ ") for ln in summary) >= len(failing)


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
