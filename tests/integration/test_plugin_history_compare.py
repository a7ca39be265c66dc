"""--fairness-compare=REF with --fairness-compare-fail=EXPR: gating inside pytest against a
stored run (a history entry or a JSON report), in every mode (issue 25 point 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.plugin import (
    RELIGION_AND_GENDER_TESTS,
    make_project,
    plugin_args,
    subprocess_env,
)

pytest_plugins = ["pytester"]

SHA = "abcdef12" * 5
GATE = ("--fairness-compare-fail=snsr:0.02",)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """History entry 1: a fair model (the reference, commit SHA). The baselines: the new,
    biased model, so the drift gate passes and only the reference can fail a test."""
    make_project(pytester, RELIGION_AND_GENDER_TESTS)
    monkeypatch.setenv("GITHUB_SHA", SHA)
    monkeypatch.setenv("GITHUB_REF_NAME", "main")
    args = (*plugin_args(), "--fairness")
    pytester.runpytest(*args, "--fairness-update", "--fairness-history=hist").assert_outcomes(
        passed=2
    )
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.4")
    monkeypatch.setenv("GITHUB_SHA", "99" * 20)
    pytester.runpytest(*args, "--fairness-update").assert_outcomes(passed=2)
    return pytester


def _failures(path: Path) -> dict[str, list[dict[str, object]]]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return {r["meta"]["test_id"]: r["gate"]["failures"] for r in doc["results"]}


@pytest.mark.parametrize("ref", ["latest", "1", "abcdef", "-1"])
def test_a_figure_worse_than_the_reference_fails_its_test(
    project: pytest.Pytester, ref: str
) -> None:
    args = (*plugin_args(), "--fairness", "--fairness-history=hist", "--fairness-report=r.json")
    result = project.runpytest(*args, f"--fairness-compare={ref}", *GATE)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*religion.jaccard.snsr rose by * against the reference history entry "
            "0001_*(abcdef1, 20*)*snsr:0.02*"
        ]
    )
    (failure,) = _failures(project.path / "r.json")["test_audit.py::test_religion"]
    assert failure["kind"] == "compare"
    assert failure["value"] > failure["baseline"] + 0.02  # type: ignore[operator]
    assert _failures(project.path / "r.json")["test_audit.py::test_gender"] == []
    assert "accept them with" not in result.stdout.str()  # an update changes no reference


def test_a_json_report_is_a_reference_and_a_rule_picks_by_name(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = (*plugin_args(), "--fairness")
    monkeypatch.delenv("RECFAIR_TEST_BIAS")
    project.runpytest(*args, "--fairness-report=fair.json").assert_outcomes(passed=2)
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.4")
    # gender's SNSR only: religion's rise is not picked
    done = project.runpytest(
        *args, "--fairness-compare=fair.json", "--fairness-compare-fail=gender.snsr:0.02"
    )
    done.assert_outcomes(passed=2)
    bad = project.runpytest(
        *args, "--fairness-compare=fair.json", "--fairness-compare-fail=snsr:5%"
    )
    bad.assert_outcomes(passed=1, failed=1)
    bad.stdout.fnmatch_lines(["*against the reference --fairness-compare fair.json*"])
    # without rules: the SNSR changes are a note, nothing fails
    noted = project.runpytest(*args, "--fairness-compare=fair.json")
    noted.assert_outcomes(passed=2)
    noted.stdout.fnmatch_lines(
        ["*note: against the reference --fairness-compare fair.json:*", "*religion.jaccard.snsr*"]
    )


def test_explore_reports_the_comparison_and_fails_nothing(project: pytest.Pytester) -> None:
    args = (*plugin_args(), "--fairness", "--fairness-history=hist", "--fairness-explore")
    result = project.runpytest(*args, "--fairness-compare=latest", *GATE)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*would fail on: religion (compare)*"])


def test_the_merge_step_applies_it(project: pytest.Pytester) -> None:
    args = (*plugin_args(), "--fairness")
    for i in (1, 2):
        project.runpytest(*args, f"--fairness-shard={i}/2").assert_outcomes(skipped=2)
    merged = project.runpytest(
        *args,
        "--fairness-merge=fairness-shards",
        "--fairness-history=hist",
        "--fairness-compare=1",
        *GATE,
    )
    merged.assert_outcomes(passed=1, failed=1)
    merged.stdout.fnmatch_lines(["*religion.jaccard.snsr rose by * history entry 0001_*"])


def test_under_xdist_each_worker_gates(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    subprocess_env(monkeypatch)
    args = (*plugin_args(), "-n", "2", "--fairness", "--fairness-history=hist")
    result = project.runpytest_subprocess(*args, "--fairness-compare=latest", *GATE)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*rose by * history entry 0001_*"])


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--fairness-compare-fail=snsr:0.02",), "*needs the run to compare with*"),
        (("--fairness-compare=latest", "--fairness-compare-fail=snsr"), "*expected rules*"),
        (("--fairness-compare=nope.json",), "*no such file*--fairness-history*"),
        (("--fairness-history=hist", "--fairness-compare=77"), "*no such entry*"),
    ],
)
def test_a_bad_reference_or_rule_is_a_usage_error(
    project: pytest.Pytester, flags: tuple[str, ...], said: str
) -> None:
    result = project.runpytest(*plugin_args(), "--fairness", *flags)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([said])
