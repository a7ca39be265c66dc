"""Inference the gate can trust: t-intervals over entities (93%+ coverage at 25) and the
drift test, every member by one paired sign-flip test (the same flips), Westfall–Young
step-down max-T, H0 "worsened by at most the margin" (why: _drift_core, docs/baselines.md)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_recfair.errors import DataError
from pytest_recfair.metrics import _drift_core as _core
from pytest_recfair.metrics._drift_core import STABLE_DRAWS
from pytest_recfair.metrics.common import (
    check_confidence,
    check_number,
    check_positive_int,
    make_rng,
)
from pytest_recfair.vocab import DriftQuantity

FloatArray = npt.NDArray[np.float64]
Interval = tuple[float, float]

#: The smallest attainable p-value 1/(B+1) must be at most alpha / _FLOOR_FACTOR, and the
#: Monte Carlo error of a p-value near alpha at most ~1/6 of alpha: B >= 40 / alpha.
_FLOOR_FACTOR = 40.0
#: Alpha share of the unusable-share members' own max-T part: near their margin when
#: nothing changed, in the spreads' family they raised its critical value 2.05 -> 2.36.
UNUSABLE_ALPHA = 0.2
#: Gathered permutation blocks are kept below this many cells (memory ~ 8 bytes each).
PERMUTATION_CELLS = 1 << 22


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


def permuted_totals(
    rows: npt.NDArray[np.floating[Any]], B: int, rng: np.random.Generator
) -> Iterator[FloatArray]:
    """Float64 sums over entities of ``rows`` (E, L, C), each entity's L rows shuffled
    within it: (b, L, C) for each block of the B permutations."""
    E, L, C = rows.shape
    flat, base = rows.reshape(E * L, C), (np.arange(E) * L)[:, None]
    block = max(1, PERMUTATION_CELLS // max(1, rows.size))
    for start in range(0, B, block):
        perm = rng.random((min(block, B - start), E, L)).argsort(axis=2)
        yield np.take(flat, perm + base, axis=0).sum(axis=1, dtype=np.float64)


def required_resamples(alpha: float) -> int:
    """So that the p-value floor 1/(B+1) never decides a verdict at ``alpha``."""
    return math.ceil(_FLOOR_FACTOR / alpha)


def mean_intervals(sims: FloatArray, confidence: float = 0.95) -> list[Interval]:
    """t-interval over entities of each column mean (NaN cells left out, as the means)."""
    conf = check_confidence(confidence)
    out: list[Interval] = []
    for col in sims.T:
        col = col[~np.isnan(col)]
        if col.size < 2:
            out.append((math.nan, math.nan))
            continue
        se = float(np.std(col, ddof=1) / math.sqrt(col.size))
        half = t_quantile(1 - (1 - conf) / 2, col.size - 1) * se
        m = float(np.mean(col))
        out.append((max(0.0, m - half), min(1.0, m + half)))
    return out


@dataclass(frozen=True)
class DriftMember:
    """One gated comparison of a statistic of both runs' rows ("unusable": 0/1 rows);
    ``margin`` overrides the tolerance."""

    key: tuple[str, ...]
    statistic: DriftQuantity
    baseline_entities: Sequence[str]
    baseline: FloatArray
    candidate_entities: Sequence[str]
    candidate: FloatArray
    margin: float | None = None


@dataclass(frozen=True)
class MemberVerdict:
    key: tuple[str, ...]
    statistic: DriftQuantity
    baseline: float
    candidate: float
    worsening: float
    p_value: float
    p_adjusted: float
    failed: bool
    n_paired: int
    se: float = math.nan  # standard error of the (bias-corrected) worsening
    margin: float = math.nan  # the margin this member was tested at
    mde: float = math.nan  # excess over the margin caught with 90% power
    bias: float = 0.0  # taken off the observed worsening for the spread's upward bias
    screened: bool = False  # far inside the null: set no critical value

    @property
    def detectable(self) -> float:
        """The smallest worsening (a rise of SNSR...) this test catches 9 times in 10."""
        return self.margin + self.mde


@dataclass(frozen=True)
class DriftResult:
    """The family's verdicts; ``n_resamples``: the sign-flip draws used."""

    members: tuple[MemberVerdict, ...]
    tolerance: float
    alpha: float
    n_resamples: int
    exact: bool
    n_entities: int
    split: bool = False  # spreads and unusable shares tested in two parts (alpha_parts)

    @property
    def failed(self) -> bool:
        return any(m.failed for m in self.members)


