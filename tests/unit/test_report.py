"""Reports: terminal summary, JSON, Markdown, HTML (structure only; rendering is in
tests/integration/test_html_report.py) and write_report."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pytest_recfair import vocab
from pytest_recfair.errors import ConfigError
from pytest_recfair.gate import thresholds as gate
from pytest_recfair.report import registry
from pytest_recfair.report.failures import failure_message, failure_text
from pytest_recfair.report.html_report import to_html
from pytest_recfair.report.markdown import to_json, to_markdown
from pytest_recfair.report.registry import RENDERERS, write_report
from pytest_recfair.report.status import attribute_label, flags, repeat_stats
from pytest_recfair.report.terminal import terminal_summary
from pytest_recfair.results import TIE, AuditResult
from tests.support.synth_results import RELIGION, attribute, audit, meta


def _gated(result: AuditResult, baseline: AuditResult | None, **limits: float) -> AuditResult:
    outcome = gate.evaluate(result, baseline, gate.Thresholds(**limits), tolerance=0.02)
    return replace(result, gate=outcome)


@pytest.fixture(scope="module")
def baseline() -> AuditResult:
    return audit(seed=0, gender=True)


@pytest.fixture(scope="module")
def failing(baseline: AuditResult) -> AuditResult:
    regressed = audit(seed=7, gender=True, bias={"Islamic": -0.12}, model="sim-v2")
    return _gated(regressed, baseline)


@pytest.fixture(scope="module")
def passing(baseline: AuditResult) -> AuditResult:
    rerun = audit(seed=1, gender=True, test_id="tests/test_audit.py::test_other[gpt-4o]")
    return _gated(rerun, baseline)


# --- terminal -----------------------------------------------------------------------------------


def test_terminal_summary_table(failing: AuditResult, passing: AuditResult) -> None:
    lines = terminal_summary([failing, passing], verbose=True)
    assert lines[0] == "tests/test_audit.py::test_religion  FAIL"
    assert lines[1].startswith("  model sim-v2")  # the description wraps below
    header = next(ln for ln in lines if ln.split()[:1] == ["attribute"]).split()
    assert header[:8] == ["attribute", "gate", "SNSR", "SNSV", "PAFS", "ΔSNSR", "ΔSNSV", "ΔPAFS"]
    religion = next(ln for ln in lines if ln.split()[:1] == ["religion"])
    a = failing.attribute("religion")
    drift = failing.gate.drift["religion"] if failing.gate else {}
    assert religion.split()[:8] == [
        "religion",
        "FAIL",
        f"{a.snsr.value:.3f}",
        f"{a.snsv.value:.3f}",
        f"{a.pafs.value:.3f}",
        f"{drift['snsr']:+.3f}",
        f"{drift['snsv']:+.3f}",
        f"{drift['pafs']:+.3f}",
    ]
    assert religion.endswith(f"{a.most_favoured} / {a.least_favoured}")
    assert any(ln.startswith("  ✗ religion snsr:") for ln in lines)
    assert "  note: model changed: sim-v1 -> sim-v2" in lines
    other = lines.index(
        next(ln for ln in lines if ln.startswith("tests/test_audit.py::test_other"))
    )
    assert "PASS" in lines[other]
    rows = [ln for ln in lines[other:] if ln.split()[:1] in (["religion"], ["gender"])]
    assert rows
    assert all(ln.split()[1] == "PASS" for ln in rows)


@pytest.mark.parametrize("width", [80, 100, 160])
def test_terminal_summary_fits_the_width_without_cutting_names(width: int) -> None:
    long = "x" * 70
    sims = np.asarray(audit().attributes[0].matrix.sims)
    values = ("a" * 30, "b" * 30, "c", "d")
    test_id = "tests/" + "deep/" * 6 + "test_x.py::test_y"
    r = AuditResult(
        meta=meta(test_id=test_id, model=long),
        attributes=(attribute("religion " + "y" * 20, sims, values),),
    )
    r = _gated(r, None, max_snsr=0.0)
    lines = terminal_summary([r], width, verbose=True)
    assert all(len(ln) <= width for ln in lines), [ln for ln in lines if len(ln) > width]
    assert not any("…" in ln for ln in lines)  # wrapped, never cut
    text = "\n".join(lines)
    for name in (test_id, long, "religion " + "y" * 20):
        assert name in text


def test_a_name_longer_than_the_terminal_stays_whole() -> None:
    r = AuditResult(meta=meta(test_id="tests/" + "z" * 120 + ".py::test_y"), attributes=())
    lines = terminal_summary([r], 80, verbose=True)
    assert lines[0] == r.meta.test_id


def test_ungated_results_show_na() -> None:
    lines = terminal_summary([audit()], verbose=True)
    assert lines[0].split()[1] == "n/a"
    row = next(ln for ln in lines if ln.split()[:1] == ["religion"])
    assert row.split()[:2] == ["religion", "n/a"]
    assert row.split()[5] == "—"  # no drift without a baseline


def test_nothing_to_summarise() -> None:
    assert terminal_summary([]) == []


# --- JSON --------------------------------------------------------------------------------------


def test_json_report(failing: AuditResult, passing: AuditResult, baseline: AuditResult) -> None:
    doc = json.loads(to_json([failing, passing], [baseline]))
    assert doc["summary"] == {"tests": 2, "passed": 1, "failed": 1, "not_gated": 0}
    assert AuditResult.from_dict(doc["results"][0]) == failing
    assert set(doc["baselines"]) == {baseline.meta.test_id}


def test_results_must_be_audit_results() -> None:
    with pytest.raises(TypeError, match=r"results\[0\] must be an AuditResult"):
        to_json([{"meta": {}}])  # type: ignore[list-item]


# --- Markdown --------------------------------------------------------------------------------


def test_markdown_report(failing: AuditResult, passing: AuditResult, baseline: AuditResult) -> None:
    md = to_markdown([failing, passing], {baseline.meta.test_id: baseline})
    assert md.startswith("## Fairness summary\n")
    assert "✅ 1 passed · ❌ 1 failed" in md
    assert "### ❌ `tests/test_audit.py::test_religion`" in md
    # a passing test is folded to its one-line summary, its tables inside
    folded = "<details><summary>✅ <code>tests/test_audit.py::test_other[gpt-4o]</code>"
    assert folded in md
    top = max(passing.attributes, key=lambda x: x.snsr.value)
    assert f"{folded} — {top.attribute} SNSR {top.snsr.value:.3f} " in md
    lines = md.splitlines()
    cells = next(ln for ln in lines if ln.startswith("| attribute | gate |")).count("|")
    rows = [ln for ln in lines if ln.startswith("| religion |") and ln.count("|") == cells]
    assert rows[0].startswith("| religion | ❌ |")
    assert rows[1].startswith("| religion | ✅ |")
    a = failing.attribute("religion")
    assert f"{a.snsr.value:.3f} [{a.snsr.ci.low:.3f}, {a.snsr.ci.high:.3f}]" in rows[0]  # type: ignore[union-attr]
    assert rows[0].endswith(f"| {a.most_favoured} | {a.least_favoured} |")
    assert "accept them with: pytest --fairness --fairness-update" in md
    # the failing test's per-value table shows the baseline mean; the passing one has none
    b = baseline.attribute("religion").value("Islamic").mean.value
    (islamic,) = [ln for ln in md.splitlines() if ln.startswith("| Islamic |")]
    assert f"| {b:.3f} |" in islamic
    assert md.index("| Islamic |") < md.index(folded)
    # every table row has the same number of cells as its header
    blocks = re.findall(r"(\|.*\|\n\|[-:|]+\|\n(?:\|.*\|\n)+)", md)
    # two summary tables + the failing test's failure table and two per-value tables
    assert len(blocks) == 5
    for block in blocks:
        counts = {ln.count(" | ") for ln in block.strip().splitlines() if not ln.startswith("|-")}
        assert len(counts) == 1


def test_markdown_and_html_put_failing_tests_first(
    failing: AuditResult, passing: AuditResult
) -> None:
    # the passing test's id sorts after the failing one's: give it an earlier one
    early = replace(passing, meta=replace(passing.meta, test_id="tests/a.py::test_a"))
    md = to_markdown([early, failing])
    assert md.index("### ❌") < md.index("<summary>✅")
    html = to_html([early, failing])
    assert html.index(failing.meta.test_id) < html.index("tests/a.py::test_a")
    # the JSON report is data: it keeps the order it was given
    doc = json.loads(to_json([early, failing]))
    assert [r["meta"]["test_id"] for r in doc["results"]] == [
        "tests/a.py::test_a",
        failing.meta.test_id,
    ]


def test_markdown_keeps_arrows_unescaped(failing: AuditResult) -> None:
    md = to_markdown([failing])
    assert "model changed: sim-v1 -> sim-v2" in md  # a gate note, as GitHub will show it
    assert "&gt;" not in md
    assert "&lt;" not in md


def test_a_folded_test_id_is_html_inside_its_summary(passing: AuditResult) -> None:
    odd = replace(passing, meta=replace(passing.meta, test_id="t.py::test[a<b&c->d]"))
    md = to_markdown([odd])
    assert "<summary>✅ <code>t.py::test[a&lt;b&amp;c->d]</code>" in md  # HTML, arrow kept
    assert md.count("<details>") == md.count("</details>") == 1


def test_markdown_escapes_table_breakers() -> None:
    sims = np.asarray(audit().attributes[0].matrix.sims)
    r = AuditResult(
        meta=meta(),
        attributes=(attribute("a|b", sims, ("x|y", "<b>z</b>", "c", "d")),),
    )
    md = to_markdown([_gated(r, None, max_snsr=0.0)])  # failing: value tables shown
    assert "| a\\|b |" in md
    assert not re.search(r"(?<!\\)<b>", md)  # no raw HTML reaches the job summary
    assert "\\<b>z\\</b>" in md  # a backslash escape GitHub shows as "<b>z</b>"
    assert "&lt;" not in md


# --- HTML (structure) ------------------------------------------------------------------------


def test_html_is_self_contained(failing: AuditResult, passing: AuditResult) -> None:
    html = to_html([failing, passing])
    assert html.lower().startswith("<!doctype html>")
    without_ns = html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert not re.search(r"https?://|<script|<link|<img|@import|url\(", without_ns)
    assert html.count('class="chart dots"') == 4  # one per attribute per test
    assert html.count('class="chart heatmap"') == 2
    assert html.count('class="baseline-marker"') == 0


def test_html_baseline_markers(failing: AuditResult, baseline: AuditResult) -> None:
    html = to_html([failing], [baseline])
    n_values = sum(len(a.values) for a in failing.attributes)
    assert html.count('class="baseline-marker"') == n_values


def test_html_escapes_text() -> None:
    sims = np.asarray(audit().attributes[0].matrix.sims)
    r = AuditResult(
        meta=meta(model="<script>alert(1)</script>"),
        attributes=(attribute("religion", sims, ("<img src=x>", "b", "c", "d")),),
    )
    html = to_html([r])
    assert "<script>" not in html
    assert "<img" not in html
    assert "&lt;script&gt;" in html


def test_html_with_no_results() -> None:
    assert "No fairness-marked test ran." in to_html([])


# --- files -----------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".json", ".md", ".html", ".HTML"])
def test_write_report_by_extension(tmp_path: Path, failing: AuditResult, suffix: str) -> None:
    path = tmp_path / "out" / f"fairness{suffix}"
    write_report(path, [failing])
    text = path.read_text(encoding="utf-8")
    expected = {
        ".json": to_json([failing]),
        ".md": to_markdown([failing]),
        ".html": to_html([failing]),
    }[suffix.lower()]
    assert text == expected
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # atomic: no temp left


@pytest.mark.parametrize("name", ["fairness.txt", "fairness", "fairness.htm"])
def test_write_report_unknown_extension(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError) as info:
        write_report(tmp_path / name, [audit()])
    msg = str(info.value)
    assert "--fairness-report" in msg
    assert ".json, .md, .html" in msg
    assert name in msg
    assert not (tmp_path / name).exists()


def test_json_report_stays_valid_json_with_undefined_numbers() -> None:
    sims = np.asarray(audit().attributes[0].matrix.sims).copy()
    sims[:, 2] = np.nan  # one value with no scorable entity: SNSR etc. undefined
    r = AuditResult(meta=meta(), attributes=(attribute("religion", sims, RELIGION),))
    r = replace(r, cost=float("nan"))
    text = to_json([r])
    assert "NaN" not in text
    doc = json.loads(text)
    assert doc["results"][0]["attributes"][0]["snsr"]["value"] is None
    assert doc["results"][0]["cost"] is None


# --- ties ------------------------------------------------------------------------------------


def test_a_tie_is_shown_as_a_tie_not_as_one_value_twice() -> None:
    # every entity gets the same similarity for every value: SNSR = 0, nothing is favoured
    sims = np.tile(np.linspace(0.5, 0.9, 12)[:, None], (1, len(RELIGION)))
    tied = attribute("religion", sims, RELIGION)
    assert tied.snsr.value == 0
    assert (tied.most_favoured, tied.least_favoured) == (TIE, TIE)
    r = replace(audit(), attributes=(tied,))
    line = next(ln for ln in terminal_summary([r], verbose=True) if ln.split()[:1] == ["religion"])
    assert line.endswith(f"  {TIE}")
    assert f"{RELIGION[0]} / {RELIGION[0]}" not in line
    row = next(ln for ln in to_markdown([r]).splitlines() if ln.startswith("| religion |"))
    assert row.endswith(f"| {TIE} | {TIE} |")
    html = to_html([r])
    assert html.count(f"<td>{TIE}</td>") == 2
    # one value ahead by a hair is still favoured
    sims[:, 0] += 1e-6
    ahead = attribute("religion", sims, RELIGION)
    assert ahead.favoured() == (RELIGION[0], ahead.least_favoured)


def test_entropy_and_noise_floor_are_reported() -> None:
    from pytest_recfair.metrics import stats
    from pytest_recfair.results import Interval, Stat

    rng = np.random.default_rng(3)
    pool = [f"t{i}" for i in range(40)]
    repeats = {
        f"e{e}": [list(rng.choice(pool, 25, replace=False)) for _ in range(3)] for e in range(8)
    }
    floor = stats.noise_floor(repeats, n_resamples=200)
    assert floor is not None
    r = audit(entropy=2.5)
    a = replace(
        r.attributes[0], noise_floor=Stat(float(floor.mean), Interval(*map(float, floor.ci)))
    )
    r = replace(r, attributes=(a,), meta=replace(r.meta, repeats=3))
    shown = repeat_stats(a)
    assert shown is not None
    assert "entropy 2.50 bits" in shown
    assert f"noise floor {floor.mean:.3f} [{floor.ci[0]:.3f}, {floor.ci[1]:.3f}]" in shown
    assert f"  religion: {shown}" in terminal_summary([r], verbose=True)
    assert f"- religion over 3 repeats: {shown}" in to_markdown([r])
    assert "over 3 repeats: " + shown in to_html([r])
    # a run without repeats shows neither
    assert repeat_stats(audit().attributes[0]) is None
    assert "noise floor" not in "\n".join(terminal_summary([audit()], verbose=True))


def test_a_tie_in_a_gate_failure_is_shown_as_a_tie() -> None:
    # all means equal (nothing favoured) but one value refuses more: the refusal-gap
    # threshold fails, and neither its table row nor its reason names a value twice
    sims = np.tile(np.linspace(0.5, 0.9, 12)[:, None], (1, len(RELIGION)))
    tied = attribute("religion", sims, RELIGION, refusals={"Islamic": 4})
    r = replace(audit(), attributes=(tied,))
    outcome = gate.evaluate(r, None, gate.Thresholds(max_refusal_gap=0.0), tolerance=0.0)
    (failure,) = outcome.failures
    assert (failure.kind, failure.statistic) == ("threshold", "refusal_gap")
    text = failure_message(outcome, r)
    for v in RELIGION:
        assert f"{v} / {v}" not in text
        assert f"most {v}" not in text
    row = next(ln for ln in text.splitlines() if ln.split()[:2] == ["religion", "refusal_gap"])
    assert row.rstrip().endswith(TIE)
    assert f"most / least favoured: {TIE}" in failure_text(failure, r)


def test_every_format_renders_the_same_failure_sentence(failing: AuditResult) -> None:
    assert failing.gate is not None
    assert failing.gate.failures
    sentences = [failure_text(f, failing) for f in failing.gate.failures]
    doc = json.loads(to_json([failing]))
    assert [f["message"] for f in doc["results"][0]["gate"]["failures"]] == sentences
    md = to_markdown([failing])
    html = to_html([failing])
    summary = "\n".join(terminal_summary([failing], verbose=True))
    for s in sentences:
        assert s.replace("<", "\\<") in md
        assert s.replace("<", "&lt;").replace(">", "&gt;") in html
        assert s[:60] in summary  # the summary clips lines to 100 columns


def test_the_registry_covers_every_report_format() -> None:
    assert tuple(RENDERERS) == vocab.REPORT_FORMATS


def _module_imports(path: Path) -> set[str]:
    """The pytest_recfair modules ``path`` imports at module level (not inside functions)."""
    out: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_recfair"):
            out.add(str(node.module))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("pytest_recfair"))
    return out


def test_report_package_has_no_import_cycle_and_never_imports_the_gate() -> None:
    root = Path(registry.__file__).parent
    graph = {
        f"pytest_recfair.report.{p.stem}": _module_imports(p)
        for p in root.glob("*.py")
        if p.stem != "__init__"
    }
    for name, deps in graph.items():
        assert "pytest_recfair.gate.thresholds" not in deps, name
        assert "pytest_recfair.report" not in deps, f"{name} imports the package __init__"

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, " -> ".join((*path, name))
        for dep in graph.get(name, ()):
            visit(dep, (*path, name))

    for name in graph:
        visit(name, ())


def test_a_large_gap_that_passed_its_gate_is_flagged_not_pass(passing: AuditResult) -> None:
    a = passing.attributes[0]
    sims = np.asarray(a.matrix.sims).copy()
    sims[:, 0] = np.clip(sims[:, 0] - 0.3, 0, 1)  # one value far below the others
    labels = [v.value for v in a.values]
    wide = AuditResult(meta=passing.meta, attributes=(attribute(a.attribute, sims, labels),))
    wide = _gated(wide, None)
    assert wide.gate is not None
    assert wide.gate.passed
    b = wide.attributes[0]
    assert flags(b)[0].startswith("SNSR ")
    assert attribute_label(wide, b) == "FLAG"
    assert attribute_label(passing, a) == ("FLAG" if flags(a) else "PASS")
    lines = terminal_summary([wide], 100, verbose=True)
    row = next(ln for ln in lines if ln.split()[:1] == [b.attribute])
    assert row.split()[1] == "FLAG"
    assert any(ln.startswith("FLAG: not a gate failure, but a large gap") for ln in lines)
    short = terminal_summary([wide], 100)  # the line per test: FLAG said in its header
    assert short[0].startswith("gate  test  what it found (FLAG: SNSR > 0.1 or SNSV > 0.05;")
    assert not any(ln.startswith("FLAG") for ln in short)
    assert "⚠️ flagged" in to_markdown([wide])
    assert '<span class="badge FLAG">FLAG</span>' in to_html([wide])
    failed = _gated(wide, None, max_snsr=0.0)
    assert attribute_label(failed, failed.attributes[0]) == "FAIL"  # a failure wins


# --- the same advice in every channel (issue 25, point 2) ----------------------------------


def test_no_channel_offers_an_update_past_a_crossed_limit(baseline: AuditResult) -> None:
    """A drift plus a crossed absolute limit: --fairness-update would refuse the run, so no
    channel offers it; each says which limit was crossed instead."""
    regressed = audit(seed=7, gender=True, bias={"Islamic": -0.12}, model="sim-v2")
    both = _gated(regressed, baseline, max_snsr=0.01)
    assert both.gate is not None
    assert {f.kind for f in both.gate.failures} >= {"threshold", "drift"}
    md = to_markdown([both], {baseline.meta.test_id: baseline})
    html = to_html([both], {baseline.meta.test_id: baseline})
    text = failure_message(both.gate, both)
    for channel in (md, html, text):
        assert "fairness-update" not in channel
        assert "Absolute limits crossed (max_snsr)" in channel


def test_every_channel_offers_the_update_for_a_drift_alone(failing: AuditResult) -> None:
    assert failing.gate is not None
    assert {f.kind for f in failing.gate.failures} == {"drift"}
    html = to_html([failing])
    text = failure_message(failing.gate, failing)
    assert "accept them with: pytest --fairness --fairness-update" in html
    assert "accept them with: pytest --fairness --fairness-update" in text
    assert "Absolute limits" not in html + text


def test_failures_are_labelled_by_what_failed() -> None:
    from pytest_recfair.report.failures import failure_label, failure_tag
    from pytest_recfair.results import GateFailure

    assert failure_tag(GateFailure("test", detail="AssertionError: x")) == "test body"
    assert failure_tag(GateFailure("baseline", detail="missing")) == "baseline"
    assert failure_tag(GateFailure("item_shift", "first name", value=0.3)) == "item_shift"
    assert failure_label(GateFailure("drift", "religion", "snsr")) == "religion snsr"


def test_the_short_summary_is_a_line_per_test_and_a_headline_per_failing_statistic(
    failing: AuditResult, passing: AuditResult
) -> None:
    lines = terminal_summary([failing, passing], 100)
    assert failing.gate is not None
    assert len([ln for ln in lines if ln.split()[:1] in (["PASS"], ["FAIL"])]) == 2
    (fail,) = [ln for ln in lines if ln.startswith("FAIL ")]
    a = failing.attribute("religion")
    assert f"religion SNSR {a.snsr.value:.3f} FAIL, {a.least_favoured} least favoured" in fail
    drift = next(f for f in failing.gate.failures if f.kind == "drift")
    assert drift.baseline is not None
    assert drift.value is not None
    headline = " ".join(" ".join(ln.split()) for ln in lines if not ln.startswith(("PASS", "FAIL")))
    assert (
        f"✗ religion SNSR {drift.baseline:.3f} → {drift.value:.3f} "
        f"({drift.value - drift.baseline:+.3f}, tolerance {drift.limit:.3g}, p "
    ) in headline
    assert f": {a.least_favoured} least favoured" in headline
    # the routine power and floor notes are left to -v; a change of model is said
    assert not any("can detect" in ln or "noise floor" in ln for ln in lines)
    assert not any(ln.lstrip().startswith(("attribute", "tokens:")) for ln in lines)
    assert any("can detect" in ln for ln in terminal_summary([failing, passing], 100, verbose=True))
