"""Inference the gate can trust: intervals with coverage, a family-wise drift test.

Pure numpy. Two parts here (the reasoning and the measured figures are in docs/baselines.md):

- ``mean_intervals``: a t-interval over entities for every value's mean similarity Sim(a)
  (entities are the independent units; 93%+ coverage already at 25 entities);
- SNSR, SNSV and PAFS intervals (a studentised bootstrap inverted) are in :mod:`.spread`;
- ``drift_test``: every (attribute, metric, statistic) a test gates, tested at once against
  the stored baseline with a paired sign-flip permutation test (each shared entity's
  baseline and candidate rows are swapped or not, the SAME swaps for every member of the
  family) and the Westfall–Young step-down max-T adjustment. The tolerance is the margin:
  H0 "the statistic worsened by at most ``tolerance``" against H1 "by more".
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.kinds import DriftQuantity
from pytest_recfair.metrics import _weights
from pytest_recfair.metrics._check import check_confidence, check_positive_int, make_rng

__all__ = [
    "DriftMember",
    "DriftResult",
    "MemberVerdict",
    "drift_test",
    "mean_intervals",
    "required_resamples",
    "t_quantile",
]

FloatArray = npt.NDArray[np.float64]
Interval = tuple[float, float]

#: The smallest attainable p-value 1/(B+1) must be at most alpha / _FLOOR_FACTOR, and the
#: Monte Carlo error of a p-value near alpha at most ~1/6 of alpha: B >= 40 / alpha.
_FLOOR_FACTOR = 40.0
_NAN: Interval = (math.nan, math.nan)


def t_quantile(p: float, df: int) -> float:
    """Student-t quantile (Cornish–Fisher expansion; error < 1e-4 for df >= 5)."""
    z = NormalDist().inv_cdf(p)
    if df <= 0:
        return math.nan
    v = float(df)
    g1 = (z**3 + z) / 4.0
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96.0
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384.0
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160.0
    return z + g1 / v + g2 / v**2 + g3 / v**3 + g4 / v**4


def required_resamples(alpha: float) -> int:
    """Resamples needed so the p-value floor 1/(B+1) never decides a verdict at ``alpha``."""
    return math.ceil(_FLOOR_FACTOR / alpha)


# --------------------------------------------------------------------------- intervals


def mean_intervals(sims: FloatArray, confidence: float = 0.95) -> list[Interval]:
    """t-interval over entities of each column mean (NaN cells left out, as the means)."""
    conf = check_confidence(confidence)
    out: list[Interval] = []
    for j in range(sims.shape[1]):
        col = sims[:, j]
        col = col[~np.isnan(col)]
        if col.size < 2:
            out.append(_NAN)
            continue
        half = t_quantile(1 - (1 - conf) / 2, col.size - 1) * _se(col)
        m = float(np.mean(col))
        out.append((max(0.0, m - half), min(1.0, m + half)))
    return out


def _se(col: FloatArray) -> float:
    return float(np.std(col, ddof=1) / math.sqrt(col.size))


# --------------------------------------------------------------------------- drift test


@dataclass(frozen=True)
class DriftMember:
    """One gated comparison: a statistic of one attribute (and metric), both runs' rows.

    ``key`` names the member for the caller (e.g. (attribute, metric, statistic)). For
    "unusable" the rows are 0/1 (reply unusable) and the statistic is their overall share.
    ``margin`` overrides the family's tolerance for this member (None: the tolerance).
    """

    key: tuple[str, ...]
    statistic: DriftQuantity
    baseline_entities: Sequence[str]
    baseline: FloatArray
    candidate_entities: Sequence[str]
    candidate: FloatArray
    margin: float | None = None


@dataclass(frozen=True)
class MemberVerdict:
    """The drift test of one member: worsening (>0 = less fair), its bound, adjusted p."""

    key: tuple[str, ...]
    statistic: DriftQuantity
    baseline: float
    candidate: float
    worsening: float
    lower_bound: float
    p_value: float
    p_adjusted: float
    failed: bool
    n_paired: int


@dataclass(frozen=True)
class DriftResult:
    """The family's verdicts; ``n_resamples`` is the number of sign-flip draws used."""

    members: tuple[MemberVerdict, ...]
    tolerance: float
    alpha: float
    n_resamples: int
    exact: bool
    n_entities: int

    @property
    def failed(self) -> bool:
        return any(m.failed for m in self.members)


