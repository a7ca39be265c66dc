"""``python -m pytest_recfair report RUN.json --to md|html``: a stored JSON run report,
rendered again (issue 11 point 1). The plugin-written round trip is in
tests/integration/test_plugin_report_cli.py."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_recfair.__main__ import main
from pytest_recfair.errors import DataError
from pytest_recfair.gate import thresholds as gate
from pytest_recfair.report.history import load_run
from pytest_recfair.report.html_report import to_html
from pytest_recfair.report.markdown import to_markdown
from pytest_recfair.report.registry import write_report
from pytest_recfair.results import AuditResult
from tests.support.synth_results import audit


@pytest.fixture(scope="module")
def run() -> tuple[list[AuditResult], AuditResult]:
    base = audit(seed=0, gender=True)
    regressed = audit(seed=7, gender=True, bias={"Islamic": -0.12}, model="sim-v2")
    steady = audit(seed=1, gender=True, test_id="tests/test_audit.py::test_steady")
    results = [
        replace(r, gate=gate.evaluate(r, base, gate.Thresholds(), tolerance=0.02))
        for r in (regressed, steady)
    ]
    return results, base


@pytest.fixture
def stored(tmp_path: Path, run: tuple[list[AuditResult], AuditResult]) -> Path:
    results, base = run
    path = tmp_path / "run.json"
    write_report(path, results, {r.meta.test_id: base for r in results})
    return path


@pytest.mark.parametrize("to", ["md", "html", "json"])
def test_render_is_identical_to_the_direct_report(
    tmp_path: Path, stored: Path, run: tuple[list[AuditResult], AuditResult], to: str
) -> None:
    results, base = run
    direct = tmp_path / f"direct.{to}"
    write_report(direct, results, {r.meta.test_id: base for r in results})
    out = tmp_path / "sub" / f"again.{to}"
    assert main(["report", str(stored), "--to", to, "-o", str(out)]) == 0
    assert out.read_bytes() == direct.read_bytes()


def test_render_to_stdout(stored: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(stored), "--to", "md"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## Fairness summary\n")
    assert "-> sim-v2" in out


def test_load_run_gives_back_results_and_baselines(
    stored: Path, run: tuple[list[AuditResult], AuditResult]
) -> None:
    results, base = run
    loaded = load_run(stored)
    assert [r.to_dict() for r in loaded.results] == [
        json.loads(json.dumps(r.to_dict())) for r in results
    ]
    assert set(loaded.baselines) == {r.meta.test_id for r in results}
    assert loaded.baselines[results[0].meta.test_id].to_dict() == base.to_dict()


def _bad(tmp_path: Path, stored: Path, case: str) -> Path:
    doc = json.loads(stored.read_text(encoding="utf-8"))
    p = tmp_path / "bad.json"
    if case == "missing":
        return tmp_path / "nope.json"
    if case == "directory":
        return tmp_path
    if case == "not json":
        p.write_text("{ truncated", encoding="utf-8")
    elif case == "not utf-8":
        p.write_bytes(b"\xff\xfe{}")
    elif case == "other json":
        p.write_text(json.dumps({"schema_version": 1}), encoding="utf-8")
    elif case == "version":
        p.write_text(json.dumps({**doc, "version": 99}), encoding="utf-8")
    elif case == "results":
        p.write_text(json.dumps({**doc, "results": {}}), encoding="utf-8")
    elif case == "result field":
        del doc["results"][1]["meta"]["model"]
        p.write_text(json.dumps(doc), encoding="utf-8")
    elif case == "matrix":
        doc["results"][0]["attributes"][0]["matrix"]["sims"][3] = ["x"]
        p.write_text(json.dumps(doc), encoding="utf-8")
    return p


BAD = {
    "missing": "no such file",
    "directory": "is a directory",
    "not json": "is not JSON (Expecting property name",
    "not utf-8": "is not UTF-8",
    "other json": "is not a pytest-recfair run report",
    "version": "is a version 99 report",
    "results": '"results" must be a list',
    "result field": "results[1].meta is invalid: 'model' is a required property",
    "matrix": "results[0].attributes[0].matrix.sims[3] is invalid: 1 cells for",
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, stored: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _bad(tmp_path, stored, case)
    out = tmp_path / "out.md"
    assert main(["report", str(bad), "--to", "md", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"error: {bad}")
    assert BAD[case] in err
    assert "Traceback" not in err
    assert not out.exists()
    with pytest.raises(DataError, match=re.escape(BAD[case])):
        load_run(bad)


def test_unknown_format_is_a_one_line_usage_error(
    stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["report", str(stored), "--to", "pdf"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "argument --to: invalid choice: 'pdf'" in err
    assert err.startswith("python -m pytest_recfair report: error:")


@pytest.mark.parametrize("where", ["directory", "under a file"])
def test_unwritable_output_is_one_line_and_leaves_nothing(
    tmp_path: Path, stored: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file")
    out = tmp_path if where == "directory" else blocker / "out.md"
    assert main(["report", str(stored), "--to", "md", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"error: cannot write {out}")
    assert blocker.read_text() == "a file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker", "run.json"]


def test_history_plots_in_html_only(
    tmp_path: Path, stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_recfair.report.history import append_run, load_history

    hist = tmp_path / "hist"
    run = load_run(stored)
    append_run(hist, run.results, run.baselines)
    out = tmp_path / "h.html"
    assert (
        main(["report", str(stored), "--to", "html", "--history", str(hist), "-o", str(out)]) == 0
    )
    expected = to_html(run.results, run.baselines, models=run.models, history=load_history(hist))
    assert out.read_text(encoding="utf-8") == expected
    assert 'id="history"' in expected
    assert main(["report", str(stored), "--to", "md", "--history", str(hist)]) == 2
    err = capsys.readouterr().err
    assert err == "error: --history is plotted by --to html only; got --to md.\n"
    assert main(["report", str(stored), "--to", "html", "--history", str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "is not a directory" in err


def test_version_names_the_installed_release(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.metadata

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == (
        f"pytest-recfair {importlib.metadata.version('pytest-recfair')}"
    )


def test_a_history_entry_is_rendered_by_its_name(
    tmp_path: Path, stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 25 point 7: entries named by number, latest, -N or commit prefix."""
    from pytest_recfair.report.history import append_run

    hist = tmp_path / "hist"
    run = load_run(stored)
    append_run(hist, run.results, run.baselines, env={"GITHUB_SHA": "deadbeef" * 5})
    assert main(["report", "latest", "--to", "md", "--history", str(hist)]) == 0
    by_name = capsys.readouterr().out
    assert by_name == to_markdown(run.results, run.baselines, models=run.models)
    assert main(["report", "deadbeef", "--to", "md", "--history", str(hist)]) == 0
    assert capsys.readouterr().out == by_name
    assert main(["report", "5", "--to", "md", "--history", str(hist)]) == 2
    assert "no such entry" in capsys.readouterr().err
