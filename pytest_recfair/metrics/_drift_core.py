"""inference.drift_test's arithmetic (why: docs/baselines.md): linearised members (closed-
form flip variance: seed-free p); margin 0 exact; margin > 0 corrects the range's upward
bias by a fixed rule (near-ties closed: careful); Andrews–Soares screening (RSW screened
none, Hansen too few); SNSR power at the alternative (else caught 83-85%, not 90%)."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_recfair.metrics import common
from pytest_recfair.vocab import DriftQuantity

FloatArray = npt.NDArray[np.float64]
#: a sign-flip reference: float64 when enumerated exactly, float32 when drawn
RefArray = npt.NDArray[np.floating[Any]]

#: Max-T reference draws at least: two seeds' p-values within 0.01 99 times in 100.
STABLE_DRAWS = 50_000
#: Candidate gaps within this many SE are ties when its bias is integrated (a true tie's gap
#: is half-normal, mean 0.80 SE; 1.5 cost 1.3-1.6 points of power for little).
TIE_GAP = 1.0
#: Studentised excess below minus this: a margin member leaves the max-T reference.
SELECTION_Z = 1.0
#: The byte tables of the sign-flip reference at most this large (else 4-bit codes).
_TABLE_BYTES = 24 << 20
#: Rows of the sign-flip reference summed at a time (buffers of 1,024 x 48 floats: 192 KB).
_SUB = 1024
#: Points of the fixed Gaussian rule the bias is integrated with (antithetic pairs).
_RULE_POINTS = 2048
_Z90 = NormalDist().inv_cdf(0.9)


@dataclass(frozen=True)
class Linear:
    """One member, linearised: statistic to test, margin, per-entity contributions."""

    stat: float  # the statistic the test compares with the margin (bias-corrected)
    bias: float  # how much was taken off the observed worsening for the spread's bias
    contrib: FloatArray  # (n,) one contribution per paired entity
    se: float  # standard error of ``stat`` (0: no variation at all)


def stat_rows(means: FloatArray, statistic: DriftQuantity) -> FloatArray:
    """The statistic of value means over the last axis."""
    if statistic == "unusable":
        return np.asarray(np.mean(means, axis=-1))
    if statistic == "snsr" and means.ndim == 2 and means.size:
        # column by column: a reduction along a short last axis costs ~5x as much
        cols = list(means.T)
        return np.asarray(functools.reduce(np.maximum, cols) - functools.reduce(np.minimum, cols))
    if statistic == "snsr":
        return np.asarray(np.max(means, axis=-1) - np.min(means, axis=-1))
    if statistic == "snsv":
        return np.asarray(np.std(means, axis=-1))
    centre = np.mean(means, axis=-1, keepdims=True)
    return np.asarray(1.0 - np.mean(np.abs(means - centre), axis=-1))


def col_means(X: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Column means over non-NaN cells and their counts."""
    valid = ~np.isnan(X)
    k = valid.sum(axis=0).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(valid, X, 0.0).sum(axis=0) / k, k


