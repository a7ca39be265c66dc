"""SNSR / SNSV / PAFS intervals (spreads of the value means) that also cover a fair
attribute and ties at the top: each inverts a bootstrap-t test of every candidate spread
(reasoning and measured coverage: docs/baselines.md)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pytest_recfair.errors import DataError
from pytest_recfair.metrics import common
from pytest_recfair.metrics.common import FloatArray, Interval
from pytest_recfair.metrics.inference import t_quantile


@dataclass(frozen=True)
class SpreadIntervals:
    snsr: Interval
    snsv: Interval
    pafs: Interval


@dataclass(frozen=True)
class _Boot:
    """Value means, their bootstrap deviations ``dev`` (B, V) and covariances ``cov``
    (V, V, B; resamples last so per-draw arithmetic runs over contiguous rows), ``cov_hat``
    the data's: unbiased, pairwise over the entities scored in both values."""

    est: FloatArray
    dev: FloatArray
    cov: FloatArray
    cov_hat: FloatArray
    n: int  # entities
    devs: FloatArray  # dev centred (V, B) and, below, _patterns' means: the spreads share them
    others: FloatArray  # (B, V) each resample's means from another's, centred


def _moments(W: common.CountArray, X0: FloatArray, M: FloatArray) -> tuple[FloatArray, ...]:
    """Per resample: value means (B, V) and their covariance (V, V, B), cov_jk = sum w v_j
    v_k (x_j - m_j)(x_k - m_k) / (n_j n_k) * n_jk / (n_jk - 1), one pass over W."""
    E, V = X0.shape
    B = W.shape[0]
    j, k = np.triu_indices(V)
    cov = np.empty((V, V, B))
    if M.all():  # the common case: a quarter of the columns
        (both,) = common.products(W, np.concatenate([M[:, :1], X0, X0[:, j] * X0[:, k]], 1))
        n = both[:, :1]
        # a resample may hold none of the scored entities (all its weight on entities left
        # out as unscorable): its means are NaN, as in the masked branch below
        with np.errstate(invalid="ignore", divide="ignore"):
            means = both[:, 1 : V + 1] / n
            ss = both[:, V + 1 :] - n * means[:, j] * means[:, k]
            upper = (ss / (n * (n - 1.0))).T
    else:
        XX = X0[:, j] * X0[:, k]
        XM = (X0[:, :, None] * M[:, None, :]).reshape(E, V * V)
        MM = M[:, j] * M[:, k]
        (both,) = common.products(W, np.concatenate([M, X0, XX, XM, MM], axis=1))
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


def _boot_devs(X: FloatArray, W: common.CountArray) -> _Boot:
    """NaN cells left out; a value with no scorable entity in a resample: deviation 0."""
    valid = ~np.isnan(X)
    X0 = np.where(valid, X, 0.0)
    M = valid.astype(np.float64)
    n = M.sum(axis=0)
    est = np.divide(X0.sum(axis=0), n, out=np.full(n.shape, np.nan), where=n > 0)
    means, cov = _moments(W, X0, M)
    dev = means - est
    dev[~np.isfinite(dev)] = 0.0
    _, cov_hat = _moments(np.ones((1, X.shape[0])), X0, M)
    P = est[None, :] + np.roll(dev, 1, axis=0)
    devs = np.ascontiguousarray((dev - np.mean(dev, axis=1, keepdims=True)).T)
    return _Boot(est, dev, cov, cov_hat, X.shape[0], devs, P - np.mean(P, axis=1, keepdims=True))


def _spread(means: FloatArray, kind: str) -> FloatArray:
    """Range, sd or mean absolute deviation (translation invariant, homogeneous: _patterns)."""
    if kind == "range":  # exact: over the contiguous transpose (a short last axis is slow)
        t = np.ascontiguousarray(np.moveaxis(means, -1, 0))
        return np.asarray(np.max(t, axis=0) - np.min(t, axis=0))
    if kind == "sd":
        return np.asarray(np.std(means, axis=-1))
    centre = np.mean(means, axis=-1, keepdims=True)
    return np.asarray(np.mean(np.abs(means - centre), axis=-1))


