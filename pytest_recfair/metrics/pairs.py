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

The interval of the difference is the paired entity bootstrap of ``stats.paired_comparison``; the
decision is the permutation test's.

The swaps permute both runs' whole rows and recompute the nonlinear statistic under every
swap (two-sided comparisons of two models need no margin). The gate's drift test moved to
linearised, exactly studentised members (:mod:`._drift_core`); the whole-row swaps are the
earlier machinery, kept as they were for :func:`paired_models`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pytest_recfair.errors import DataError
from pytest_recfair.metrics import common
from pytest_recfair.metrics._drift_core import stat_rows, step_down
from pytest_recfair.metrics.aggregate import SimilarityMatrix
from pytest_recfair.metrics.common import check_positive_int, check_statistic, make_rng
from pytest_recfair.metrics.inference import DriftMember, _pair_rows
from pytest_recfair.metrics.stats import paired_comparison
from pytest_recfair.vocab import DriftQuantity, Statistic

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
    raw, adjusted = step_down(T, Tp, exact)
    out = []
    for j, (m, (pa, pb, diff, n)) in enumerate(zip(members, points, strict=True)):
        ci = (math.nan, math.nan)
        if interval:
            boot = paired_comparison(
                m.a, m.b, stat, n_resamples=min(B, 2000), seed=rng, confidence=confidence
            )
            ci = boot.ci
        out.append(
            PairVerdict(m.key, stat, pa, pb, diff, ci, float(raw[j]), float(adjusted[j]), int(n))
        )
    return tuple(out)


def _flips(rng: np.random.Generator, B: int, E: int) -> tuple[common.CountArray, bool]:
    """(B, E) 0/1 swap indicators (one byte each): all 2**E when that is at most B, else
    B random draws (made a block of rows at a time: the numbers of one (B, E) draw)."""
    if E <= 20 and 2**E <= B:
        codes = np.arange(2**E, dtype=np.int64)
        return ((codes[:, None] >> np.arange(E)) & 1).astype(np.uint8), True
    S = np.empty((B, E), dtype=np.uint8)
    rows = common.draw_block_rows(E)
    for a in range(0, B, rows):
        S[a : a + rows] = rng.integers(0, 2, size=(min(B, a + rows) - a, E))
    return S, False


def _stat_rows(sums: FloatArray, counts: FloatArray, statistic: DriftQuantity) -> FloatArray:
    """The statistic of the value means ``sums / counts`` (the core's ``stat_rows``)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return stat_rows(sums / counts, statistic)


def _sum_count(rows: FloatArray) -> tuple[FloatArray, FloatArray]:
    valid = ~np.isnan(rows)
    return np.where(valid, rows, 0.0).sum(axis=0), valid.sum(axis=0).astype(np.float64)


@dataclass(frozen=True)
class _Swaps:
    """One member's input to the swaps: observed statistics, the column sums and counts
    of both runs."""

    pb: float
    pc: float
    sums: tuple[FloatArray, FloatArray, FloatArray, FloatArray]  # sb, sc, kb, kc
    n: int


def _swap_inputs(
    base: FloatArray, cand: FloatArray, statistic: DriftQuantity, centre: bool
) -> tuple[_Swaps, FloatArray]:
    """The member's swaps and what swapping each entity moves into the baseline (E, 2V).

    ``centre`` (the margin null, see drift_test): swap the baseline rows shifted by the
    observed difference of the value means, so both runs have the candidate's value means
    and the swaps measure noise only, not the difference being tested.
    """
    pb0, pc0 = _stat_rows(*_sum_count(base), statistic), _stat_rows(*_sum_count(cand), statistic)
    if centre:
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            shift = np.nanmean(cand, axis=0) - np.nanmean(base, axis=0)
        base = base + np.nan_to_num(shift)
    vb, vc = ~np.isnan(base), ~np.isnan(cand)
    b0, c0 = np.where(vb, base, 0.0), np.where(vc, cand, 0.0)
    nb, nc = vb.astype(np.float64), vc.astype(np.float64)
    sums = (b0.sum(0), c0.sum(0), nb.sum(0), nc.sum(0))
    moves = np.concatenate([c0 - b0, nc - nb], axis=1)
    return _Swaps(float(pb0), float(pc0), sums, base.shape[0]), moves


def _worsening(
    base: FloatArray,
    cand: FloatArray,
    S: common.CountArray,
    statistic: DriftQuantity,
    centre: bool,
) -> tuple[float, float, float, FloatArray]:
    """Observed baseline/candidate statistic, worsening, and worsening under each swap of
    one member on its own (``S``: its entities' columns of the flips)."""
    sw, moves = _swap_inputs(base, cand, statistic, centre)
    (shifts,) = common.products(S, moves)
    return _swap_stats(sw, shifts, statistic, centre)


def _swap_stats(
    sw: _Swaps, shifts: FloatArray, statistic: DriftQuantity, centre: bool
) -> tuple[float, float, float, FloatArray]:
    """Observed baseline/candidate statistic, worsening, and worsening under each swap."""
    shift_s, shift_n = np.split(shifts, 2, axis=1)  # moved into the baseline
    sb, sc, kb, kc = sw.sums
    perm_b = _stat_rows(sb + shift_s, kb + shift_n, statistic)
    perm_c = _stat_rows(sc - shift_s, kc - shift_n, statistic)
    sign = -1.0 if statistic == "pafs" else 1.0  # a PAFS drop is the worsening
    perm = sign * (perm_c - perm_b)
    return sw.pb, sw.pc, sign * (sw.pc - sw.pb), perm
