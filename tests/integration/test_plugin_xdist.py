"""Under pytest-xdist, results reach the controller: one summary, one report, all baselines."""

from __future__ import annotations

import json

import pytest

from tests.support.plugin import make_project, plugin_args, subprocess_env

pytest_plugins = ["pytester"]

TESTS = "\n".join(
    f"""
@fairness(attr="{attr}")
def test_{attr}():
    pass
"""
    for attr in ("religion", "gender", "age", "race")
)


def test_xdist_two_workers(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    subprocess_env(monkeypatch)
    make_project(pytester, "from pytest_recfair import fairness\n" + TESTS)
    report = pytester.path / "fairness.json"
    junit = pytester.path / "junit.xml"
    args = (*plugin_args(), "-n", "2", "--fairness", f"--fairness-report={report}")
    result = pytester.runpytest_subprocess(*args, "--fairness-update", f"--junitxml={junit}")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*= fairness summary =*"])
    # one summary, listing every audit exactly once
    assert result.stdout.str().count("= fairness summary =") == 1
    assert len(list((pytester.path / "baselines").rglob("*.json"))) == 4
    data = json.loads(report.read_text())
    assert "religion" in json.dumps(data)
    assert "race" in json.dumps(data)
    assert junit.read_text().count('name="recfair.gate"') == 4

    assert not list(pytester.path.rglob("*.tmp"))
    # the baselines the workers wrote are whole: a plain run compares against all four
    pytester.runpytest(*plugin_args(), "--fairness").assert_outcomes(passed=4)
