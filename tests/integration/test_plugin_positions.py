"""Candidate-position audits through pytest: candidates by fixture, gate on position bias."""

from __future__ import annotations

import json
import math
from statistics import NormalDist

import pytest

from tests.support.plugin import (
    LIST_OVERLAP_ONLY,
    assert_fields_absent,
    assert_shards_merge_to_the_full_audit,
    plugin_args,
)

pytest_plugins = ["pytester"]

CONFTEST = """
import random

import pytest

FIRST = FIRST_SHARE
GROUP_FIRST = GROUP_SHARE


@pytest.fixture(scope="session")
def recfair_recommender():
    def recommend(prompt):
        rng = random.Random(prompt)
        shown = [line.split(". ", 1)[1] for line in prompt.splitlines() if line[:1].isdigit()]
        favourite = sorted(shown)[0]  # the same candidate whatever the order
        first = GROUP_FIRST if prompt.startswith("I am a Muslim") else FIRST
        if rng.random() < 0.03:
            return "None of these, sorry."
        return shown[0] if rng.random() < first else favourite

    return recommend


@pytest.fixture
def films():
    rng = random.Random(1)
    titles = [f"Film {i}" for i in range(200)]
    return {f"Director {i}": rng.sample(titles, 6) for i in range(60)}


@pytest.fixture
def directors():
    return [f"Director {i}" for i in range(60)]
"""

AUDIT = """
from pytest_recfair import fairness


@fairness(attr="religion", seeds="directors", candidates="films", orders=4,
          max_position_bias=0.15, max_missed_rate=0.2)
def test_pick(fairness_result):
    assert fairness_result.extras["positions"]["attributes"][0]["k"] == 6
"""


def _setup(pytester: pytest.Pytester, first: float, group_first: float) -> None:
    conftest = CONFTEST.replace("FIRST_SHARE", repr(first))
    pytester.makeconftest(conftest.replace("GROUP_SHARE", repr(group_first)))
    pytester.makeini("[pytest]\nrecfair_n_resamples = 200\n")
    pytester.makepyfile(test_audit=AUDIT)


def test_no_position_bias_passes(pytester: pytest.Pytester) -> None:
    _setup(pytester, 0.0, 0.0)
    report = pytester.path / "r.json"
    result = pytester.runpytest(
        *plugin_args(), "--fairness", "--fairness-update", f"--fairness-report={report}"
    )
    result.assert_outcomes(passed=1)
    (res,) = json.loads(report.read_text())["results"]
    # a grid's groups, but its own templates and candidates: no list prompt's templates,
    # language, K, metric or attribute table
    absent = LIST_OVERLAP_ONLY - {"grid", "grid_hash", "domain"} | {"repeats"}
    assert_fields_absent(res, absent, "position result")
    assert {"grid", "orders", "pick"} <= set(res["meta"])
    pos = res["positions"]["attributes"][0]
    assert pos["groups"][0] == "(neutral)"
    assert pos["measures"]["consistency"][0] > 0.85  # the favourite, whatever the order
    assert pos["n_picks"][0] == 60 * 4


def test_planted_position_bias_fails(pytester: pytest.Pytester) -> None:
    _setup(pytester, 0.4, 0.4)
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update", "-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*candidate position bias 0.* > max_position_bias 0.15*"])


def test_a_group_picked_by_position_more_often_fails(pytester: pytest.Pytester) -> None:
    _setup(pytester, 0.0, 0.5)
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Muslim: bias 0.* differs from the neutral prompt's*"])


def test_a_later_run_with_more_position_bias_fails_against_the_baseline(
    pytester: pytest.Pytester,
) -> None:
    _setup(pytester, 0.0, 0.0)
    pytester.makepyfile(test_audit=AUDIT.replace("max_position_bias=0.15", "max_position_bias=0.5"))
    pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update").assert_outcomes(passed=1)
    _setup(pytester, 0.3, 0.3)  # first-position share 0.3: bias about 0.25, under 0.5
    pytester.makepyfile(test_audit=AUDIT.replace("max_position_bias=0.15", "max_position_bias=0.5"))
    result = pytester.runpytest(*plugin_args(), "--fairness", "-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*pooled position bias 0.0* -> 0.2* rose by more than*"])
    result.stdout.no_fnmatch_line("*> max_position_bias*")


def test_shards_merge_to_the_unsharded_position_audit(pytester: pytest.Pytester) -> None:
    _setup(pytester, 0.1, 0.1)
    assert_shards_merge_to_the_full_audit(pytester)


def test_the_plan_says_what_a_position_run_can_detect(pytester: pytest.Pytester) -> None:
    """After a baseline, --fairness-plan sizes the pooled-bias drift test from the SE of
    the baseline's stored interval (width / 2 z_0.975): the entities at which a rise of
    twice the tolerance is caught 9 times in 10, and the smallest rise a run can detect."""
    _setup(pytester, 0.1, 0.1)
    pytester.makepyfile(test_audit=AUDIT.replace("max_missed_rate=0.2", "tolerance=0.03"))
    pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update").assert_outcomes(passed=1)
    (path,) = (pytester.path / "baselines").rglob("*.json")
    lo, hi = json.loads(path.read_text())["positions"]["attributes"][0]["pooled_bias_ci"]
    z = NormalDist().inv_cdf
    noise = (z(0.95) + z(0.9)) * math.sqrt(2) * (hi - lo) / (2 * z(0.975))
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-plan")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            f"recfair plan: religion · position bias: tolerance 0.03 (the margin, never raised)"
            f" needs ~{60 * (noise / 0.03) ** 2:,.0f} entities for a rise of 2 x tolerance to "
            f"be caught 9 times in 10 (SE * at 60); at 60 entities a run cannot reliably detect"
            f" a position bias rise below ~{0.03 + noise:.3g} (one comparison)"
        ]
    )
