"""The swap machinery of the model comparison (:mod:`.pairs`): whole-row sign flips.

Paired sign-flip permutation of both runs' rows, the nonlinear statistic recomputed under
every swap (two-sided comparisons of two models need no margin). The gate's drift test
moved to linearised, exactly studentised members (:mod:`._drift_core`); this is the
earlier machinery, kept as it was for :func:`.pairs.paired_models`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pytest_recfair.metrics import _weights
from pytest_recfair.metrics._drift_core import stat_rows, step_down
from pytest_recfair.vocab import DriftQuantity

FloatArray = npt.NDArray[np.float64]


def _flips(rng: np.random.Generator, B: int, E: int) -> tuple[_weights.CountArray, bool]:
    """(B, E) 0/1 swap indicators (one byte each): all 2**E when that is at most B, else
    B random draws (made a block of rows at a time: the numbers of one (B, E) draw)."""
    if E <= 20 and 2**E <= B:
        codes = np.arange(2**E, dtype=np.int64)
        return ((codes[:, None] >> np.arange(E)) & 1).astype(np.uint8), True
    S = np.empty((B, E), dtype=np.uint8)
    rows = _weights.draw_block_rows(E)
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
    S: _weights.CountArray,
    statistic: DriftQuantity,
    centre: bool,
) -> tuple[float, float, float, FloatArray]:
    """Observed baseline/candidate statistic, worsening, and worsening under each swap of
    one member on its own (``S``: its entities' columns of the flips)."""
    sw, moves = _swap_inputs(base, cand, statistic, centre)
    (shifts,) = _weights.products(S, moves)
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


# one step-down max-T for both tests (the exact whole-row swaps and the studentised core)
_step_down = step_down
