"""Recommendation quality per group, beside fairness (a model can be fair and useless): the
share of a reply's K slots filled with a title the entity's catalogue knows (without one: a
valid list item); unusable replies score 0, failed prompts are left out (NaN). Entities are
the resampling unit; ``drift`` is a one-sided paired t-test, Holm-adjusted (no seed)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pytest_recfair.metrics.common import CountArray, FloatArray, holm, make_rng, resample_weights


@dataclass(frozen=True, slots=True)
class GroupQuality:
    """One group's mean quality over entities, its interval and the entities scored."""

    group: str
    mean: float
    ci: tuple[float, float] | None
    n: int


@dataclass(frozen=True, slots=True)
class QualitySummary:
    """Groups (in the given order) and their gap, max - min of the group means."""

    groups: tuple[GroupQuality, ...]
    gap: float
    gap_ci: tuple[float, float] | None


def boot_means(scores: FloatArray, weights: CountArray) -> FloatArray:
    """(B, groups) bootstrap means over entities (NaN: not scored) for resample ``weights``
    (B, E): one resample for every group of every attribute."""
    x = np.asarray(scores, dtype=np.float64)
    boot = np.empty((weights.shape[0], x.shape[1]))
    seen = ~np.isnan(x)
    vals, every = np.where(seen, x, 0.0), seen.all()
    rows = max(1, min(256, (1 << 20) // max(x.shape[0], 1)))  # ~1M cells a block
    for a in range(0, boot.shape[0], rows):
        W = np.asarray(weights[a : a + rows], dtype=np.float64)
        n = W.sum(axis=1, keepdims=True) if every else W @ seen  # the draws (exact integers)
        total = W @ vals
        with np.errstate(invalid="ignore", divide="ignore"):
            boot[a : a + rows] = np.where(n > 0, total / np.maximum(n, 1), np.nan)
    return boot


def summarize(
    scores: FloatArray,
    groups: Sequence[str],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    boot: FloatArray | None = None,
) -> QualitySummary:
    """Per-group means (NaN: not scored), bootstrap intervals over entities and the gap;
    ``boot``: these groups' columns of boot_means, when drawn already."""
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(groups):
        raise ValueError(f"summarize: scores must be (entities, {len(groups)}); got {x.shape}")
    counts = np.sum(~np.isnan(x), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, np.nansum(x, axis=0) / np.maximum(counts, 1), np.nan)
    gap = np.fmax.reduce(means) - np.fmin.reduce(means)  # NaN left out (all NaN: NaN)
    E = x.shape[0]
    cis: list[tuple[float, float] | None] = [None] * len(groups)
    gap_ci = None
    if E >= 2 and n_resamples > 0:
        if boot is None:
            boot = boot_means(x, resample_weights(make_rng(seed), n_resamples, E))
        lo, hi = (1 - confidence) / 2 * 100, (1 + confidence) / 2 * 100

        def ci(col: FloatArray, ok: bool) -> tuple[float, float] | None:
            col = col[~np.isnan(col)]
            ok = ok and col.size > 0
            return (float(np.percentile(col, lo)), float(np.percentile(col, hi))) if ok else None

        cis = [ci(boot[:, j], counts[j] >= 2) for j in range(len(groups))]
        gap_ci = ci(np.fmax.reduce(boot, axis=1) - np.fmin.reduce(boot, axis=1), len(groups) > 1)
    rows = (GroupQuality(g, float(means[j]), cis[j], int(counts[j])) for j, g in enumerate(groups))
    return QualitySummary(tuple(rows), gap, gap_ci)


@dataclass(frozen=True, slots=True)
class Drop:
    """One member of the drift family: a group's (or every group's) quality, then and now."""

    member: str
    baseline: float
    value: float
    p_value: float  # Holm-adjusted, one-sided (H1: drop > tolerance)
    n_paired: int

    @property
    def delta(self) -> float:
        return self.value - self.baseline


def drift(
    baseline: Mapping[str, Mapping[str, float | None]],
    candidate: Mapping[str, Mapping[str, float | None]],
    *,
    tolerance: float,
) -> list[Drop]:
    """Paired drop test per member on the entities both runs scored (their means reported);
    fewer than 2 shared: left out."""
    raw: list[tuple[str, float, float, float, int]] = []
    for member, base in baseline.items():
        cand = candidate.get(member) or {}
        shared = [e for e in base if base[e] is not None and cand.get(e) is not None]
        if len(shared) < 2:
            continue
        b, c = (np.array([d[e] for e in shared], dtype=np.float64) for d in (base, cand))
        # one-sided paired t-test of H1: mean(c - b) < -tolerance (quality fell by more)
        shifted, sd, n = float((c - b).mean()) + tolerance, float((c - b).std(ddof=1)), b.size
        if sd == 0.0 or not math.isfinite(sd):  # every entity moved alike: the sign decides
            p = 0.0 if shifted < 0 else 1.0
        else:
            p = t_cdf(shifted / (sd / math.sqrt(n)), n - 1)
        raw.append((member, float(b.mean()), float(c.mean()), p, n))
    adjusted = holm([r[3] for r in raw])
    return [Drop(m, b, c, p, n) for (m, b, c, _, n), p in zip(raw, adjusted, strict=True)]


def t_cdf(t: float, df: int) -> float:
    """Student's t distribution function (through the regularised incomplete beta)."""
    if df < 1:
        raise ValueError(f"t_cdf: df must be >= 1; got {df}")
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2.0, 0.5, x)
    return tail if t < 0 else 1.0 - tail


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b) by its continued fraction (Lentz)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(ln_front + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1.0) / (a + b + 2.0):  # the fraction converges fast on this side only
        return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b
    return front * _beta_fraction(a, b, x) / a


def _beta_fraction(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h