_Pairing = tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], list[int]]
_Paired = tuple[FloatArray, FloatArray, list[int]]


def _pair_rows(
    m: DriftMember, index: dict[str, int], known: dict[Any, _Pairing] | None = None
) -> _Paired:
    """Both runs' shared rows and columns; ``known``: pairings by the two entity lists."""
    ids = (tuple(m.baseline_entities), tuple(m.candidate_entities))
    pairing = None if known is None else known.get(ids)
    if pairing is None:
        cand_row = {e: i for i, e in enumerate(m.candidate_entities)}
        pairs = [(i, cand_row[e]) for i, e in enumerate(m.baseline_entities) if e in cand_row]
        if not pairs:
            raise DataError(
                f"{' / '.join(m.key)}: the run shares no entity with its baseline, so nothing "
                f"can be paired; gate runs drawn from the baseline's seed entities."
            )
        cols = [index.setdefault(m.baseline_entities[i], len(index)) for i, _ in pairs]
        rows_of = np.array(pairs, dtype=np.intp).T  # each run's rows, as arrays once
        pairing = rows_of[0], rows_of[1], cols
        if known is not None:
            known[ids] = pairing
    at_base, at_cand, cols = pairing
    base = np.asarray(m.baseline, dtype=np.float64)[at_base]
    cand = np.asarray(m.candidate, dtype=np.float64)[at_cand]
    if base.shape != cand.shape:
        raise DataError(
            f"{' / '.join(m.key)}: the baseline scores {base.shape[1]} values and the run "
            f"{cand.shape[1]}; compare runs of the same grid, or re-record the baseline."
        )
    return base, cand, cols


def _tolerance(value: object) -> float:
    return check_number(value, "tolerance", lambda t: 0 <= t < math.inf, "a finite number >= 0")


def _observed(base: FloatArray, cand: FloatArray, statistic: DriftQuantity) -> tuple[float, float]:
    return (
        float(_core.stat_rows(_core.col_means(base)[0], statistic)),
        float(_core.stat_rows(_core.col_means(cand)[0], statistic)),
    )


def shared_values(m: DriftMember) -> tuple[float, float, int]:
    """Both statistics on the shared entities (what a subset run is tested on), and how many."""
    base, cand, rows = _pair_rows(m, {})
    return (*_observed(base, cand, m.statistic), len(rows))


def _standardise(
    lins: Sequence[_core.Linear], paired: Sequence[_Paired], margins: Sequence[float], E: int
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Observed T, the (E, m) contributions at unit flip variance, and each member's factor:
    a margin member's SE is estimated, so its reference widens by t_{n-1} / z at 95%."""
    m = len(lins)
    T, U, factor = np.full(m, -np.inf), np.zeros((E, m)), np.ones(m)
    for j, (lin, (_, _, rows), margin) in enumerate(zip(lins, paired, margins, strict=True)):
        flip_sd = float(np.sqrt(np.sum(lin.contrib**2)))
        excess = lin.stat - margin
        if not math.isfinite(excess):
            continue
        if flip_sd > 0:
            U[rows, j] = lin.contrib / flip_sd
            if margin > 0 and len(rows) >= 3:
                factor[j] = t_quantile(0.95, len(rows) - 1) / NormalDist().inv_cdf(0.95)
            T[j] = excess / lin.se
        elif excess > 1e-12:  # every entity moved the same way: no noise to hide behind
            T[j] = np.inf
    return T, U, factor


def alpha_parts(
    members: Sequence[DriftMember], T: FloatArray, alpha: float
) -> list[tuple[npt.NDArray[np.bool_], float]]:
    """The spreads (1 - UNUSABLE_ALPHA of alpha) and the unusable shares (UNUSABLE_ALPHA);
    one family at the whole alpha when a part has nothing to test (cannot reject)."""
    unusable = np.array([m.statistic == "unusable" for m in members], dtype=bool)
    parts = [(~unusable, 1.0 - UNUSABLE_ALPHA), (unusable, UNUSABLE_ALPHA)]
    testable = ~np.isneginf(T)  # -inf: no variation and no worsening, never rejects
    live = [(mask, share) for mask, share in parts if np.any(mask & testable)]
    if len(live) < 2:  # one part (or none) can reject: one family at the whole alpha
        return [(np.ones(len(members), dtype=bool), alpha)]
    return [(mask, share * alpha) for mask, share in live]


def _adjust(
    members: Sequence[DriftMember],
    T: FloatArray,
    Tp: _core.RefArray,
    exact: bool,
    alpha: float,
    margins: Sequence[float],
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_], FloatArray, bool]:
    """Per part at its alpha share, adjusted p scaled by alpha / level (Bonferroni)."""
    selectable = np.array([g > 0 for g in margins], dtype=bool)
    raw, adjusted = np.ones(T.size), np.ones(T.size)
    dropped, crit = np.zeros(T.size, dtype=bool), np.full(T.size, np.inf)
    parts = alpha_parts(members, T, alpha)
    for mask, level in parts:
        idx = np.flatnonzero(mask)
        sub = Tp if idx.size == T.size else Tp[:, idx]  # one part: the reference, no copy
        raw[idx], adj, dropped[idx], crit[idx] = _core.screen_and_adjust(
            T[idx], sub, exact, level, selectable[idx]
        )
        adjusted[idx] = np.minimum(1.0, adj * (alpha / level))
    return raw, adjusted, dropped, crit, any(level < alpha for _, level in parts)


