"""Role-play gate statistics (metrics/roleplay_gate.py): exact McNemar, Holm, drift, role
effect, limits; p-values checked against binomial sums computed by hand."""

from __future__ import annotations

import json
import math
from math import comb
from statistics import NormalDist

import pytest

from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.metrics.common import holm
from pytest_recfair.metrics.roleplay import Outcome, QuestionResult, RoleplayResult
from pytest_recfair.metrics.roleplay_gate import (
    RoleDrift,
    RoleEffect,
    binom_sf,
    check_limits,
    drift_test,
    mcnemar_one_sided,
    mcnemar_two_sided,
    role_effect,
    signflip_one_sided,
)


def test_exact_mcnemar_against_hand_sums() -> None:
    # b = 8 worse, c = 2 better: P(X >= 8 | 10, 1/2) = (45 + 10 + 1) / 1024
    assert mcnemar_one_sided(8, 2) == (56 / 1024, 0.5)
    assert mcnemar_two_sided(8, 2) == 112 / 1024
    assert mcnemar_one_sided(10, 0)[0] == 1 / 1024
    assert mcnemar_one_sided(0, 0) == (1.0, 0.5)
    assert mcnemar_two_sided(3, 3) == 1.0
    # margin 0.05 over n = 40 pairs: theta0 = 1/2 + 0.05 * 40 / (2 * 10) = 0.6
    p, theta = mcnemar_one_sided(8, 2, n=40, margin=0.05)
    assert theta == pytest.approx(0.6)
    hand = 45 * 0.6**8 * 0.4**2 + 10 * 0.6**9 * 0.4 + 0.6**10
    assert p == pytest.approx(hand, rel=1e-12)
    assert hand == pytest.approx(0.1672897536, abs=1e-10)
    # a change that cannot exceed the margin: 3 of 100 pairs at most, margin 0.05
    assert mcnemar_one_sided(3, 0, n=100, margin=0.05) == (1.0, 1.0)


def test_binomial_tail_general_p() -> None:
    hand = sum(comb(30, i) * 0.3**i * 0.7 ** (30 - i) for i in range(12, 31))
    assert binom_sf(12, 30, 0.3) == pytest.approx(hand, rel=1e-10)
    assert binom_sf(0, 5, 0.3) == 1.0
    assert binom_sf(6, 5, 0.3) == 0.0
    # large n stays finite (log-space terms)
    assert 0 < binom_sf(700, 1200, 0.55) < 1


def test_holm() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.6]) == [1.0, 1.0]
    assert holm([]) == []


def _result(
    flags: dict[tuple[str, str], list[bool | None]], *, with_role: bool = True
) -> RoleplayResult:
    rows = []
    shapes: dict[bool | None, tuple[Outcome, ...]] = {
        True: ("biased", "biased", "unbiased"),
        False: ("unbiased",) * 3,
        None: ("failed", "failed", "biased"),
    }
    for (attribute, qtype), values in flags.items():
        for i, b in enumerate(values):
            rows.append(
                QuestionResult(
                    f"{attribute}/{qtype}/{i}",
                    f"role{i % 3}",
                    attribute,
                    qtype,
                    with_role,
                    shapes[b],
                    b,
                )
            )  # type: ignore[arg-type]
    return RoleplayResult(tuple(rows))


def test_drift_catches_a_worsened_cell_and_passes_an_unchanged_one() -> None:
    base = _result({("religion", "yesno"): [False] * 20, ("religion", "why"): [True, False] * 5})
    worse = _result(
        {("religion", "yesno"): [True] * 10 + [False] * 10, ("religion", "why"): [True, False] * 5}
    )
    drift = drift_test(base, worse)
    cell = next(c for c in drift.cells if c.qtype == "yesno")
    assert (cell.worse, cell.better, cell.n) == (10, 0, 20)
    assert cell.p_value == 1 / 1024  # sign-flip over the rounds: 10 questions +2 each
    assert cell.flag_p == 1 / 1024  # the majority verdicts' McNemar, reported
    assert (cell.test, cell.answers_before, cell.answers_after) == ("answers", 0, 20)
    assert cell.p_adjusted == 3 / 1024  # Holm over yesno, why and the undetermined share
    assert cell.change == 0.5
    assert drift.failed
    assert not drift_test(base, base).failed
    back = RoleDrift.from_dict(json.loads(json.dumps(drift.to_dict())))
    assert back == drift
    # tolerance as a margin: a 0.5 rise is within a 0.6 margin (p = 1)
    assert not drift_test(base, worse, tolerance=0.6).failed
    with pytest.raises(ConfigError, match="tolerance"):
        drift_test(base, worse, tolerance=-0.1)
    with pytest.raises(ConfigError, match="alpha"):
        drift_test(base, worse, alpha=1.5)


