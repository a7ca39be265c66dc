"""``python -m pytest_recfair compare A.json B.json``: the drift table between two stored
runs, with the gate's paired test (issue 11 point 5). The command as a user runs it, on a
pytester history, is in tests/integration/test_plugin_history.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_recfair.__main__ import main
from pytest_recfair.compare.runs import compare_runs, table_lines
from pytest_recfair.report.markdown import to_json
from pytest_recfair.report.registry import write_report
from pytest_recfair.results import AuditResult
from pytest_recfair.vocab import DRIFT_QUANTITIES
from tests.support.synth_results import audit

STEADY = "tests/test_audit.py::test_steady"


@pytest.fixture(scope="module")
def before() -> list[AuditResult]:
    return [audit(seed=0, gender=True), audit(seed=0, gender=True, test_id=STEADY)]


@pytest.fixture(scope="module")
def after() -> list[AuditResult]:
    # a new model: a planted bias against one religion value; the other test only re-drawn
    return [
        audit(seed=7, gender=True, bias={"Islamic": -0.12}, model="sim-v2"),
        audit(seed=1, gender=True, test_id=STEADY),
    ]


def test_a_planted_regression_is_worse_and_nothing_else(
    before: list[AuditResult], after: list[AuditResult]
) -> None:
    c = compare_runs(before, after)
    assert c.tests == 2
    # every attribute x metric x statistic of both tests, plus the unusable share
    assert len(c.rows) == 2 * 2 * len(DRIFT_QUANTITIES)
    worse = {(r.test_id, r.attribute, r.statistic) for r in c.rows if r.worse}
    religion = before[0].meta.test_id
    assert (religion, "religion", "snsr") in worse
    assert all(t == religion and a == "religion" for t, a, _ in worse)
    row = next(
        r for r in c.rows if (r.test_id, r.attribute, r.statistic) == (religion, "religion", "snsr")
    )
    assert row.a == before[0].attribute("religion").snsr.value
    assert row.b == after[0].attribute("religion").snsr.value
    assert row.n_paired == len(before[0].attributes[0].matrix.entities)
    assert c.worse
    assert any("model sim-v1 -> sim-v2" in n for n in c.notes)


def test_a_run_against_itself_is_not_worse(before: list[AuditResult]) -> None:
    c = compare_runs(before, before)
    assert not c.worse
    assert all(r.delta == 0 for r in c.rows)
    assert table_lines(c)[-1] == "B is not significantly worse"


def test_alpha_is_split_over_the_compared_tests(
    before: list[AuditResult], after: list[AuditResult]
) -> None:
    c = compare_runs(before, after, alpha=0.05)
    footer = next(ln for ln in table_lines(c) if ln.startswith("p: "))
    assert "alpha 0.05 overall (0.025 per test over the 2 tested)" in footer
    # a row is WORSE exactly when its family-wise p is within the per-test level
    assert all(r.worse == (r.p_adjusted <= 0.025) for r in c.rows)


def test_what_cannot_be_compared_is_a_note(before: list[AuditResult]) -> None:
    other_k = replace(before[1], meta=replace(before[1].meta, k=10))
    lone = audit(seed=3, test_id="tests/test_new.py::test_new")
    c = compare_runs(before, [before[0], other_k, lone])
    assert {r.test_id for r in c.rows} == {before[0].meta.test_id}
    assert f"{STEADY}: not compared: a different list length K (k: A 25, B 10)" in c.notes
    assert "tests/test_new.py::test_new: only in B" in c.notes
    # the alpha split counts the tests actually tested: not the one with another K
    assert c.tests == 1
    assert all(r.worse == (r.p_adjusted <= 0.05) for r in c.rows)


def _write(tmp_path: Path, name: str, results: list[AuditResult]) -> Path:
    path = tmp_path / name
    write_report(path, results)
    return path


def test_command_exit_status(
    tmp_path: Path,
    before: list[AuditResult],
    after: list[AuditResult],
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b = _write(tmp_path, "a.json", before), _write(tmp_path, "b.json", after)
    assert main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert [ln.split()[:3] for ln in out.splitlines() if ln.endswith("WORSE")] == [
        ["religion", "jaccard@25", s] for s in ("SNSR", "SNSV", "PAFS")
    ]
    assert out.rstrip().endswith("B is significantly worse than A")
    assert main(["compare", str(a), str(a)]) == 0
    # the other way round the religion test got fairer: nothing is worse
    assert main(["compare", str(b), str(a)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not [ln for ln in lines if ln.endswith("WORSE")]


def test_command_bad_input_is_one_line(
    tmp_path: Path, before: list[AuditResult], capsys: pytest.CaptureFixture[str]
) -> None:
    a = _write(tmp_path, "a.json", before)
    other = _write(tmp_path, "o.json", [audit(seed=3, test_id="tests/test_new.py::test_new")])
    assert main(["compare", str(a), str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "nope.json: no such file" in err
    assert main(["compare", str(a), str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "nothing could be compared" in err
    for flag in (["--alpha", "1.5"], ["--tolerance", "-1"], ["--alpha", "x"]):
        with pytest.raises(SystemExit) as exc:
            main(["compare", str(a), str(a), *flag])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert f"argument {flag[0]}" in err
    assert json.loads(a.read_text(encoding="utf-8"))["version"] == 1


# --- every format, the JSON round trip, history entries by name (issue 25 point 7) -----------


def _written(
    tmp_path: Path, before: list[AuditResult], after: list[AuditResult]
) -> tuple[str, str]:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(to_json(before), encoding="utf-8")
    b.write_text(to_json(after), encoding="utf-8")
    return str(a), str(b)


def test_json_round_trips_to_the_same_comparison(
    tmp_path: Path,
    before: list[AuditResult],
    after: list[AuditResult],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pytest_recfair.compare.runs import Compared, parse_comparison, render_comparison

    a, b = _written(tmp_path, before, after)
    assert main(["compare", a, b, "--format", "json", "-o", str(tmp_path / "c.json")]) == 1
    text = (tmp_path / "c.json").read_text(encoding="utf-8")
    loaded = parse_comparison(text, tmp_path / "c.json")
    direct = compare_runs(before, after)
    assert loaded == Compared(direct, a, b)  # every row, note and level, unrounded
    assert render_comparison(loaded, "json") == text
    # a comparison with an undefined p-value (NaN) survives as null and back
    nan_row = replace(direct.rows[0], p_adjusted=float("nan"))
    odd = Compared(replace(direct, rows=(nan_row,)), "x", "y")
    back = parse_comparison(render_comparison(odd, "json"), tmp_path / "odd.json")
    assert json.loads(render_comparison(back, "json")) == json.loads(render_comparison(odd, "json"))
    # the stored comparison renders again in any format, with the same exit status
    assert main(["compare", str(tmp_path / "c.json"), "--format", "text"]) == 1
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "c.json"), "--format", "markdown"]) == 1
    md = capsys.readouterr().out
    assert "**B is significantly worse than A**" in md


def test_markdown_and_csv_hold_every_row(
    tmp_path: Path,
    before: list[AuditResult],
    after: list[AuditResult],
    capsys: pytest.CaptureFixture[str],
) -> None:
    import csv
    import io

    a, b = _written(tmp_path, before, after)
    direct = compare_runs(before, after)
    assert main(["compare", a, b, "--format", "csv"]) == 1
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == len(direct.rows)
    worse = [(r["attribute"], r["statistic"]) for r in rows if r["worse"] == "True"]
    assert worse == [(r.attribute, r.statistic) for r in direct.rows if r.worse]
    first = direct.rows[0]
    assert float(rows[0]["delta"]) == pytest.approx(first.delta, abs=0, rel=1e-12)
    assert main(["compare", a, b, "--format", "markdown"]) == 1
    md = capsys.readouterr().out.splitlines()
    table = [ln for ln in md if ln.startswith("| ") and not ln.startswith(("| attribute ", "|-"))]
    assert len(table) == len(direct.rows)
    assert sum("| WORSE |" in ln for ln in table) == sum(r.worse for r in direct.rows)


def test_a_bad_comparison_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "c.json"
    for text, said in (
        ("{", "is not JSON"),
        ('{"format": "other"}', "is not a comparison"),
        ('{"format": "pytest-recfair comparison", "version": 1, "rows": [{}]}', "is invalid"),
    ):
        bad.write_text(text, encoding="utf-8")
        assert main(["compare", str(bad)]) == 2
        err = capsys.readouterr().err
        assert said in err
        assert err.count("\n") == 1


def test_history_entries_are_named_by_number_latest_or_commit(
    tmp_path: Path,
    before: list[AuditResult],
    after: list[AuditResult],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pytest_recfair.report.history import append_run

    hist = tmp_path / "hist"
    append_run(hist, before, env={"GITHUB_SHA": "1234abcd" * 5})
    append_run(hist, after, env={"GITHUB_SHA": "feedbeef" * 5})
    assert main(["compare", "1", "latest", "--history", str(hist)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("A: 1 (")
    assert "[1234abc, " in out.splitlines()[0]
    assert main(["compare", "feedbeef", "1234", "--history", str(hist)]) == 0
    capsys.readouterr()
    assert main(["compare", "7", "latest", "--history", str(hist)]) == 2
    assert "no such entry" in capsys.readouterr().err
    # without --history a name is a file
    assert main(["compare", "1", "latest"]) == 2
    assert "no such file" in capsys.readouterr().err
