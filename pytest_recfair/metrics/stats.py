"""Bootstrap CIs, paired run comparison, noise floor; resampled over ENTITIES (an entity's
lists share its popularity and the model's knowledge of it)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pytest_recfair.errors import DataError
from pytest_recfair.metrics import common, inference, spread
from pytest_recfair.metrics._drift_core import stat_rows
from pytest_recfair.metrics.aggregate import SimilarityMatrix, _column_means
from pytest_recfair.metrics.common import (
    FloatArray,
    Interval,
    check_choice,
    check_confidence,
    check_k,
    check_list,
    check_positive_int,
    make_rng,
)
from pytest_recfair.metrics.lists import NEUTRAL_PAD, SENSITIVE_PAD, curves_all_k, encode
from pytest_recfair.vocab import METRICS, STATISTICS, VARIANTS, MetricName, Statistic, Variant


@dataclass(frozen=True)
class AttributeIntervals:
    """The intervals of an attribute table: ``intervals``' (t / inverted bootstrap-t), or
    ``bootstrap``'s percentile ones, which leave out ``n_undefined`` resamples (some value
    without a scorable entity, only with missing="skip")."""

    value_ci: dict[str, Interval]
    snsr_ci: Interval
    snsv_ci: Interval
    pafs_ci: Interval
    n_resamples: int
    confidence: float
    method: str = "t / inverted-bootstrap-t"
    n_undefined: int = 0


@dataclass(frozen=True)
class Comparison:
    """``delta`` = candidate - baseline of one statistic; ``p_value`` one-sided for H1 "the
    candidate is less fair"."""

    statistic: str
    baseline: float
    candidate: float
    delta: float
    ci: Interval
    p_value: float
    n_paired: int
    n_resamples: int
    confidence: float
    alternative: str


@dataclass(frozen=True)
class NoiseFloor:
    """Mean similarity between repeated neutral lists of the same entity, with its CI."""

    mean: float
    ci: Interval
    n: int


def seeded_weights(seed: int | np.random.Generator, B: int, E: int) -> common.CountArray:
    """Resample weights of ``seed``, drawn once for every table of an audit (all alike)."""
    if isinstance(seed, np.random.Generator):
        return common.resample_weights(seed, B, E)
    return _int_seed_weights(int(seed), B, E)


# One entry: bounded memory, and an audit's tables share seed, resamples and entities.
@functools.lru_cache(maxsize=1)
def _int_seed_weights(seed: int, B: int, E: int) -> common.CountArray:
    # kept as float64 when that is one block (<= 16 MB): not converted for every table
    W = common.resample_weights(make_rng(seed), B, E)
    W = np.asarray(W, dtype=np.float64) if W.size <= common.BLOCK_CELLS else W
    W.setflags(write=False)
    return W


def forget_weights() -> None:
    """Drop the reused resample weights (20 MB at 10,000 entities) once an audit is scored."""
    _int_seed_weights.cache_clear()


def _weighted_means(W: common.CountArray, sims: FloatArray) -> FloatArray:
    """(B, V) per-value means of each resample; NaN cells (skipped) are left out."""
    valid = ~np.isnan(sims)
    if valid.all():
        # Every cell counts: each resample's count is its number of draws, E, exactly (the
        # weights are small integers, so any summation order gives the same number).
        (sums,) = common.products(W, sims)
        counts = np.broadcast_to(W.sum(axis=1, dtype=np.float64)[:, None], sums.shape)
    else:
        sums, counts = common.products(W, np.where(valid, sims, 0.0), valid.astype(np.float64))
    out = np.full(sums.shape, np.nan)
    np.divide(sums, counts, out=out, where=counts > 0)
    return out


def _interval(x: FloatArray, confidence: float) -> Interval:
    lo, hi = common.percentile_ci(x, confidence)
    return (float(lo), float(hi))


def _check_matrix(m: object, name: str) -> SimilarityMatrix:
    if not isinstance(m, SimilarityMatrix):
        raise TypeError(
            f"{name} must be a SimilarityMatrix (from similarity_matrix); got {type(m).__name__}."
        )
    if len(m.entities) == 0 or len(m.values) == 0:
        raise DataError(f"{name} is empty ({len(m.entities)} entities x {len(m.values)} values).")
    return m


