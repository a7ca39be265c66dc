"""--fairness-update says what it changed and which baselines no test used (issue 11.3)."""

from __future__ import annotations

import pytest

from tests.support.plugin import RELIGION_AND_GENDER_TESTS, make_project, plugin_args

pytest_plugins = ["pytester"]

TESTS = RELIGION_AND_GENDER_TESTS


def _update(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update", *args)


def test_update_prints_old_to_new(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, TESTS)
    first = _update(pytester)
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(["fairness baseline written: *test_religion.json", "  new baseline"])
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.4")  # religion moves, gender does not
    second = _update(pytester)
    second.assert_outcomes(passed=2)
    out = second.stdout.str()
    second.stdout.fnmatch_lines(
        [
            "fairness baseline written: *test_gender.json",
            "  unchanged (3 decimals)",
            "fairness baseline written: *test_religion.json",
            "  religion (jaccard): SNSR 0.000 -> 0.* SNSV 0.000 -> 0.* PAFS 1.000 -> 0.*",
        ]
    )
    assert "not used by any test" not in out


def test_update_lists_baselines_no_test_used(pytester: pytest.Pytester) -> None:
    make_project(pytester, TESTS)
    _update(pytester).assert_outcomes(passed=2)
    pytester.makepyfile(test_audit=TESTS.replace("def test_gender", "def test_sex"))
    result = _update(pytester)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "fairness baseline not used by any test of this run: *test_gender.json "
            "(test_audit.py::test_gender); delete it if that test is gone"
        ]
    )
    # a narrowed run cannot tell unused from deselected: it says nothing
    narrowed = _update(pytester, "-k", "religion")
    assert "not used by any test" not in narrowed.stdout.str()
    by_id = _update(pytester, "test_audit.py::test_religion")
    assert "not used by any test" not in by_id.stdout.str()


def test_a_missing_baseline_is_reported_with_the_crossed_limits(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, TESTS.replace('attr="religion"', 'attr="religion", max_snsr=0.1'))
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.4")
    result = pytester.runpytest(*plugin_args(), "--fairness", "-k", "religion")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*religion*snsr*max 0.1*",
            "Absolute limits crossed (max_snsr)*",
            "no fairness baseline for test_audit.py::test_religion * It cannot be created from "
            "this run: --fairness-update stores only a run that passes its absolute limits.",
        ]
    )
    result.stdout.no_fnmatch_line("*Create it from this run with*")