def _spread_var(x: FloatArray, cov: FloatArray, kind: str) -> tuple[FloatArray, FloatArray]:
    """_spread of each column of ``x`` (V, B) and its delta-method variance grad' cov grad."""
    V, B = x.shape
    if kind == "range":
        i_hi, i_lo, cols = np.argmax(x, axis=0), np.argmin(x, axis=0), np.arange(B)
        var = cov[i_hi, i_hi, cols] + cov[i_lo, i_lo, cols] - 2.0 * cov[i_hi, i_lo, cols]
        return x[i_hi, cols] - x[i_lo, cols], var
    c = x - np.mean(x, axis=0)
    if kind == "sd":
        spread = np.sqrt(np.mean(c * c, axis=0))
        g = np.divide(c, V * spread, out=np.zeros_like(c), where=spread > 0)
    else:
        spread = np.mean(np.abs(c), axis=0)
        sign = np.sign(c)
        g = (sign - np.mean(sign, axis=0)) / V
    return spread, np.einsum("jb,jb->b", np.einsum("jkb,kb->jb", cov, g), g)


Draws = Callable[[float], tuple[FloatArray, FloatArray]]


def _sd_draws(shapes: FloatArray, devs: FloatArray, cov: FloatArray) -> Draws:
    """sd and its variance of theta * shapes + devs from six sums (quadratics in theta)."""
    V = shapes.shape[0]
    cs, cd = np.einsum("jkb,kb->jb", cov, shapes), np.einsum("jkb,kb->jb", cov, devs)
    ss, sd, dd = (
        np.sum(a * b, axis=0) / V for a, b in ((shapes, shapes), (shapes, devs), (devs, devs))
    )
    qss, qsd, qdd = (
        np.sum(a * b, axis=0) / V**2 for a, b in ((cs, shapes), (cs, devs), (cd, devs))
    )

    def draws(theta: float) -> tuple[FloatArray, FloatArray]:
        m2 = np.maximum(theta * theta * ss + 2.0 * theta * sd + dd, 0.0)
        quad = theta * theta * qss + 2.0 * theta * qsd + qdd
        return np.sqrt(m2), np.divide(quad, m2, out=np.zeros_like(m2), where=m2 > 0)

    return draws


_RAMP = 2.0  # null spreads over which the upper tail's share of alpha grows to alpha / 2
_STEPS = 16  # a bound is found to 2**-16 of its bracket (as by 16 bisection steps)
_THETA_MAX = 1.0  # similarities are in [0, 1]: no range, sd or mean abs. deviation exceeds 1
_TINY_VAR = 1e-24  # standard errors below 1e-12 (similarities are in [0, 1]) count as 1e-12
_DEGENERATE = 0.01  # a resample's standard error under 1% of the spread's: a broken t draw


