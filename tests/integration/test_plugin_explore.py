"""--fairness-explore (ini recfair_explore): measure and report in every channel, gate
nothing (issue 25 points 7 and 10)."""

from __future__ import annotations

import json

import pytest

from tests.support.plugin import RELIGION_AND_GENDER_TESTS, make_project, plugin_args

pytest_plugins = ["pytester"]

LIMITED = """
from pytest_recfair import fairness

@fairness(attr="religion", max_snsr=0.0001)
def test_religion():
    pass
"""


def _notes(report: dict[str, object]) -> list[list[str]]:
    return [r["gate"]["notes"] for r in report["results"]]  # type: ignore[index,union-attr]


def test_a_first_look_without_baselines_passes_and_says_nothing_was_gated(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester, RELIGION_AND_GENDER_TESTS)
    args = (*plugin_args(), "--fairness")
    # the same run without explore: no baselines, every audited test fails
    pytester.runpytest(*args).assert_outcomes(failed=2)
    reports = [f"--fairness-report=run.{ext}" for ext in ("json", "md", "html")]
    result = pytester.runpytest(*args, "--fairness-explore", *reports)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*= fairness summary (explore mode: nothing gated) =*"])
    result.stdout.fnmatch_lines(["*explore mode (--fairness-explore): nothing gated*"])
    result.stdout.fnmatch_lines(["*would fail on: no usable baseline (baseline)*"])
    report = json.loads((pytester.path / "run.json").read_text(encoding="utf-8"))
    assert all(r["gate"]["passed"] for r in report["results"])
    assert all("explore mode (--fairness-explore): nothing gated" in n for n in _notes(report))
    for name in ("run.md", "run.html"):
        assert "explore mode (--fairness-explore): nothing gated" in (
            pytester.path / name
        ).read_text(encoding="utf-8")
    # explore alone never writes a baseline: the plain run still fails for want of one
    assert not (pytester.path / "baselines").exists() or not any(
        (pytester.path / "baselines").rglob("*.json")
    )
    pytester.runpytest(*args).assert_outcomes(failed=2)


def test_explore_from_the_ini_gates_neither_limits_nor_drift(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, RELIGION_AND_GENDER_TESTS)
    args = (*plugin_args(), "--fairness")
    pytester.runpytest(*args, "--fairness-update").assert_outcomes(passed=2)
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.4")  # the next model disfavours one religion
    pytester.runpytest(*args).assert_outcomes(passed=1, failed=1)  # gated: drift fails
    pytester.makeini(
        "[pytest]\nrecfair_entities = 12\nrecfair_n_resamples = 200\nrecfair_explore = true\n"
    )
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*would fail on: religion snsr (drift)*"])


def test_explore_with_update_writes_only_what_the_update_would_write(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, LIMITED)
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.4")  # SNSR well above max_snsr
    args = (*plugin_args(), "--fairness")
    pytester.runpytest(*args, "--fairness-update").assert_outcomes(failed=1)
    result = pytester.runpytest(*args, "--fairness-update", "--fairness-explore")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*baseline not written: the run crosses its absolute limits*"])
    assert "fairness baseline written" not in result.stdout.str()
    # a run within its limits is stored as the update stores it
    monkeypatch.delenv("RECFAIR_TEST_BIAS")
    make_project(pytester, RELIGION_AND_GENDER_TESTS)
    done = pytester.runpytest(*args, "--fairness-update", "--fairness-explore")
    done.assert_outcomes(passed=2)
    done.stdout.fnmatch_lines(["fairness baseline written: *"])
    pytester.runpytest(*args).assert_outcomes(passed=2)


def test_a_failing_test_body_still_fails_in_explore_mode(pytester: pytest.Pytester) -> None:
    make_project(
        pytester,
        "from pytest_recfair import fairness\n\n"
        "@fairness(attr='religion')\n"
        "def test_religion(fairness_result):\n"
        "    assert fairness_result.attributes[0].snsr.value < 0\n",
    )
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-explore")
    result.assert_outcomes(failed=1)
