"""The pure quality metric (issue 23.6): reply quality, per-group summary, paired drop test."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_recfair.metrics import quality as mq


@pytest.mark.parametrize(
    ("t", "df", "expected"),
    # reference values of Student's t distribution function (tables / R's pt)
    [(0.0, 5, 0.5), (2.0, 10, 0.963306), (-1.812461, 10, 0.05), (2.570582, 5, 0.975)],
)
def test_t_cdf_matches_reference_values(t: float, df: int, expected: float) -> None:
    assert mq.t_cdf(t, df) == pytest.approx(expected, abs=1e-5)


def test_summarize_means_intervals_and_gap() -> None:
    rng = np.random.default_rng(1)
    scores = np.column_stack([rng.uniform(0.7, 0.9, 60), rng.uniform(0.4, 0.6, 60)])
    scores[3, 1] = np.nan  # a failed prompt: left out of its group only
    s = mq.summarize(scores, ["a", "b"], n_resamples=400, seed=0)
    a, b = s.groups
    assert a.mean == pytest.approx(float(scores[:, 0].mean()))
    assert b.mean == pytest.approx(float(np.nanmean(scores[:, 1])))
    assert (a.n, b.n) == (60, 59)
    assert a.ci is not None
    assert a.ci[0] < a.mean < a.ci[1]
    assert s.gap == pytest.approx(a.mean - b.mean)
    assert s.gap_ci is not None
    assert s.gap_ci[0] < s.gap < s.gap_ci[1]


def test_summarize_without_scores_is_nan_not_a_warning() -> None:
    s = mq.summarize(np.full((4, 2), np.nan), ["a", "b"], n_resamples=50)
    assert all(math.isnan(g.mean) for g in s.groups)
    assert math.isnan(s.gap)
    assert s.gap_ci is None


def _members(values: np.ndarray, names: list[str]) -> dict[str, dict[str, float | None]]:
    return {"g": {e: float(v) for e, v in zip(names, values, strict=True)}}


def test_drift_finds_a_real_drop_and_not_a_drop_within_tolerance() -> None:
    names = [f"e{i}" for i in range(40)]
    rng = np.random.default_rng(2)
    base = rng.uniform(0.6, 0.9, 40)
    fell = base - 0.2 + rng.normal(0, 0.02, 40)
    (d,) = mq.drift(_members(base, names), _members(fell, names), tolerance=0.05)
    assert d.delta == pytest.approx(float((fell - base).mean()))
    assert d.p_value < 1e-6
    assert d.n_paired == 40
    same = base + rng.normal(0, 0.02, 40)
    (d,) = mq.drift(_members(base, names), _members(same, names), tolerance=0.05)
    assert d.p_value > 0.5
    # a drop just inside the tolerance is not significant
    inside = base - 0.03 + rng.normal(0, 0.01, 40)
    (d,) = mq.drift(_members(base, names), _members(inside, names), tolerance=0.05)
    assert d.p_value > 0.5


def test_drift_pairs_only_shared_entities_and_reports_what_it_tested() -> None:
    base = {"g": {"a": 1.0, "b": 0.8, "c": 0.0, "d": None}}
    cand = {"g": {"a": 0.9, "b": 0.6, "d": 0.5}}  # c not asked, d not scored in the baseline
    (d,) = mq.drift(base, cand, tolerance=0.0)
    assert d.n_paired == 2
    assert d.baseline == pytest.approx(0.9)  # over a and b, not the whole baseline
    assert d.value == pytest.approx(0.75)


def test_drift_is_holm_adjusted_and_needs_no_seed() -> None:
    names = [f"e{i}" for i in range(30)]
    rng = np.random.default_rng(3)
    base = rng.uniform(0.5, 0.9, 30)
    cand = base - 0.05 + rng.normal(0, 0.08, 30)
    one = mq.drift(_members(base, names), _members(cand, names), tolerance=0.0)
    two = mq.drift(
        {**_members(base, names), "h": dict(zip(names, base.tolist(), strict=True))},
        {**_members(cand, names), "h": dict(zip(names, base.tolist(), strict=True))},
        tolerance=0.0,
    )
    assert two[0].p_value == pytest.approx(min(1.0, 2 * one[0].p_value))
    assert mq.drift(_members(base, names), _members(cand, names), tolerance=0.0) == one


def test_drift_when_every_entity_moves_alike() -> None:
    names = ["a", "b", "c"]
    base = np.array([0.8, 0.8, 0.8])
    (d,) = mq.drift(_members(base, names), _members(base - 0.5, names), tolerance=0.05)
    assert d.p_value == 0.0
    (d,) = mq.drift(_members(base, names), _members(base, names), tolerance=0.05)
    assert d.p_value == 1.0
