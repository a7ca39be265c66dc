"""Inference the gate can trust: intervals with coverage, a family-wise drift test.

Pure numpy. Three parts (the reasoning and the measured figures are in docs/baselines.md):

- ``mean_intervals``: a t-interval over entities for every value's mean similarity Sim(a)
  (entities are the independent units; 93%+ coverage already at 25 entities);
- ``spread_intervals``: SNSR, SNSV and PAFS intervals that also cover a fair attribute
  (true SNSR 0) and ties at the top. Each statistic is a spread g of the value means
  (range, sd, mean absolute deviation), so its interval inverts a studentised bootstrap
  test (bootstrap-t) of each candidate value theta: the estimated pattern of the means
  rescaled to spread theta plus the entities' bootstrap deviations of the means gives
  draws of the estimate under theta (at theta 0 exactly the fair attribute's noise);
  each draw's (spread - theta) is divided by its delta-method standard error, computed
  from that resample's own covariance of the value means, and theta is kept when the
  observed (spread - theta) / standard error is not in either tail of those ratios;
- ``drift_test``: every (attribute, metric, statistic) a test gates, tested at once against
  the stored baseline with a paired sign-flip permutation test (each shared entity's
  baseline and candidate rows are swapped or not, the SAME swaps for every member of the
  family) and the Westfall–Young step-down max-T adjustment. The tolerance is the margin:
  H0 "the statistic worsened by at most ``tolerance``" against H1 "by more".
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
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
    "SpreadIntervals",
    "drift_test",
    "mean_intervals",
    "required_resamples",
    "spread_intervals",
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


@dataclass(frozen=True)
class SpreadIntervals:
    """Intervals for SNSR, SNSV and PAFS of one attribute (see the module docstring)."""

    snsr: Interval
    snsv: Interval
    pafs: Interval
    n_resamples: int
    confidence: float
    method: str = "inverted-bootstrap-t"


@dataclass(frozen=True)
class _Boot:
    """An attribute's value means and their bootstrap: ``dev`` (B, V) the deviations of
    each resample's means, ``cov`` (V, V, B) each resample's own covariance of its means
    (resamples last: the per-draw arithmetic runs over contiguous rows of B) and
    ``cov_hat`` (V, V, 1) the data's; both the usual unbiased estimate, pairwise over the
    entities scored in both values."""

    est: FloatArray
    dev: FloatArray
    cov: FloatArray
    cov_hat: FloatArray


def _moments(W: _weights.CountArray, X0: FloatArray, M: FloatArray) -> tuple[FloatArray, ...]:
    """Per resample (rows of W): value means (B, V) and their covariance (V, V, B).

    With w the entity counts, v the validity and x the scores (0 where not valid):
    cov_jk = sum w v_j v_k (x_j - m_j)(x_k - m_k) / (n_j n_k) * n_jk / (n_jk - 1), its
    sums from one pass over the weights (x_j x_k, x_j v_k and v_j v_k per entity; with
    every cell scored only x_j x_k, j <= k, as then n_j = n_k = n_jk = sum w).
    """
    E, V = X0.shape
    B = W.shape[0]
    j, k = np.triu_indices(V)
    cov = np.empty((V, V, B))
    if M.all():  # the common case: a quarter of the columns
        (both,) = _weights.products(W, np.concatenate([M[:, :1], X0, X0[:, j] * X0[:, k]], 1))
        n, means = both[:, :1], both[:, 1 : V + 1] / both[:, :1]
        with np.errstate(invalid="ignore", divide="ignore"):
            ss = both[:, V + 1 :] - n * means[:, j] * means[:, k]
            upper = (ss / (n * (n - 1.0))).T
    else:
        XX = X0[:, j] * X0[:, k]
        XM = (X0[:, :, None] * M[:, None, :]).reshape(E, V * V)
        MM = M[:, j] * M[:, k]
        (both,) = _weights.products(W, np.concatenate([M, X0, XX, XM, MM], axis=1))
        u = j.size
        cnt, sums = both[:, :V], both[:, V : 2 * V]
        P, A = both[:, 2 * V : 2 * V + u], both[:, 2 * V + u : 2 * V + u + V * V]
        C = both[:, 2 * V + u + V * V :]
        with np.errstate(invalid="ignore", divide="ignore"):
            means = sums / cnt
            mj, mk = means[:, j], means[:, k]
            ss = P - A[:, j * V + k] * mk - A[:, k * V + j] * mj + mj * mk * C
            upper = (ss / (cnt[:, j] * cnt[:, k]) * (C / (C - 1.0))).T
    upper[~np.isfinite(upper)] = 0.0
    cov[j, k] = upper
    cov[k, j] = upper
    return means, cov


def _boot_devs(X: FloatArray, W: _weights.CountArray) -> _Boot:
    """The bootstrap of the value means (see _Boot).

    NaN cells are left out of their column; a resample in which a value has no scorable
    entity gets deviation 0 there (it is rare, and only possible with missing="skip").
    """
    valid = ~np.isnan(X)
    X0 = np.where(valid, X, 0.0)
    M = valid.astype(np.float64)
    n = M.sum(axis=0)
    est = np.divide(X0.sum(axis=0), n, out=np.full(n.shape, np.nan), where=n > 0)
    # one pass over the (B, E) weights for the means and the covariances
    means, cov = _moments(W, X0, M)
    dev = means - est
    dev[~np.isfinite(dev)] = 0.0
    _, cov_hat = _moments(np.ones((1, X.shape[0])), X0, M)
    return _Boot(est, dev, cov, cov_hat)


def _draw_weights(rng: np.random.Generator, B: int, E: int) -> _weights.CountArray:
    idx = rng.integers(0, E, size=(B, E), dtype=np.int64)
    idx += (np.arange(B, dtype=np.int64) * E)[:, None]
    counts = np.bincount(idx.ravel(), minlength=B * E).reshape(B, E)
    return counts.astype(np.min_scalar_type(int(counts.max(initial=0))))


def _spread(means: FloatArray, kind: str) -> FloatArray:
    """Range, population sd or mean absolute deviation over the last axis: each is
    translation invariant and positively homogeneous (g(c * x) = c * g(x), c >= 0)."""
    if kind == "range":
        return np.asarray(np.max(means, axis=-1) - np.min(means, axis=-1))
    if kind == "sd":
        return np.asarray(np.std(means, axis=-1))
    centre = np.mean(means, axis=-1, keepdims=True)
    return np.asarray(np.mean(np.abs(means - centre), axis=-1))


def _spread_var(x: FloatArray, cov: FloatArray, kind: str) -> tuple[FloatArray, FloatArray]:
    """_spread of each column of ``x`` (V, B) and its delta-method variance grad' cov grad
    under that column's covariance of the means (``cov`` (V, V, B)). The gradient: +1 / -1
    at the (first) largest / smallest value for the range, the centred means / (V sd) for
    the sd, (sign - mean sign) / V for the mean absolute deviation (the sign of each
    value's distance from the centre)."""
    V, B = x.shape
    if kind == "range":
        hi, lo = np.max(x, axis=0), np.min(x, axis=0)
        i_hi, i_lo = np.zeros(B, dtype=np.intp), np.zeros(B, dtype=np.intp)
        for v in range(V - 1, 0, -1):  # the first largest / smallest, as np.argmax
            np.copyto(i_hi, v, where=x[v] == hi)
            np.copyto(i_lo, v, where=x[v] == lo)
        np.copyto(i_hi, 0, where=x[0] == hi)
        np.copyto(i_lo, 0, where=x[0] == lo)
        cols = np.arange(B)
        var = cov[i_hi, i_hi, cols] + cov[i_lo, i_lo, cols] - 2.0 * cov[i_hi, i_lo, cols]
        return hi - lo, var
    c = x - np.mean(x, axis=0)
    if kind == "sd":
        spread = np.sqrt(np.mean(c * c, axis=0))
        g = np.divide(c, V * spread, out=np.zeros_like(c), where=spread > 0)
    else:
        spread = np.mean(np.abs(c), axis=0)
        sign = np.sign(c)
        g = (sign - np.mean(sign, axis=0)) / V
    return spread, np.einsum("jb,jb->b", np.einsum("jkb,kb->jb", cov, g), g)


class _SdDraws:
    """The sd and its delta-method variance of theta * shapes + devs (both (V, B) and
    centred) for any theta, from six (B,) sums computed once: with c = theta s + d,
    V sd^2 = theta^2 s's + 2 theta s'd + d'd and (V sd)^2 var = c' cov c, expanded the
    same way (see _spread_var)."""

    def __init__(self, shapes: FloatArray, devs: FloatArray, cov: FloatArray) -> None:
        V = shapes.shape[0]
        cs, cd = np.einsum("jkb,kb->jb", cov, shapes), np.einsum("jkb,kb->jb", cov, devs)
        self.m2 = [
            np.sum(a * b, axis=0) / V for a, b in ((shapes, shapes), (shapes, devs), (devs, devs))
        ]
        self.q = [np.sum(a * b, axis=0) / V**2 for a, b in ((cs, shapes), (cs, devs), (cd, devs))]

    def __call__(self, theta: float) -> tuple[FloatArray, FloatArray]:
        ss, sd, dd = self.m2
        m2 = np.maximum(theta * theta * ss + 2.0 * theta * sd + dd, 0.0)
        qss, qsd, qdd = self.q
        quad = theta * theta * qss + 2.0 * theta * qsd + qdd
        return np.sqrt(m2), np.divide(quad, m2, out=np.zeros_like(m2), where=m2 > 0)


_RAMP = 2.0  # null spreads over which the upper tail's share of alpha grows to alpha / 2
_STEPS = 16  # a bound is found to 2**-16 of its bracket (as by 16 bisection steps)
_THETA_MAX = 1.0  # similarities are in [0, 1]: no range, sd or mean abs. deviation exceeds 1
_TINY_VAR = 1e-24  # standard errors below 1e-12 (similarities are in [0, 1]) count as 1e-12


def _patterns(est: FloatArray, dev: FloatArray, kind: str) -> FloatArray:
    """(V, B) pattern of the value means per resample, centred and scaled to spread 1.

    The pattern is itself estimated, so each resample takes it from another resample's
    means (est + the previous draw's deviations): the reference distribution then carries
    the pattern's uncertainty too. A pattern with no spread becomes +-1 halves.
    """
    P = est[None, :] + np.roll(dev, 1, axis=0)
    P = P - np.mean(P, axis=1, keepdims=True)
    g = _spread(P, kind)
    flat = ~(g > 0)
    if flat.any():
        P[flat] = np.sign(np.arange(est.size) - (est.size - 1) / 2.0)
        g[flat] = _spread(P[flat], kind)
    return np.ascontiguousarray((P / g[:, None]).T)


def _quantile(x: FloatArray, q: float) -> float:
    """numpy's default (linear) quantile of a 1-d array, by partition."""
    pos = q * (x.size - 1)
    k = math.floor(pos)
    k1 = min(k + 1, x.size - 1)
    part = np.partition(x, (k, k1))
    return float(part[k] + (pos - k) * (part[k1] - part[k]))


def _root(h: Callable[[float], float], lo: float, hi: float, h_lo: float, h_hi: float) -> float:
    """The point in [lo, hi] where h crosses 0 (h_lo < 0 <= h_hi or h_lo <= 0 < h_hi; a
    value of 0 counts as the ``hi`` side) to within (hi - lo) / 2**_STEPS, as _STEPS
    bisection steps would find it. By the Illinois variant of regula falsi: a secant step
    inside the bracket, the value at an end kept twice in a row halved, each step at least
    half the tolerance from the ends (so it closes the bracket once the root is within
    reach); bisection if 3 * _STEPS such steps did not get there. The bounds' h is close to
    linear in theta (the studentised statistic is close to a pivot), so a few steps do.
    """
    tol = (hi - lo) * 2.0**-_STEPS
    last = 0
    for step in range(4 * _STEPS):
        if not hi - lo > tol:
            break
        if step < 3 * _STEPS:
            c = hi - h_hi * (hi - lo) / (h_hi - h_lo)
            c = min(max(c, lo + 0.5 * tol), hi - 0.5 * tol)
        else:
            c = 0.5 * (lo + hi)
        h_c = h(c)
        side = 1 if h_c >= 0 else -1
        if side == 1:
            hi, h_hi = c, h_c
            h_lo = 0.5 * h_lo if last == 1 else h_lo
        else:
            lo, h_lo = c, h_c
            h_hi = 0.5 * h_hi if last == -1 else h_hi
        last = side
    return 0.5 * (lo + hi)


def _inverted(boot: _Boot, kind: str, alpha: float) -> Interval:
    """Interval for g(true means) by inverting a studentised bootstrap test of each
    candidate value.

    Candidate theta: a pattern of the value means (see _patterns) rescaled so that its
    spread is theta (theta 0: all values equal, the fair attribute exactly), plus the
    bootstrap deviations of the means, gives draws x_b of the means under theta. The test
    statistic is t = (g - theta) / se: se the delta-method standard error of g, for a draw
    from its own resample's covariance of the means (so t carries the uncertainty of the
    standard error, as a Student t does; Hall's bootstrap-t), for the data from theirs.
    theta is kept when the observed t lies between the alpha_U and 1 - alpha_L quantiles
    of the draws' t. alpha_L + alpha_U = alpha at every theta; alpha_U is 0 at theta 0 (a
    fair attribute cannot look too fair: all of alpha goes to the lower bound) and grows
    to alpha / 2 over _RAMP null spreads. Both bounds are found by a root search (_root).
    """
    est, dev = boot.est, boot.dev
    obs = float(_spread(est, kind))
    sd0 = float(np.std(_spread(dev, kind)))
    if not sd0 > 1e-12:  # no noise in the gaps between values (rounding error aside)
        return (obs, obs)
    shapes = _patterns(est, dev, kind)
    devs = np.ascontiguousarray((dev - np.mean(dev, axis=1, keepdims=True)).T)
    _, var_obs = _spread_var(est[:, None], boot.cov_hat, kind)
    se_obs = math.sqrt(max(float(var_obs[0]), _TINY_VAR))

    sd_draws = _SdDraws(shapes, devs, boot.cov) if kind == "sd" else None

    def gap(theta: float, upper_tail: bool) -> float:
        """> 0: theta rejected as too small (upper_tail) or as too large (not upper_tail);
        how far the observed t is beyond (or, < 0, within) the draws' quantile."""
        a_up = 0.5 * alpha * min(1.0, theta / (_RAMP * sd0))
        if sd_draws is not None:
            spread, var = sd_draws(theta)
        else:
            spread, var = _spread_var(theta * shapes + devs, boot.cov, kind)
        t = (spread - theta) / np.sqrt(np.maximum(var, _TINY_VAR))
        t_obs = (obs - theta) / se_obs
        if upper_tail:
            return t_obs - _quantile(t, 1.0 - (alpha - a_up))
        return _quantile(t, a_up) - t_obs

    # Both searches stop at _THETA_MAX: no spread of similarities in [0, 1] is larger.
    # With a handful of entities many resamples have next to no covariance, their t is
    # huge, and the gap may never change sign: the bound is then _THETA_MAX (wide, not
    # wrong). The bracket grows geometrically, so a search takes ~log2(1 / sd0) steps.
    lower, g_lo = 0.0, gap(0.0, True)
    if g_lo > 0:  # theta 0 rejected: the spread is above noise
        hi = min(max(obs, sd0), _THETA_MAX)
        g_hi = gap(hi, True)
        while g_hi > 0 and hi < _THETA_MAX:
            hi = min(2.0 * hi, _THETA_MAX)
            g_hi = gap(hi, True)
        if not g_hi <= 0:  # rejected all the way (or undefined): the most it can be
            return (_THETA_MAX, _THETA_MAX)
        lower = _root(lambda t: -gap(t, True), 0.0, hi, -g_lo, -g_hi)
    step = 4.0 * sd0
    lo, hi = max(lower, sd0 * 1e-9), min(max(obs, lower) + step, _THETA_MAX)
    g_lo, g_hi = math.nan, gap(hi, False)
    while not g_hi > 0 and hi < _THETA_MAX:
        step *= 2.0
        lo, g_lo, hi = hi, g_hi, min(hi + step, _THETA_MAX)
        g_hi = gap(hi, False)
    if not g_hi > 0:  # not rejected up to the largest possible spread
        return (lower, _THETA_MAX)
    if math.isnan(g_lo):
        g_lo = gap(lo, False)
    upper = lo if not g_lo <= 0 else _root(lambda t: gap(t, False), lo, hi, g_lo, g_hi)
    return (lower, max(lower, upper))


def spread_intervals(
    sims: FloatArray,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int | np.random.Generator = 0,
    weights: _weights.CountArray | None = None,
) -> SpreadIntervals:
    """SNSR / SNSV / PAFS intervals of one (entities x values) similarity matrix.

    ``weights`` (B, E): entity resample counts (integers, or floats) to use instead of
    drawing them from ``seed`` (an audit's tables share one draw).
    """
    conf = check_confidence(confidence)
    B = check_positive_int(n_resamples, "n_resamples")
    rng = make_rng(seed)
    X = np.asarray(sims, dtype=np.float64)
    E, V = X.shape
    if E < 2 or V < 2:
        nan = (math.nan, math.nan)
        zero = (0.0, 0.0) if V == 1 else nan
        return SpreadIntervals(zero, zero, (1.0, 1.0) if V == 1 else nan, B, conf)
    W = _draw_weights(rng, B, E) if weights is None else np.asarray(weights)
    if W.shape != (B, E):
        raise DataError(f"spread_intervals: weights must be ({B}, {E}); got {W.shape}.")
    # an entity with no scorable cell (missing="skip") stays all-NaN, without a warning
    keep = ~np.isnan(X).all(axis=1)
    # the common case keeps them all: no copy of the (B, E) weights for every table
    boot = _boot_devs(X, W) if keep.all() else _boot_devs(X[keep], W[:, keep])
    if np.isnan(boot.est).any():
        nan = (math.nan, math.nan)
        return SpreadIntervals(nan, nan, nan, B, conf)
    alpha = 1 - conf
    snsr = _inverted(boot, "range", alpha)
    snsv = _inverted(boot, "sd", alpha)
    mad = _inverted(boot, "mad", alpha)
    pafs = (max(0.0, 1.0 - mad[1]), min(1.0, 1.0 - mad[0]))
    return SpreadIntervals(_clip(snsr), _clip(snsv), pafs, B, conf)


def _clip(iv: Interval) -> Interval:
    return (min(1.0, max(0.0, iv[0])), min(1.0, max(0.0, iv[1])))


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
