"""The gate: thresholds and significant rises fail the test item in the call phase."""

from __future__ import annotations

import pytest

from tests.support.plugin import make_project, plugin_args

pytest_plugins = ["pytester"]

RELIGION = """
from pytest_recfair import fairness

@fairness(attr="religion", tolerance=0.02)
def test_religion():
    pass
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*plugin_args(), "--fairness", *args)


def test_absolute_threshold_fails_in_call_phase(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.6")
    make_project(
        pytester,
        """
        from pytest_recfair import fairness

        @fairness(attr="religion", max_snsr=0.05)
        def test_religion():
            pass
        """,
    )
    # even while accepting new numbers, an absolute threshold still fails
    result = _run(pytester, "--fairness-update")
    result.assert_outcomes(failed=1, errors=0)
    result.stdout.fnmatch_lines(
        [
            "*fairness gate failed for test_audit.py::test_religion*",
            "*religion*snsr*",
            "*Absolute limits crossed (max_snsr): they are set by the @fairness marker*",
        ]
    )
    # accepting again would fail again: no advice to run --fairness-update (issue 11.3)
    result.stdout.no_fnmatch_line("*accept them with*")
    # pytest.fail(pytrace=False): the message, not a traceback into the plugin
    result.stdout.no_fnmatch_line("*plugin.py*")
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.fnmatch_lines(["FAILED test_audit.py::test_religion - *"])


def test_planted_regression_fails_against_baseline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, RELIGION)
    monkeypatch.setenv("RECFAIR_TEST_NOISE", "0.05")
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
    _run(pytester).assert_outcomes(passed=1)  # same model, same numbers

    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.5")  # the "new model" shifts Muslim's lists
    result = _run(pytester)
    result.assert_outcomes(failed=1, errors=0)
    result.stdout.fnmatch_lines(
        [
            "*fairness gate failed*",
            "*religion*",
            "*--fairness-update 'test_audit.py::test_religion'",
        ]
    )


def test_resampled_unchanged_model_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, RELIGION)
    monkeypatch.setenv("RECFAIR_TEST_NOISE", "0.1")
    monkeypatch.setenv("RECFAIR_TEST_SIM_SEED", "1")
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
    # a fresh draw of the same noisy, unbiased model is not a regression
    monkeypatch.setenv("RECFAIR_TEST_SIM_SEED", "2")
    _run(pytester).assert_outcomes(passed=1)


def test_body_assertions_run_after_audit(pytester: pytest.Pytester) -> None:
    make_project(
        pytester,
        """
        from pytest_recfair import fairness

        @fairness(attr="religion")
        def test_religion(fairness_result):
            assert fairness_result.gate is not None
            assert fairness_result.attribute("religion").snsr.value > 0.99, "planted"
        """,
    )
    result = _run(pytester, "--fairness-update")
    result.assert_outcomes(passed=0, failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: planted*"])
    result.stdout.fnmatch_lines(["*= fairness summary =*", "*test_religion*"])
    # the body failed, so nothing was accepted as a baseline
    assert not list(pytester.path.glob("baselines/**/*.json"))


def test_drift_past_a_crossed_limit_offers_no_accept_command(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(
        pytester,
        """
        from pytest_recfair import fairness

        @fairness(attr="religion", max_snsr=0.1)
        def test_religion():
            pass
        """,
    )
    monkeypatch.setenv("RECFAIR_TEST_NOISE", "0.05")
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.5")  # both a drift and a crossed limit
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    # one headline: the drift (its change, tolerance and p) and the crossed limit
    result.stdout.fnmatch_lines(
        ["*religion SNSR * → * (+*, tolerance *, p *, above the maximum 0.1)*"]
    )
    result.stdout.fnmatch_lines(["*Absolute limits crossed (max_snsr)*"])
    result.stdout.no_fnmatch_line("*accept them with*")  # --fairness-update would refuse it