def _moments(X: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """col_means and the covariance of the means (NaN cells contribute nothing)."""
    m, k = col_means(X)
    n = X.shape[0]
    C = np.where(np.isnan(X), 0.0, X - m)
    cov = (C.T @ C) / np.maximum(np.outer(k, k), 1.0)
    return m, k, np.asarray(cov * (n / max(n - 1, 1)), dtype=np.float64)


def _pair_sd(cov: FloatArray, v: int) -> FloatArray:
    d = np.diag(cov)
    return np.asarray(np.sqrt(np.maximum(d + d[v] - 2 * cov[:, v], 1e-24)), dtype=np.float64)


def _soft_end(m: FloatArray, cov: FloatArray, top: bool) -> FloatArray:
    """Weights of the max (or min): values within noise of the end share it."""
    v = int(np.argmax(m) if top else np.argmin(m))
    gap = (m[v] - m) if top else (m - m[v])
    w = 2.0 * np.array([NormalDist().cdf(-g) for g in gap / _pair_sd(cov, v)])
    w[v] = 1.0
    return np.asarray(w / w.sum(), dtype=np.float64)


def gradient(m: FloatArray, cov: FloatArray, statistic: DriftQuantity) -> FloatArray:
    """d statistic / d value means (the max and min spread over near-ties)."""
    V = m.size
    if statistic == "unusable":
        return np.full(V, 1.0 / V)
    if statistic == "snsr":
        return _soft_end(m, cov, True) - _soft_end(m, cov, False)
    dev = m - m.mean()
    if statistic == "snsv":
        sd = float(np.sqrt(np.mean(dev**2)))
        return dev / (V * sd) if sd > 0 else np.zeros(V)
    s = np.sign(dev)
    return np.asarray(-(s - s.mean()) / V, dtype=np.float64)


@functools.lru_cache(maxsize=32)
def _rule(V: int) -> FloatArray:
    """A fixed Gaussian integration rule (not a resample: no seed reaches it)."""
    z = np.random.default_rng(20_231_126).standard_normal((_RULE_POINTS // 2, V))
    return np.concatenate([z, -z])


def _root(cov: FloatArray) -> FloatArray:
    vals, vecs = np.linalg.eigh((cov + cov.T) / 2)
    return np.asarray(vecs * np.sqrt(np.clip(vals, 0.0, None)), dtype=np.float64)


def bias(
    m: FloatArray, cov: FloatArray, statistic: DriftQuantity, root: FloatArray | None = None
) -> float:
    """E[statistic(means + noise)] - statistic(means), noise ~ N(0, cov); ``root``:
    ``_root(cov)`` when already computed."""
    if statistic == "unusable" or m.size < 2 or not np.all(np.isfinite(m)):
        return 0.0
    draws = m + _rule(m.size) @ (_root(cov) if root is None else root).T
    return float(np.mean(stat_rows(draws, statistic)) - stat_rows(m, statistic))


def close_ties(m: FloatArray, cov: FloatArray, gap_se: float | None = None) -> FloatArray:
    """``m`` with each gap between ordered means shortened by ``gap_se`` (TIE_GAP) SEs."""
    gap_se = TIE_GAP if gap_se is None else gap_se
    order = np.argsort(-m, kind="stable")
    out = m.copy()
    for a, b in itertools.pairwise(order):
        gap = m[a] - m[b]
        sd = float(_pair_sd(cov, int(a))[b])
        out[b] = out[a] - max(0.0, gap - gap_se * sd)
    return np.asarray(out + (m.max() - out.max()), dtype=np.float64)


def _entity_terms(X: FloatArray, m: FloatArray, k: FloatArray, g: FloatArray) -> FloatArray:
    with np.errstate(invalid="ignore", divide="ignore"):
        C = np.where(np.isnan(X), 0.0, (X - m) / k)
    return np.asarray(C @ g, dtype=np.float64)


def linear_margin(
    base: FloatArray, cand: FloatArray, statistic: DriftQuantity, sign: float
) -> Linear:
    """A member with a margin > 0: bias-corrected worsening, centred contributions."""
    (mb, kb, cb), (mc, kc, cc) = _moments(base), _moments(cand)
    worse = sign * float(stat_rows(mc, statistic) - stat_rows(mb, statistic))
    spread = statistic != "unusable"
    b_c = bias(close_ties(mc, cc), cc, statistic) if spread else 0.0
    b_b = bias(mb, cb, statistic) if spread else 0.0
    corr = sign * (b_c - b_b) if math.isfinite(b_c - b_b) else 0.0
    a = _entity_terms(cand, mc, kc, gradient(mc, cc, statistic))
    a = sign * (a - _entity_terms(base, mb, kb, gradient(mb, cb, statistic)))
    n = a.size
    se = float(np.sqrt(np.sum(a**2) * n / max(n - 1, 1)))
    if spread:  # near a tie the linearised SE is too small: take the rule's when larger
        se = max(se, _rule_se(base, cand, statistic))
    return Linear(worse - corr, corr, np.where(np.isfinite(a), a, 0.0), se)


def _rule_se(base: FloatArray, cand: FloatArray, statistic: DriftQuantity) -> float:
    """SD of the change under the runs' joint noise: linearising averages a tie's max."""
    V = base.shape[1]
    mj, _, cj = _moments(np.hstack([base, cand]))
    if not np.all(np.isfinite(mj)):
        return 0.0
    draws = mj + _rule(2 * V) @ _root(cj).T
    w = stat_rows(draws[:, V:], statistic) - stat_rows(draws[:, :V], statistic)
    return float(np.std(w, ddof=1))


def linear_exact(
    base: FloatArray, cand: FloatArray, statistic: DriftQuantity, sign: float
) -> Linear:
    """A member with margin 0: paired differences weighted by the pooled gradient, the
    same for a swapped pair of runs (so the sign-flip test is exact)."""
    both = ~(np.isnan(base) | np.isnan(cand))
    b0, c0 = np.where(both, base, 0.0), np.where(both, cand, 0.0)
    mp, k, cp = _moments(np.where(both, (b0 + c0) / 2, np.nan))
    g = gradient(mp, cp, statistic)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.where(both, (c0 - b0) / np.maximum(k, 1.0), 0.0) @ g
    d = sign * np.where(np.isfinite(d), d, 0.0)
    return Linear(float(d.sum()), 0.0, d, float(np.sqrt(np.sum(d**2))))


def reference(rng: np.random.Generator, U: FloatArray, draws: int, exact: bool) -> RefArray:
    """(draws, m) sign-flip reference ``s @ U`` (s in {-1, +1}); all 2**E flips when
    ``exact``. Drawn a block of rows at a time, so the (draws, E) flips are never held."""
    E = U.shape[0]
    colsum = U.sum(axis=0)
    if exact:
        (P,) = common.products(all_flips(E), U)
        return np.asarray(2 * P - colsum, dtype=np.float64)
    # random flips: one random byte per 8 entities, looked up in a table of the 256 sums
    # of their rows (8x fewer operations than the product); float32, as a Monte Carlo
    # reference needs no more; past _TABLE_BYTES of tables, 4-entity codes (16 sums each)
    m = U.shape[1]
    width = 8 if ((E + 7) // 8) * 256 * m * 4 <= _TABLE_BYTES else 4
    G = (E + width - 1) // width
    # codes drawn in blocks of ~8 MB (the blocks fix the random stream), summed _SUB rows
    # at a time into buffers that stay in the L2 cache
    rows = max(1, min(4096, (1 << 23) // max(G + 8 * m, 1)))
    # a member whose contributions are all 0 (an unchanged replay) has a reference of
    # exact zeros: only the others are looked up (the codes are drawn all the same)
    live = np.flatnonzero(np.any(U != 0, axis=0))
    cols = slice(None) if live.size == m else live
    tables = _flip_tables(U[:, live], width, G)
    shift = colsum[live]
    out = np.zeros((draws, m), dtype=np.float32)
    acc = np.empty((min(rows, _SUB), live.size), dtype=np.float32)  # the tables' precision
    looked = np.empty_like(acc)
    for a in range(0, draws, rows):
        n = min(draws, a + rows) - a
        codes = rng.integers(0, 1 << width, size=(n, G), dtype=np.uint8)
        for s in range(0, n if live.size else 0, _SUB):
            k = min(n, s + _SUB) - s
            part, total, one = codes[s : s + k], acc[:k], looked[:k]
            np.take(tables[0], part[:, 0], axis=0, out=total)
            for g in range(1, G):
                np.take(tables[g], part[:, g], axis=0, out=one)
                total += one
            out[a + s : a + s + k, cols] = 2 * total - shift
    return out


def all_flips(E: int) -> npt.NDArray[np.uint8]:
    """(2**E, E): every 0/1 flip of E entities once (bit e of each code)."""
    return ((np.arange(2**E, dtype=np.int64)[:, None] >> np.arange(E)) & 1).astype(np.uint8)


def _flip_tables(U: FloatArray, width: int, G: int) -> npt.NDArray[np.float32]:
    """(G, 2**width, m): per group of ``width`` entities, the sum of each code's rows."""
    E, m = U.shape
    codes_n = 1 << width
    padded = np.zeros((width * G, m))
    padded[:E] = U
    bits = all_flips(width)
    tables = np.empty((G, codes_n, m), dtype=np.float32)
    grouped = padded.reshape(G, width, m)
    for g0 in range(0, G, 32):  # built a slice at a time: a float64 slice is ~2 MB
        tables[g0 : g0 + 32] = np.einsum(
            "ck,gkm->gcm", bits.astype(np.float64), grouped[g0 : g0 + 32]
        )
    return tables


def step_down(
    T: FloatArray, Tp: RefArray, exact: bool, dropped: npt.NDArray[np.bool_] | None = None
) -> tuple[FloatArray, FloatArray, RefArray]:
    """Raw and Westfall–Young step-down max-T p (``dropped``: out of the max-T, not of
    their raw p), and the max over the kept members; a transposed copy of a block of draws
    at a time (a copy of the whole reference was a run's peak memory)."""
    B = Tp.shape[0]
    extra = 0 if exact else 1  # random draws: count the observed data as one more draw
    order = np.argsort(-T, kind="stable")
    up = order[::-1]
    hits, kept_hits = np.zeros(T.size, dtype=np.int64), np.zeros(T.size, dtype=np.int64)
    top = np.empty(B, dtype=Tp.dtype)
    for a in range(0, B, 4 * _SUB):
        tail = np.ascontiguousarray(Tp[a : a + 4 * _SUB].T[up])  # (m, block)
        hits += np.count_nonzero(tail >= T[up][:, None], axis=1)
        if dropped is not None:
            tail[dropped[up]] = -np.inf
        for i in range(1, len(tail)):  # row i: max over up[: i + 1] (10x maximum.accumulate)
            np.maximum(tail[i - 1], tail[i], out=tail[i])
        kept_hits += np.count_nonzero(tail[::-1] >= T[order][:, None], axis=1)
        top[a : a + 4 * _SUB] = tail[-1]
    raw = np.empty(T.size)
    raw[up] = (extra + hits) / (B + extra)
    p_sorted = (extra + kept_hits) / (B + extra)
    adjusted = np.empty_like(p_sorted)
    adjusted[order] = np.maximum.accumulate(p_sorted)
    return raw, adjusted, top


def screen_and_adjust(
    T: FloatArray, Tp: RefArray, exact: bool, alpha: float, selectable: npt.NDArray[np.bool_]
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_], FloatArray]:
    """Raw and adjusted p (never below raw), the screened, critical values at ``alpha``: a
    margin member with T < -SELECTION_Z leaves the max-T (margin-0 ones are exact: stay)."""
    m = T.size
    dropped = selectable & (-SELECTION_Z > T) if m > 1 else np.zeros(m, dtype=bool)
    raw, adj_s, top = step_down(T, Tp, exact, dropped)
    adjusted = np.minimum(1.0, np.maximum(adj_s, raw))
    # each member's critical value, as if kept (its power is asked at a rise): the
    # quantile of max(its draws, the kept others'); only a dropped member's differs
    crit = np.full(m, float(np.quantile(top, 1 - alpha)) if not dropped.all() else np.inf)
    for j in np.flatnonzero(dropped):
        crit[j] = float(np.quantile(np.maximum(top, Tp[:, j]), 1 - alpha))
    return raw, np.where(np.isfinite(T), adjusted, 1.0), dropped, crit


def mde(se: float, critical: float, correction: float = 0.0) -> float:
    """Minimum detectable excess over the margin at 90% power (a bias correction taken off
    the observed worsening must be made up by the rise)."""
    if se <= 0 or not math.isfinite(critical):
        return math.nan
    return (critical + _Z90) * se + max(0.0, correction)


#: Gaps closed to estimate a run's TRUE means for the MDE (~1 SE inflated near a tie).
MDE_TIE_GAP = 1.0


def snsr_shortfall(base: FloatArray, cand: FloatArray) -> Callable[[float], float]:
    """Mean shortfall of the test's statistic from a true SNSR rise (the top of the
    baseline's tie-closed means raised): the rise loses the range's bias, minus correction."""
    (mb, _, cb), (mc, _, cc) = _moments(base), _moments(cand)
    if not (np.all(np.isfinite(mb)) and np.all(np.isfinite(mc))) or mb.size < 2:
        return lambda rise: 0.0
    true_b = close_ties(mb, cb, MDE_TIE_GAP)
    top = int(np.argmax(true_b))
    root_b, root_c = _root(cb), _root(cc)
    at_true, at_base = bias(true_b, cb, "snsr", root_b), bias(mb, cb, "snsr", root_b)

    def shortfall(rise: float) -> float:
        alt = true_b.copy()
        alt[top] += rise
        loses = at_true - bias(alt, cc, "snsr", root_c)
        # what the test would take off at the alternative (as linear_margin computes it)
        corr = bias(close_ties(alt, cc), cc, "snsr", root_c) - at_base
        return float(loses + corr)

    return shortfall


def calibrated_mde(
    se: float,
    critical: float,
    base: FloatArray,
    cand: FloatArray,
    margin: float,
    iterations: int = 3,
) -> float:
    """Minimum detectable SNSR excess over a margin > 0 at 90% power, the shortfall at the
    alternative included (a fixed point: the shortfall depends on the rise)."""
    d = mde(se, critical)
    if not math.isfinite(d):
        return d
    shortfall = snsr_shortfall(base, cand)
    for _ in range(iterations):
        d = mde(se, critical) + max(0.0, shortfall(margin + d))
    return d
