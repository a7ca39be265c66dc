"""The fairness summary, reports and JUnit XML show the test's real outcome (issue 9.7)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.plugin import make_project, plugin_args

pytest_plugins = ["pytester"]

# the audit itself passes (no limits, a fresh baseline); the test's own assertion fails
TESTS = """
import os

from pytest_recfair import fairness

@fairness(attr="religion")
def test_religion(fairness_result):
    if os.environ.get("RECFAIR_TEST_ASSERT") == "1":
        assert fairness_result.attributes[0].snsr.value > 5, "SNSR is not above 5"
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*plugin_args(), "--fairness", *args)


def _baselines(pytester: pytest.Pytester) -> list[Path]:
    return sorted((pytester.path / "baselines").rglob("*.json"))


def test_failing_body_is_fail_everywhere(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, TESTS)
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
    monkeypatch.setenv("RECFAIR_TEST_ASSERT", "1")
    report = pytester.path / "run.json"
    junit = pytester.path / "junit.xml"
    result = _run(pytester, f"--fairness-report={report}", f"--junitxml={junit}")
    result.assert_outcomes(failed=1)
    # pytest shows the assertion, the fairness summary agrees and says why
    result.stdout.fnmatch_lines(["*AssertionError: SNSR is not above 5*"])
    summary = result.stdout.str().split("fairness summary", 1)[1]
    assert "FAIL" in summary
    assert "the test body failed: AssertionError: SNSR is not above 5" in summary
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["summary"]["failed"] == 1
    assert data["summary"]["passed"] == 0
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert props["recfair.gate"] == "fail"


def test_passing_body_stays_pass(pytester: pytest.Pytester) -> None:
    make_project(pytester, TESTS)
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
    junit = pytester.path / "junit.xml"
    report = pytester.path / "run.json"
    _run(pytester, f"--junitxml={junit}", f"--fairness-report={report}").assert_outcomes(passed=1)
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert props["recfair.gate"] == "pass"
    assert json.loads(report.read_text(encoding="utf-8"))["summary"]["passed"] == 1


def test_update_writes_no_baseline_for_a_failing_test_and_says_so(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, TESTS)
    monkeypatch.setenv("RECFAIR_TEST_ASSERT", "1")
    result = _run(pytester, "--fairness-update")
    result.assert_outcomes(failed=1)
    assert _baselines(pytester) == []
    result.stdout.fnmatch_lines(
        [
            "*fairness baseline NOT written for test_audit.py::test_religion: the test "
            "failed (AssertionError: SNSR is not above 5*"
        ]
    )


def test_update_keeps_the_old_baseline_when_the_test_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, TESTS)
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
    (path,) = _baselines(pytester)
    before = path.read_bytes()
    monkeypatch.setenv("RECFAIR_TEST_ASSERT", "1")
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.5")  # numbers that would change the file
    _run(pytester, "--fairness-update").assert_outcomes(failed=1)
    assert path.read_bytes() == before


def test_skipped_body_is_not_judged(pytester: pytest.Pytester) -> None:
    make_project(
        pytester,
        """
import pytest
from pytest_recfair import fairness

@fairness(attr="religion")
def test_religion(fairness_result):
    pytest.skip("not today")
""",
    )
    result = _run(pytester)
    result.assert_outcomes(skipped=1)
    assert "the test body failed" not in result.stdout.str()