def _pair_rows(m: DriftMember, index: dict[str, int]) -> tuple[FloatArray, FloatArray, list[int]]:
    cand_row = {e: i for i, e in enumerate(m.candidate_entities)}
    pairs = [(i, cand_row[e]) for i, e in enumerate(m.baseline_entities) if e in cand_row]
    if not pairs:
        raise DataError(
            f"{' / '.join(m.key)}: the run shares no entity with its baseline, so nothing can "
            f"be paired; gate runs drawn from the baseline's seed entities."
        )
    cols = [index.setdefault(m.baseline_entities[i], len(index)) for i, _ in pairs]
    base = np.asarray(m.baseline, dtype=np.float64)[[i for i, _ in pairs]]
    cand = np.asarray(m.candidate, dtype=np.float64)[[j for _, j in pairs]]
    if base.shape != cand.shape:
        raise DataError(
            f"{' / '.join(m.key)}: the baseline scores {base.shape[1]} values and the run "
            f"{cand.shape[1]}; compare runs of the same grid, or re-record the baseline."
        )
    return base, cand, cols


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
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts
    if statistic == "unusable":
        return np.asarray(np.mean(means, axis=-1))
    mx, mn = np.max(means, axis=-1), np.min(means, axis=-1)
    if statistic == "snsr":
        return np.asarray(mx - mn)
    if statistic == "snsv":
        return np.asarray(np.std(means, axis=-1))
    centre = np.mean(means, axis=-1, keepdims=True)
    return np.asarray(1.0 - np.mean(np.abs(means - centre), axis=-1))


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


def _all_swaps(
    members: Sequence[DriftMember],
    paired: list[tuple[FloatArray, FloatArray, list[int]]],
    margins: Sequence[float],
    S: _weights.CountArray,
) -> tuple[list[_Swaps], list[FloatArray]]:
    """Every member's swaps and (B, 2V) shifts from ONE pass over the (B, E) flips: each
    member's moves sit in its entities' rows of one matrix (zero elsewhere). ``paired``
    is emptied on the way (its rows are not needed once moved)."""
    widths = [2 * base.shape[1] for base, _, _ in paired]
    X = np.zeros((S.shape[1], sum(widths)), dtype=np.float64)
    swaps, at = [], 0
    for j, (m, w) in enumerate(zip(members, widths, strict=True)):
        base, cand, rows = paired[j]
        sw, X[rows, at : at + w] = _swap_inputs(base, cand, m.statistic, margins[j] > 0)
        swaps.append(sw)
        empty = np.empty((0, base.shape[1]))
        paired[j] = (empty, empty, [])
        at += w
    (shifts,) = _weights.products(S, X)
    return swaps, np.split(shifts, np.cumsum(widths)[:-1], axis=1)


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
    if centre:
        perm = perm * _small_sample_factor(sw.n)
    return sw.pb, sw.pc, sign * (sw.pc - sw.pb), perm


def _small_sample_factor(n: int) -> float:
    """Widen the centred swap distribution as a t-test widens a z-test.

    Centring removes the exact invariance of the swap test, so the observed statistic is
    compared with a normal-like reference using an estimated spread: scale it by
    sqrt(n / (n - 1)) (the centred spread's bias) and t_{n-1} / z at the 95% quantile.
    """
    if n < 3:
        return 1.0
    return math.sqrt(n / (n - 1)) * t_quantile(0.95, n - 1) / NormalDist().inv_cdf(0.95)