def _patterns(P: FloatArray, kind: str) -> FloatArray:
    """(V, B) value means centred and scaled to spread 1, each from another resample's
    means (_Boot.others: the reference carries the pattern's uncertainty); no spread: +-1 halves."""
    g = _spread(P, kind)
    flat = ~(g > 0)
    if flat.any():
        P = P.copy()  # the three spreads' patterns start from it
        P[flat] = np.sign(np.arange(P.shape[1]) - (P.shape[1] - 1) / 2.0)
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
    """Where h crosses 0 in [lo, hi] (0: the ``hi`` side) to _STEPS bisections' precision:
    Illinois regula falsi (h is near linear: a near pivot), bisection after 3 * _STEPS."""
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
    """Hall's bootstrap-t test inverted: under theta the means are a pattern scaled to
    theta plus the deviations; theta kept when t = (g - theta) / se lies between the alpha_U
    and 1 - alpha_L quantiles, alpha_U 0 at theta 0 (a fair attribute cannot look too
    fair), growing to alpha / 2 over _RAMP null spreads."""
    est, dev = boot.est, boot.dev
    obs = float(_spread(est, kind))
    sd0 = float(np.std(_spread(dev, kind)))
    if not sd0 > 1e-12:  # no noise in the gaps between values (rounding error aside)
        return (obs, obs)
    # A few entities carrying all the variation: resamples without them have se ~0 and an
    # unbounded t; once they are alpha / 4 the inverted interval would run to _THETA_MAX
    # whatever the data say. Then obs +- t(n - 1) x the bootstrap se of the spread (x
    # sqrt(n / (n - 1))); not the percentile interval: a resampled range or sd is biased up.
    g, var = _spread_var(np.ascontiguousarray((est + dev).T), boot.cov, kind)
    sd_g = float(np.std(g))
    if np.mean(var < (_DEGENERATE * sd_g) ** 2) > alpha / 4:
        half = t_quantile(1.0 - alpha / 2.0, boot.n - 1) * math.sqrt(boot.n / (boot.n - 1)) * sd_g
        return (max(0.0, obs - half), obs + half)
    shapes, devs = _patterns(boot.others, kind), boot.devs
    _, var_obs = _spread_var(est[:, None], boot.cov_hat, kind)
    se_obs = math.sqrt(max(float(var_obs[0]), _TINY_VAR))
    draws: Draws = (
        _sd_draws(shapes, devs, boot.cov)
        if kind == "sd"
        else (lambda theta: _spread_var(theta * shapes + devs, boot.cov, kind))
    )

    def gap(theta: float, upper_tail: bool) -> float:
        """> 0: theta rejected as too small (upper_tail) or too large (not upper_tail)."""
        a_up = 0.5 * alpha * min(1.0, theta / (_RAMP * sd0))
        spread, var = draws(theta)
        t = (spread - theta) / np.sqrt(np.maximum(var, _TINY_VAR))
        t_obs = (obs - theta) / se_obs
        if upper_tail:
            return t_obs - _quantile(t, 1.0 - (alpha - a_up))
        return _quantile(t, a_up) - t_obs

    # With few entities the gap may never change sign: the bound is then _THETA_MAX (wide,
    # not wrong). The bracket grows geometrically: ~log2(1 / sd0) steps.
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
    weights: common.CountArray | None = None,
) -> SpreadIntervals:
    """SNSR / SNSV / PAFS intervals of one (entities x values) similarity matrix;
    ``weights`` (B, E) replace the draw from ``seed`` (an audit's tables share one)."""
    conf = common.check_confidence(confidence)
    B = common.check_positive_int(n_resamples, "n_resamples")
    rng = common.make_rng(seed)
    X = np.asarray(sims, dtype=np.float64)
    E, V = X.shape
    nan = (math.nan, math.nan)
    if E < 2 or V < 2:
        zero = (0.0, 0.0) if V == 1 else nan
        return SpreadIntervals(zero, zero, (1.0, 1.0) if V == 1 else nan)
    W = common.resample_weights(rng, B, E) if weights is None else np.asarray(weights)
    if W.shape != (B, E):
        raise DataError(f"spread_intervals: weights must be ({B}, {E}); got {W.shape}.")
    # an entity with no scorable cell (missing="skip") stays all-NaN, without a warning
    keep = ~np.isnan(X).all(axis=1)
    # keep.all(), the common case: no copy of the (B, E) weights
    boot = _boot_devs(X, W) if keep.all() else _boot_devs(X[keep], W[:, keep])
    if np.isnan(boot.est).any():
        return SpreadIntervals(nan, nan, nan)
    snsr, snsv, mad = (_inverted(boot, kind, 1 - conf) for kind in ("range", "sd", "mad"))
    pafs = (max(0.0, 1.0 - mad[1]), min(1.0, 1.0 - mad[0]))
    lo_r, hi_r, lo_v, hi_v = (min(1.0, max(0.0, x)) for x in (*snsr, *snsv))
    return SpreadIntervals((lo_r, hi_r), (lo_v, hi_v), pafs)
