"""A pull-request run on fewer entities is gated against a nightly baseline (issue 9.8)."""

from __future__ import annotations

import pytest

from tests.support.plugin import RELIGION_TEST, make_project, plugin_args

pytest_plugins = ["pytester"]

TESTS = RELIGION_TEST


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*plugin_args(), "--fairness", "-rA", *args)


@pytest.fixture
def nightly(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A project whose stored baseline covers 12 entities (the INI's recfair_entities)."""
    make_project(pytester, TESTS)
    monkeypatch.setenv("RECFAIR_TEST_NOISE", "0.1")
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
    return pytester


def test_a_subset_run_is_compared_on_the_shared_entities(nightly: pytest.Pytester) -> None:
    result = _run(nightly, "--fairness-entities=6")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "compared on the shared entities: 6 of 12 baseline entities" in out
    assert "baseline not compared" not in out


def test_a_regression_on_the_subset_fails(
    nightly: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.8")
    result = _run(nightly, "--fairness-entities=6")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*religion*snsr*"])
    assert "baseline not compared" not in result.stdout.str()


def test_entities_outside_the_baseline_are_not_compared(nightly: pytest.Pytester) -> None:
    # another subsample seed picks entities the baseline never saw: a different yardstick
    result = _run(nightly, "--fairness-entities=6", "--fairness-seed=5")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*baseline not compared*seed entity set*"])