def drift_test(
    members: Sequence[DriftMember],
    *,
    tolerance: float = 0.0,
    alpha: float = 0.05,
    n_resamples: int = 2000,
    seed: int | np.random.Generator = 0,
) -> DriftResult:
    """Every member tested for a worsening beyond ``tolerance``, family-wise error <= alpha;
    at least required_resamples(alpha) and STABLE_DRAWS draws (all 2**E flips when fewer)."""
    tol = _tolerance(tolerance)
    a_level = check_number(
        alpha, "alpha", lambda a: 0 < a < 1, "strictly between 0 and 1, e.g. 0.05"
    )
    B = max(check_positive_int(n_resamples, "n_resamples"), required_resamples(a_level))
    B = max(B, STABLE_DRAWS)
    rng = make_rng(seed)
    index: dict[str, int] = {}
    known: dict[Any, _Pairing] = {}
    paired = [_pair_rows(m, index, known) for m in members]
    margins = [tol if m.margin is None else _tolerance(m.margin) for m in members]
    E = len(index)
    exact = E <= 20 and 2**E <= B
    signs = [-1.0 if m.statistic == "pafs" else 1.0 for m in members]  # a PAFS drop worsens
    lins = [
        (_core.linear_margin if g > 0 else _core.linear_exact)(b, c, m.statistic, sign)
        for m, (b, c, _), g, sign in zip(members, paired, margins, signs, strict=True)
    ]
    T, U, factor = _standardise(lins, paired, margins, E)
    Tp = _core.reference(rng, U, B, exact)
    Tp *= factor  # in place: the (draws, members) reference is the test's largest array
    observed = [_observed(b, c, m.statistic) for m, (b, c, _) in zip(members, paired, strict=True)]
    worse = [sign * (pc - pb) for sign, (pb, pc) in zip(signs, observed, strict=True)]
    if (
        exact
        and 1.0 / Tp.shape[0] > a_level / 2
        and any(w - g > 0 for w, g in zip(worse, margins, strict=True))
    ):
        raise DataError(
            f"only {E} entities are shared with the baseline: the smallest attainable "
            f"p-value 1/{Tp.shape[0]} cannot reach alpha {a_level:g}, so a worsening cannot be "
            f"tested; gate at least {math.ceil(math.log2(2 / a_level))} entities."
        )
    raw, adjusted, dropped, crit, split = _adjust(members, T, Tp, exact, a_level, margins)
    verdicts = []
    for j, m in enumerate(members):
        lin, (pb, pc), (b, c, rows), g = lins[j], observed[j], paired[j], margins[j]
        # an SNSR member with a margin: calibrated at the alternative (its bias shortfall)
        if m.statistic == "snsr" and g > 0:
            mde = _core.calibrated_mde(lin.se, float(crit[j]), b, c, g)
        else:
            mde = _core.mde(lin.se, float(crit[j]), lin.bias)
        verdicts.append(MemberVerdict(
            m.key, m.statistic, pb, pc, worse[j], float(raw[j]), float(adjusted[j]),
            bool(adjusted[j] <= a_level), len(rows), lin.se, g, mde, lin.bias, bool(dropped[j]),
        ))  # fmt: skip
    return DriftResult(tuple(verdicts), tol, a_level, int(Tp.shape[0]), exact, E, split)