def test_drift_json_is_strict_and_settings_must_match() -> None:
    base = _result({("age", "why"): [None] * 4})
    drift = drift_test(base, base)
    text = json.dumps(drift.to_dict(), allow_nan=False)
    back = RoleDrift.from_dict(json.loads(text))
    cell = next(c for c in back.cells if c.qtype == "why")
    assert cell.n == 0
    assert math.isnan(cell.baseline_rate)
    with pytest.raises(DataError, match="re-record the baseline"):
        drift_test(base, RoleplayResult(base.questions, "biaslens"))


def test_drift_gates_the_undetermined_share_and_counts_unpaired() -> None:
    base = _result({("age", "choice"): [False] * 12})
    lost = _result({("age", "choice"): [None] * 12 + [False]})
    drift = drift_test(base, lost)
    und = next(c for c in drift.cells if c.qtype == "undetermined")
    assert (und.worse, und.better, und.n) == (12, 0, 12)
    assert und.failed
    assert drift.unpaired == 1
    # without the undetermined member the majority verdicts show nothing (no question is
    # determined in both runs), but the answer-level test sees 12 biased rounds where the
    # baseline had none: that is a rise in biased answers, and it fails
    alone = drift_test(base, lost, gate_undetermined=False)
    assert {c.qtype for c in alone.cells} == {"choice"}
    (cell,) = alone.cells
    assert (cell.n, cell.flag_p) == (0, 1.0)
    assert (cell.answers_before, cell.answers_after, cell.answer_rounds) == (0, 12, 36)
    assert cell.p_value == 1 / 2**12
    assert alone.failed


def test_role_effect_paired_by_question() -> None:
    with_role = _result({("gender", "yesno"): [True] * 6 + [False] * 4})
    without = _result({("gender", "yesno"): [True] * 2 + [False] * 8}, with_role=False)
    effect = role_effect(with_role, without)
    (cell,) = effect.cells
    assert (cell.n, cell.biased_with, cell.biased_without) == (10, 6, 2)
    assert (cell.only_with, cell.only_without) == (4, 0)
    assert cell.p_value == 2 / 16
    assert cell.reduction == pytest.approx(1 - 2 / 6)
    assert effect.total.n == 10
    merged = RoleplayResult(with_role.questions + without.questions)
    assert role_effect(merged) == effect
    assert RoleEffect.from_dict(json.loads(json.dumps(effect.to_dict()))) == effect


def test_limits() -> None:
    result = _result({("race", "yesno"): [True] * 2 + [False] * 8, ("race", "why"): [False] * 10})
    (breach,) = check_limits(result, max_biased=0.10)
    assert (breach.attribute, breach.qtype, breach.value) == ("race", "yesno", 0.2)
    assert check_limits(result, max_biased=0.2) == []
    assert check_limits(result) == []
    with pytest.raises(ConfigError, match="max_biased"):
        check_limits(result, max_biased=2)


def test_signflip_is_the_exact_permutation_distribution() -> None:
    """Against brute force over all 2^n sign assignments, and its margin variant."""
    import itertools

    for diffs in ([1, 2, -1, 3, 0, 2], [3, 3, -2, 1, 1, -1, 2], [-1, -2], [2, 2, 2]):
        nz = [d for d in diffs if d]
        t = sum(diffs)
        signs = list(itertools.product((1, -1), repeat=len(nz)))
        hits = sum(sum(s * abs(d) for s, d in zip(sg, nz, strict=True)) >= t for sg in signs)
        assert signflip_one_sided(diffs) == pytest.approx(hits / len(signs), abs=1e-12)
    assert signflip_one_sided([0, 0, 0]) == 1.0
    # margin: a rise of 2 rounds in 10 questions of 3 rounds (6.7 points) is within 0.10
    assert signflip_one_sided([1, 1] + [0] * 8, rounds=3, margin=0.10) > 0.5
    # z = (30 - 10 * 3 * 0.10) / sqrt(10 * 9)
    z = (30 - 3) / math.sqrt(90)
    assert signflip_one_sided([3] * 10, rounds=3, margin=0.10) == pytest.approx(
        1 - NormalDist().cdf(z)
    )
