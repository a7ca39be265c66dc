"""--fairness-history=DIR: each run adds its JSON report under a new name (issue 11 point 5)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_recfair.report.history import history_runs
from tests.support.plugin import RELIGION_AND_GENDER_TESTS, REPO, make_project, plugin_args

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
    # the entry is this run's JSON report, as --fairness-report writes it, plus where it
    # came from (issue 25 point 7: commit, branch, date, machine, settings)
    report = json.loads((pytester.path / "run.json").read_text(encoding="utf-8"))
    stored = json.loads(runs[1].read_text(encoding="utf-8"))
    entry = stored.pop("entry")
    assert stored == report
    assert set(entry) == {"commit", "branch", "date", "machine", "settings"}
    assert entry["date"].startswith(runs[1].name[5:9])  # the year of the name's stamp
    assert entry["machine"]["python"] == platform.python_version()
    assert entry["settings"]["entities"] == 12  # from the ini
    assert "religion" in runs[0].read_text(encoding="utf-8")
    assert [p.name for p in history.iterdir() if p.name.startswith(".")] == []


def test_history_that_is_a_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    make_project(pytester, RELIGION_AND_GENDER_TESTS)
    (pytester.path / "hist").write_text("not a directory")
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-history=hist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--fairness-history*is a file*"])


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_recfair", *args],
        cwd=cwd,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_compare_two_history_entries(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, RELIGION_AND_GENDER_TESTS)
    args = (*plugin_args(), "--fairness", "--fairness-history=hist")
    pytester.runpytest(*args, "--fairness-update").assert_outcomes(passed=2)
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.4")  # the next model disfavours one religion
    pytester.runpytest(*args).assert_outcomes(passed=1, failed=1)
    old, new = (str(p.relative_to(pytester.path)) for p in history_runs(pytester.path / "hist"))
    done = _cli("compare", old, new, cwd=pytester.path)
    assert (done.returncode, done.stderr) == (1, ""), done.stdout
    worse = [ln.split()[:3] for ln in done.stdout.splitlines() if ln.endswith("WORSE")]
    assert ["religion", "jaccard@25", "SNSR"] in worse
    assert all(w[0] == "religion" for w in worse)
    assert done.stdout.splitlines()[-1] == "B is significantly worse than A"
    # the other way round the religion test became fairer: exit 0
    back = _cli("compare", new, old, cwd=pytester.path)
    assert (back.returncode, back.stderr) == (0, ""), back.stdout
