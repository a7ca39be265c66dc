"""Which of two models is fairer: under "equally fair" an entity's two rows exchange, so
the test swaps them (the same swaps for every attribute), two-sided step-down max-T; the
interval is paired_comparison's bootstrap, the decision the permutation test's."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pytest_recfair.errors import DataError
from pytest_recfair.metrics import common
from pytest_recfair.metrics._drift_core import all_flips, stat_rows, step_down
from pytest_recfair.metrics.aggregate import SimilarityMatrix
from pytest_recfair.metrics.common import FloatArray
from pytest_recfair.metrics.inference import DriftMember, _pair_rows
from pytest_recfair.metrics.stats import paired_comparison
from pytest_recfair.vocab import STATISTICS, Statistic

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
    """``delta`` = statistic(b) - statistic(a) on the shared entities, its paired bootstrap
    ``ci``, and ``p_adjusted`` (two-sided, over the pair's attributes: compared with alpha)."""

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
    a_sims = np.asarray(m.a.sims, dtype=np.float64)
    return DriftMember((m.key,), "snsr", m.a.entities, a_sims, m.b.entities, b_sims)


def paired_models(
    members: Sequence[PairMember],
    *,
    statistic: Statistic = "snsr",
    n_resamples: int = 2000,
    seed: int | np.random.Generator = 0,
    confidence: float = 0.95,
    interval: bool = True,
) -> tuple[PairVerdict, ...]:
    """Test each member (attribute) for a difference between model a and model b
    (``interval=False``: NaN intervals)."""
    stat = common.check_choice(statistic, STATISTICS, "statistic")
    B = common.check_positive_int(n_resamples, "n_resamples")
    if not members:
        return ()
    rng = common.make_rng(seed)
    index: dict[str, int] = {}
    paired = [_pair_rows(_aligned(m), index) for m in members]
    S, exact = _flips(rng, B, len(index))
    T = np.full(len(members), -np.inf)
    Tp = np.zeros((S.shape[0], len(members)))
    points: list[tuple[float, float, float, int]] = []
    for j, (base, cand, cols) in enumerate(paired):
        pa, pb, diff, perm = _swapped(base, cand, S[:, cols], stat)
        # the scale of the SIGNED swap distribution (the observed data count as one more
        # swap, as in the gate): swap-invariant, and never rounding-sized when |difference|
        # barely moves (two values whose gaps have opposite signs in the two models)
        sd = float(np.nanstd(perm if exact else np.append(perm, diff)))
        # no swap moves the statistic beyond rounding: no evidence either way, p = 1
        if sd > _DEGENERATE and math.isfinite(diff):
            T[j] = abs(diff) / sd
            Tp[:, j] = np.where(np.isnan(perm), np.inf, np.abs(perm) / sd)
        points.append((pa, pb, diff, base.shape[0]))
    raw, adjusted, _ = step_down(T, Tp, exact)
    out = []
    for j, (m, (pa, pb, diff, n)) in enumerate(zip(members, points, strict=True)):
        ci = (math.nan, math.nan)
        if interval:
            ci = paired_comparison(m.a, m.b, stat, min(B, 2000), seed=rng, confidence=confidence).ci
        out.append(PairVerdict(m.key, stat, pa, pb, diff, ci, float(raw[j]), float(adjusted[j]), n))
    return tuple(out)


def _flips(rng: np.random.Generator, B: int, E: int) -> tuple[common.CountArray, bool]:
    """(B, E) 0/1 swaps: all 2**E when at most B, else B draws (a block of rows at a time)."""
    if E <= 20 and 2**E <= B:
        return all_flips(E), True
    S = np.empty((B, E), dtype=np.uint8)
    rows = common.draw_block_rows(E)
    for a in range(0, B, rows):
        S[a : a + rows] = rng.integers(0, 2, size=(min(B, a + rows) - a, E))
    return S, False


def _swapped(
    base: FloatArray, cand: FloatArray, S: common.CountArray, statistic: Statistic
) -> tuple[float, float, float, FloatArray]:
    """Both models' statistic, b - a, and b - a under each swap of ``S``."""
    vb, vc = ~np.isnan(base), ~np.isnan(cand)
    b0, c0 = np.where(vb, base, 0.0), np.where(vc, cand, 0.0)
    nb, nc = vb.astype(np.float64), vc.astype(np.float64)
    sb, sc, kb, kc = b0.sum(0), c0.sum(0), nb.sum(0), nc.sum(0)
    (shifts,) = common.products(S, np.concatenate([c0 - b0, nc - nb], axis=1))
    shift_s, shift_n = np.split(shifts, 2, axis=1)  # moved into the baseline
    with np.errstate(invalid="ignore", divide="ignore"):
        pb, pc = float(stat_rows(sb / kb, statistic)), float(stat_rows(sc / kc, statistic))
        perm_b = stat_rows((sb + shift_s) / (kb + shift_n), statistic)
        perm_c = stat_rows((sc - shift_s) / (kc - shift_n), statistic)
    return pb, pc, pc - pb, perm_c - perm_b
