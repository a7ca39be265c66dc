"""--fairness-history=DIR: each run adds its JSON report under a new name (issue 11 point 5)."""

from __future__ import annotations

import json

import pytest

from pytest_recfair.report.history import history_runs
from tests.support.plugin import RELIGION_AND_GENDER_TESTS, make_project, plugin_args

pytest_plugins = ["pytester"]


def test_each_run_appends_one_entry(pytester: pytest.Pytester) -> None:
    make_project(pytester, RELIGION_AND_GENDER_TESTS)
    history = pytester.path / "hist"
    args = (*plugin_args(), "--fairness", "--fairness-history=hist")
    pytester.runpytest(*args, "--fairness-update").assert_outcomes(passed=2)
    result = pytester.runpytest(*args, "--fairness-report=run.json")
    result.assert_outcomes(passed=2)
    runs = history_runs(history)
    assert [p.name[:5] for p in runs] == ["0001_", "0002_"]
    result.stdout.fnmatch_lines([f"fairness history entry written: {runs[1]}"])
    # the entry is this run's JSON report, as --fairness-report writes it
    report = json.loads((pytester.path / "run.json").read_text(encoding="utf-8"))
    assert json.loads(runs[1].read_text(encoding="utf-8")) == report
    assert "religion" in runs[0].read_text(encoding="utf-8")
    assert [p.name for p in history.iterdir() if p.name.startswith(".")] == []


def test_history_that_is_a_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    make_project(pytester, RELIGION_AND_GENDER_TESTS)
    (pytester.path / "hist").write_text("not a directory")
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-history=hist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--fairness-history*is a file*"])