def _prepared(
    matrix: SimilarityMatrix, n_resamples: int, seed: int | np.random.Generator, confidence: float
) -> tuple[SimilarityMatrix, int, float, FloatArray, common.CountArray]:
    """The checked matrix, resamples, confidence, its sims and ``seed``'s shared weights."""
    m = _check_matrix(matrix, "matrix")
    B = check_positive_int(n_resamples, "n_resamples")
    conf = check_confidence(confidence)
    make_rng(seed)  # validates the seed
    sims = np.asarray(m.sims, dtype=np.float64)
    return m, B, conf, sims, seeded_weights(seed, B, sims.shape[0])


def bootstrap(
    matrix: SimilarityMatrix,
    n_resamples: int = 1000,
    seed: int | np.random.Generator = 0,
    confidence: float = 0.95,
) -> AttributeIntervals:
    """Percentile CIs for every value's mean and for SNSR, SNSV, PAFS (kept for scripts)."""
    m, B, conf, sims, W = _prepared(matrix, n_resamples, seed, confidence)
    means = _weighted_means(W, sims)
    snsr_, snsv_, pafs_ = (_interval(stat_rows(means, s), conf) for s in STATISTICS)
    return AttributeIntervals(
        {v: _interval(means[:, j], conf) for j, v in enumerate(m.values)}, snsr_, snsv_, pafs_,
        B, conf, "percentile", int(np.isnan(means).any(axis=1).sum()),
    )  # fmt: skip


def intervals(
    matrix: SimilarityMatrix,
    n_resamples: int = 2000,
    seed: int | np.random.Generator = 0,
    confidence: float = 0.95,
) -> AttributeIntervals:
    """t-intervals of the value means; spread_intervals for SNSR / SNSV / PAFS (they cover
    a fair attribute and top ties, which a percentile bootstrap of max - min never does)."""
    m, B, conf, sims, W = _prepared(matrix, n_resamples, seed, confidence)
    spread_ci = spread.spread_intervals(sims, conf, B, weights=W)
    means = inference.mean_intervals(sims, conf)
    return AttributeIntervals(
        dict(zip(m.values, means, strict=True)),
        spread_ci.snsr,
        spread_ci.snsv,
        spread_ci.pafs,
        B,
        conf,
    )


def paired_comparison(
    baseline: SimilarityMatrix,
    candidate: SimilarityMatrix,
    statistic: Statistic = "snsr",
    n_resamples: int = 1000,
    seed: int | np.random.Generator = 0,
    confidence: float = 0.95,
) -> Comparison:
    """Paired bootstrap of candidate - baseline for SNSR, SNSV or PAFS: entities paired by
    name (in the baseline's order), both runs resampled with the same draws."""
    base = _check_matrix(baseline, "baseline")
    cand = _check_matrix(candidate, "candidate")
    stat = check_choice(statistic, STATISTICS, "statistic")
    B = check_positive_int(n_resamples, "n_resamples")
    conf = check_confidence(confidence)
    rng = make_rng(seed)
    if set(base.values) != set(cand.values):
        only_b = sorted(set(base.values) - set(cand.values))
        only_c = sorted(set(cand.values) - set(base.values))
        raise DataError(
            f"baseline and candidate score different attribute values (only in baseline: "
            f"{only_b}; only in candidate: {only_c}). Compare runs of the same audit grid, "
            f"or re-record the baseline."
        )
    bi, ci_ = common.shared_rows(base.entities, cand.entities)
    if not bi:
        raise DataError(
            "baseline and candidate share no entity, so they cannot be paired; compare runs "
            "over the same seed entities."
        )
    col = [cand.values.index(v) for v in base.values]
    # Same layout for both, so identical runs give bit-identical resampled statistics.
    sb = np.ascontiguousarray(np.asarray(base.sims)[bi])
    sc = np.ascontiguousarray(np.asarray(cand.sims)[ci_][:, col])
    W = common.resample_weights(rng, B, len(bi))
    db, dc = (stat_rows(_weighted_means(W, x), stat) for x in (sb, sc))
    # the statistic exactly as the attribute table (``summarize``) computes it
    pb, pc = (float(stat_rows(_column_means(x)[0], stat)) for x in (sb, sc))
    less = stat == "pafs"  # H1 "less fair": a PAFS drop, any other rise
    p = float(common.paired_p(db - dc if less else dc - db, 0.0))
    return Comparison(
        stat, pb, pc, pc - pb, _interval(dc - db, conf), p, len(bi), B, conf,
        "less" if less else "greater",
    )  # fmt: skip


