"""Which of two models is fairer: a paired test on the entities both were audited on.

Pure numpy. The two models answered the same prompts, so each shared seed entity gives a
pair of similarity rows (one per model). Under the null hypothesis "the two models are
equally fair" the two rows of an entity are exchangeable; the test swaps them or not at
random (a paired sign-flip permutation test, the machinery of the gate's drift test in
:mod:`pytest_recfair.metrics.inference`: the SAME swaps for every attribute) and compares
the observed |SNSR(b) - SNSR(a)| with its swap distribution. Two-sided: either model may
be the fairer one. The attributes of one pair are one family, adjusted with the
Westfall–Young step-down max-T, so the chance of calling any attribute different when the
models are equally fair is at most alpha (benchmarks/compare_models_validity.py).

The interval of the difference is the paired entity bootstrap of ``stats.compare``; the
decision is the permutation test's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pytest_recfair.errors import DataError
from pytest_recfair.metrics._check import check_positive_int, check_statistic, make_rng
from pytest_recfair.metrics.aggregate import SimilarityMatrix
from pytest_recfair.metrics.inference import (
    DriftMember,
    _flips,
    _pair_rows,
    _step_down,
    _worsening,
)
from pytest_recfair.metrics.stats import compare
from pytest_recfair.vocab import Statistic

__all__ = ["PairMember", "PairVerdict", "paired_models"]

FloatArray = npt.NDArray[np.float64]
#: A swap distribution narrower than this (similarities are in [0, 1]) is rounding only.
_DEGENERATE = 1e-12


@dataclass(frozen=True)
class PairMember:
    """One attribute audited on both models: model a's and model b's similarity matrix."""

    key: str
    a: SimilarityMatrix
    b: SimilarityMatrix


@dataclass(frozen=True)
class PairVerdict:
    """The comparison of one attribute. ``delta`` = statistic(b) - statistic(a) on the
    shared entities; ``ci`` its paired bootstrap interval; ``p_adjusted`` the two-sided
    p-value adjusted over the pair's attributes (the one to compare with alpha)."""

    key: str
    statistic: Statistic
    a: float
    b: float
    delta: float
    ci: tuple[float, float]
    p_value: float
    p_adjusted: float
    n_paired: int


def _aligned(m: PairMember) -> DriftMember:
    """Model b's columns in model a's value order (the test pairs columns by position)."""
    if set(m.a.values) != set(m.b.values):
        raise DataError(
            f"{m.key}: the two models were scored on different values ({sorted(m.a.values)} "
            f"vs {sorted(m.b.values)}); compare audits of the same grid."
        )
    cols = [m.b.values.index(v) for v in m.a.values]
    b_sims = np.asarray(m.b.sims, dtype=np.float64)[:, cols]
    return DriftMember(
        key=(m.key,),
        statistic="snsr",
        baseline_entities=m.a.entities,
        baseline=np.asarray(m.a.sims, dtype=np.float64),
        candidate_entities=m.b.entities,
        candidate=b_sims,
    )


def paired_models(
    members: Sequence[PairMember],
    *,
    statistic: Statistic = "snsr",
    n_resamples: int = 2000,
    seed: int | np.random.Generator = 0,
    confidence: float = 0.95,
    interval: bool = True,
) -> tuple[PairVerdict, ...]:
    """Test each member (attribute) for a difference between model a and model b.

    ``interval=False`` leaves out the bootstrap interval of the difference (NaN), e.g. in
    simulation studies of the test alone. Raises DataError when a member's models share
    no entity or differ in values.
    """
    stat = check_statistic(statistic)
    B = check_positive_int(n_resamples, "n_resamples")
    if not members:
        return ()
    rng = make_rng(seed)
    index: dict[str, int] = {}
    drift = [_aligned(m) for m in members]
    paired = [_pair_rows(d, index) for d in drift]
    S, exact = _flips(rng, B, len(index))
    T = np.full(len(members), -np.inf)
    Tp = np.zeros((S.shape[0], len(members)))
    points: list[tuple[float, float, float, int]] = []
    for j, (base, cand, cols) in enumerate(paired):
        pa, pb, diff, perm = _worsening(base, cand, S[:, cols], stat, False)
        if stat == "pafs":  # _worsening signs a PAFS drop as positive: undo, we want b - a
            diff, perm = -diff, -perm
        absperm = np.abs(perm)
        # the scale of the SIGNED swap distribution (the observed data count as one more
        # swap, as in the gate): swap-invariant, and never rounding-sized when |difference|
        # barely moves (two values whose gaps have opposite signs in the two models)
        sd = float(np.nanstd(perm if exact else np.append(perm, diff)))
        # no swap moves the statistic beyond rounding: no evidence either way, p = 1
        if sd > _DEGENERATE and math.isfinite(diff):
            T[j] = abs(diff) / sd
            Tp[:, j] = np.where(np.isnan(absperm), np.inf, absperm / sd)
        points.append((pa, pb, diff, base.shape[0]))
    raw, adjusted = _step_down(T, Tp, exact)
    out = []
    for j, (m, (pa, pb, diff, n)) in enumerate(zip(members, points, strict=True)):
        ci = (math.nan, math.nan)
        if interval:
            boot = compare(
                m.a, m.b, stat, n_resamples=min(B, 2000), seed=rng, confidence=confidence
            )
            ci = boot.ci
        out.append(
            PairVerdict(m.key, stat, pa, pb, diff, ci, float(raw[j]), float(adjusted[j]), int(n))
        )
    return tuple(out)