def _step_down(T: FloatArray, Tp: FloatArray, exact: bool) -> tuple[FloatArray, FloatArray]:
    """Raw and Westfall–Young step-down max-T adjusted p-values (T: (m,), Tp: (B, m))."""
    B = Tp.shape[0]
    extra = 0 if exact else 1  # random draws: count the observed data as one more draw
    raw = (extra + np.sum(Tp >= T, axis=0)) / (B + extra)
    order = np.argsort(-T, kind="stable")
    # successive maxima over the members ranked r and below (least significant last)
    tail = np.maximum.accumulate(Tp[:, order[::-1]], axis=1)[:, ::-1]
    p_sorted = (extra + np.sum(tail >= T[order], axis=0)) / (B + extra)
    p_sorted = np.maximum.accumulate(p_sorted)
    adjusted = np.empty_like(p_sorted)
    adjusted[order] = p_sorted
    return raw, adjusted


def _check_gate(tolerance: object, alpha: object) -> tuple[float, float]:
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float):
        raise ConfigError(f"tolerance must be a number >= 0; got {tolerance!r}.")
    if not 0.0 <= float(tolerance) < math.inf:
        raise ConfigError(f"tolerance must be a finite number >= 0; got {tolerance!r}.")
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 1:
        raise ConfigError(f"alpha must be strictly between 0 and 1, e.g. 0.05; got {alpha!r}.")
    return float(tolerance), float(alpha)


def drift_test(
    members: Sequence[DriftMember],
    *,
    tolerance: float = 0.0,
    alpha: float = 0.05,
    n_resamples: int = 2000,
    seed: int | np.random.Generator = 0,
) -> DriftResult:
    """Test every member for a worsening beyond ``tolerance``; family-wise error <= alpha.

    ``n_resamples`` is raised to ``required_resamples(alpha)`` when lower. A family whose
    paired entities are too few for any p-value to reach alpha raises DataError.
    """
    tol, a_level = _check_gate(tolerance, alpha)
    B = max(check_positive_int(n_resamples, "n_resamples"), required_resamples(a_level))
    rng = make_rng(seed)
    index: dict[str, int] = {}
    paired = [_pair_rows(m, index) for m in members]
    S, exact = _flips(rng, B, len(index))
    margins = [tol if m.margin is None else _check_gate(m.margin, a_level)[0] for m in members]
    swaps, shifts = _all_swaps(members, paired, margins, S)
    rows = []
    T = np.full(len(members), -np.inf)
    Tp = np.zeros((S.shape[0], len(members)))
    for j, (m, sw, margin) in enumerate(zip(members, swaps, margins, strict=True)):
        pb, pc, worse, perm = _swap_stats(sw, shifts[j], m.statistic, margin > 0)
        # At margin 0 the observed data count as one more swap: a swap-invariant spread.
        sd = float(np.nanstd(perm if exact or margin > 0 else np.append(perm, worse)))
        if sd > 0 and math.isfinite(worse):
            T[j] = (worse - margin) / sd
            Tp[:, j] = np.where(np.isnan(perm), np.inf, perm / sd)
        q = float(np.nanquantile(perm, 1 - a_level)) if sd > 0 else 0.0
        rows.append((m, pb, pc, worse, worse - q, sw.n))
    worse_than_margin = any(
        w - (tol if m.margin is None else m.margin) > 0 for m, _, _, w, _, _ in rows
    )
    if exact and 1.0 / S.shape[0] > a_level / 2 and worse_than_margin:
        raise DataError(
            f"only {len(index)} entities are shared with the baseline: the smallest attainable "
            f"p-value 1/{S.shape[0]} cannot reach alpha {a_level:g}, so a worsening cannot be "
            f"tested; gate at least {math.ceil(math.log2(2 / a_level))} entities."
        )
    raw, adj = _step_down(T, Tp, exact)
    verdicts = tuple(
        MemberVerdict(m.key, m.statistic, pb, pc, w, lb, float(r), float(p), bool(p <= a_level), n)
        for (m, pb, pc, w, lb, n), r, p in zip(rows, raw, adj, strict=True)
    )
    return DriftResult(verdicts, tol, a_level, int(S.shape[0]), exact, len(index))