def noise_floor(
    repeats: Mapping[str, Sequence[Sequence[str] | None]],
    metric: MetricName = "jaccard",
    k: int | None = 25,
    variant: Variant = "normalized",
    n_resamples: int = 1000,
    seed: int | np.random.Generator = 0,
    confidence: float = 0.95,
) -> NoiseFloor | None:
    """Mean over entities of metric(r_i, r_j) @ k over ordered pairs of repeats (SERP*/PRAG*
    are not symmetric), with a bootstrap CI; None without two repeats."""
    per_entity = noise_per_entity(repeats, metric, k, variant)
    return noise_floor_of(per_entity, n_resamples, seed, confidence)


def noise_per_entity(
    repeats: Mapping[str, Sequence[Sequence[str] | None]],
    metric: MetricName = "jaccard",
    k: int | None = 25,
    variant: Variant = "normalized",
) -> FloatArray:
    """Each entity's mean repeat-vs-repeat similarity (NaN: < 2 repeats); its own replies
    only, so computing entities in parts gives the same numbers bit for bit."""
    m = check_choice(metric, METRICS, "metric")
    v = check_choice(variant, VARIANTS, "variant")
    kk = check_k(k)
    if not isinstance(repeats, Mapping):
        raise TypeError(
            f"repeats must map entity -> list of repeated neutral lists; got "
            f"{type(repeats).__name__}."
        )
    pairs: list[tuple[Sequence[str], Sequence[str]]] = []
    owner: list[int] = []
    for row, (e, runs) in enumerate(repeats.items()):
        if isinstance(runs, str | bytes) or not isinstance(runs, Sequence):
            raise TypeError(f"repeats[{e!r}] must be a list of ranked lists; got {runs!r}.")
        kept = [check_list(r, f"repeats[{e!r}][{i}]") for i, r in enumerate(runs) if r is not None]
        ordered = list(itertools.permutations(kept, 2))  # none with fewer than 2 repeats
        pairs += ordered
        owner += [row] * len(ordered)
    left, right = [a for a, _ in pairs], [b for _, b in pairs]
    out = np.full(len(repeats), np.nan)
    if not owner:
        return out
    K = kk if kk is not None else max([len(x) for x in left] + [1])
    table: dict[str, int] = {}
    N, lN = encode(left, K, table, NEUTRAL_PAD, lambda i: f"repeats pair {i}")
    S, lS = encode(right, K, table, SENSITIVE_PAD, lambda i: f"repeats pair {i}")
    sims = curves_all_k(N, lN, S, lS, K, v, (m,))[m][:, -1]
    own = np.asarray(owner)
    rows = np.unique(own)
    out[rows] = (np.bincount(own, weights=sims) / np.maximum(np.bincount(own), 1))[rows]
    return out


def noise_floor_of(
    per_entity: FloatArray,
    n_resamples: int = 1000,
    seed: int | np.random.Generator = 0,
    confidence: float = 0.95,
) -> NoiseFloor | None:
    """The noise floor of per-entity repeat similarities (NaN: entity without repeats)."""
    B = check_positive_int(n_resamples, "n_resamples")
    conf = check_confidence(confidence)
    rng = make_rng(seed)
    values = np.ascontiguousarray(per_entity[~np.isnan(per_entity)])
    if values.size == 0:
        return None
    W = common.resample_weights(rng, B, values.size)
    boot = common.products(W, values)[0] / values.size
    return NoiseFloor(mean=float(np.mean(values)), ci=_interval(boot, conf), n=int(values.size))
