"""Candidate-position bias: does where a candidate stands move the recommender's pick?
Inputs: (E, G, P) int arrays over entity, group (0 neutral) and order, ``positions`` (of the
pick in the order shown) and ``chosen`` (its index in the entity's list); -1 no valid pick
(missed), -2 no reply (a failed request: left out, never counted missed). The uniformity
test re-draws every order keeping the picks (a conditional randomization test of the pooled
chi-square, valid when groups share orders and picks); group differences permute group
labels within each entity, studentized max-T."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pytest_recfair.errors import DataError
from pytest_recfair.metrics import common
from pytest_recfair.metrics.common import FloatArray, IntArray
from pytest_recfair.metrics.inference import PERMUTATION_CELLS, permuted_totals

#: Per-group measures compared between groups, in the order of ``PositionResult`` arrays.
MEASURES = ("bias", "missed", "consistency")
#: Pooled measures compared with a baseline (columns of ``PositionComparison`` arrays).
DRIFT_MEASURES = ("bias", "missed")


def random_orders(k: int, p: int, rng: np.random.Generator) -> IntArray:
    """(p, k): p orders of k candidates (row i: candidate indices as shown), the catalogue
    order first and then uniform random permutations."""
    k = common.check_positive_int(k, "k")
    p = common.check_positive_int(p, "orders")
    return np.stack([np.arange(k), *(rng.permutation(k) for _ in range(p - 1))]).astype(np.int64)


def group_tables(positions: IntArray, chosen: IntArray, k: int) -> tuple[FloatArray, FloatArray]:
    """Per-entity sufficient statistics: hist (E, G, k+1) counts per position (last column
    missed) and agree (E, G, 2) agreeing pairs of orders and all pairs."""
    E, G, P = positions.shape
    slot = np.where(positions == -1, k, np.where(positions == -2, k + 1, positions))
    flat = (np.arange(E * G, dtype=np.int64).repeat(P)) * (k + 2) + slot.reshape(-1)
    hist = np.bincount(flat, minlength=E * G * (k + 2)).reshape(E, G, k + 2)[..., : k + 1]
    same = (chosen[..., :, None] == chosen[..., None, :]) & (chosen[..., :, None] >= 0)
    agree = (same.sum(axis=(-1, -2)) - (chosen >= 0).sum(axis=-1)) / 2.0
    asked = (chosen != -2).sum(axis=-1)
    pairs = asked * (asked - 1) / 2.0  # pairs of orders that got a reply
    return hist.astype(np.float64), np.stack([agree, pairs], axis=-1)


def _measures(hist: FloatArray, agree: FloatArray | None = None) -> FloatArray:
    """(..., G, k+1) position counts (last column missed) and (..., G, 2) agreeing pairs
    summed over entities -> (..., G, 3): bias, missed, consistency (without ``agree``: 2)."""
    k = hist.shape[-1] - 1
    valid = hist[..., :k].sum(axis=-1, keepdims=True)
    total = hist.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        curve = hist[..., :k] / valid
        out = [0.5 * np.abs(curve - 1.0 / k).sum(axis=-1), hist[..., k] / total]
        if agree is not None:
            out.append(agree[..., 0] / agree[..., 1])
    return np.stack(out, axis=-1)


def _uniform_test(
    chosen: IntArray, orders: IntArray | None, k: int, B: int, rng: np.random.Generator
) -> tuple[float, float]:
    """Pooled chi-square against uniform and its conditional randomization p-value."""
    E, _, P = chosen.shape
    expected = (chosen >= 0).sum() / k

    def chi2(pos: IntArray) -> FloatArray:  # pos (..., E, G, P)
        flat = pos.reshape(-1, math.prod(pos.shape[-3:]))
        counts = np.stack([np.bincount(r[r >= 0], minlength=k) for r in flat])
        return np.asarray(((counts - expected) ** 2 / expected).sum(axis=-1), dtype=np.float64)

    if orders is None or expected == 0:
        return float("nan"), float("nan")
    stat = float(chi2(_positions_of(chosen, orders.argsort(axis=-1)))[0])
    block = max(1, PERMUTATION_CELLS // max(1, E * P * k))
    null = []
    for start in range(0, B, block):
        b = min(block, B - start)
        where = rng.random((b, E, P, k)).argsort(axis=-1).argsort(axis=-1)  # cand -> pos
        null.append(chi2(_positions_of(chosen, where)))
    p = (1.0 + np.sum(np.concatenate(null) >= stat - 1e-9)) / (B + 1.0)
    return stat, float(p)


def _positions_of(chosen: IntArray, where: IntArray) -> IntArray:
    """Position of each chosen candidate (-1/-2 kept); ``where``: candidate -> position."""
    idx = np.clip(chosen, 0, None).transpose(0, 2, 1)  # (E, P, G)
    pos = np.take_along_axis(where, np.broadcast_to(idx, (*where.shape[:-1], idx.shape[-1])), -1)
    return np.where(chosen >= 0, np.swapaxes(pos, -1, -2), chosen)


@dataclass(frozen=True)
class PositionResult:
    """Candidate-position statistics; ``measures``/``p_adjusted`` are (G, 3) / (G-1, 3)
    over ``MEASURES``; ``curve`` is (G, k); ``measures_ci`` is (G, 3, 2)."""

    groups: tuple[str, ...]
    k: int
    curve: FloatArray
    measures: FloatArray
    measures_ci: FloatArray
    pooled_bias: float
    pooled_bias_ci: tuple[float, float]
    chi2: float
    p_uniform: float
    p_adjusted: FloatArray
    n_picks: IntArray
    n_entities: int


def position_bias(
    positions: IntArray | None,
    chosen: IntArray,
    k: int,
    *,
    orders: IntArray | None = None,
    groups: tuple[str, ...] | None = None,
    n_permutations: int = 1000,
    n_resamples: int = 1000,
    seed: int | np.random.Generator = 0,
    confidence: float = 0.95,
) -> PositionResult:
    """Every candidate-position statistic. ``orders`` (E, P, k) is what was shown; with it
    ``positions`` may be None (derived) and the uniformity test runs."""
    k = common.check_positive_int(k, "k")
    conf = common.check_confidence(confidence)
    B = common.check_positive_int(n_permutations, "n_permutations")
    R = common.check_positive_int(n_resamples, "n_resamples")
    rng = common.make_rng(seed)
    if positions is None:
        if orders is None:
            raise DataError("position_bias: give positions, or orders to derive them from")
        positions = _positions_of(np.asarray(chosen, np.int64), np.asarray(orders).argsort(-1))
    pos, cho = np.asarray(positions, dtype=np.int64), np.asarray(chosen, dtype=np.int64)
    if pos.ndim != 3 or pos.shape != cho.shape:
        raise DataError(
            f"position_bias: positions and chosen must both be (entities, groups, orders) "
            f"arrays; got {pos.shape} and {cho.shape}"
        )
    if pos.size and (pos.min() < -2 or pos.max() >= k or cho.min() < -2 or cho.max() >= k):
        raise DataError(f"position_bias: positions/chosen must be in -2..{k - 1} (k={k})")
    if np.any(np.minimum(pos, 0) != np.minimum(cho, 0)) or np.any((pos == -2) != (cho == -2)):
        raise DataError("position_bias: a pick is missed in positions but not in chosen")
    E, G, _ = pos.shape
    names = groups or tuple(f"group {g}" for g in range(G))
    hist, agree = group_tables(pos, cho, k)
    h_tot, a_tot = hist.sum(axis=0), agree.sum(axis=0)
    observed = _measures(h_tot, a_tot)
    adj = diff = np.abs(observed[1:] - observed[:1])
    if G > 1:  # the null: group labels shuffled within each entity
        K, null = hist.shape[-1], []
        for tot in permuted_totals(np.concatenate([hist, agree], axis=-1), B, rng):
            m = _measures(tot[..., :K], tot[..., K:])
            null.append(np.abs(m[:, 1:] - m[:, :1]))
        _, adj = common.maxt(diff, np.concatenate(null))
    chi2, p_uniform = _uniform_test(cho, None if orders is None else np.asarray(orders), k, B, rng)
    W = common.resample_weights(rng, R, E).astype(np.float64)
    bh = (W @ hist.reshape(E, -1)).reshape(R, G, -1)
    ba = (W @ agree.reshape(E, -1)).reshape(R, G, 2)
    pooled = _measures(h_tot.sum(axis=0, keepdims=True), a_tot.sum(axis=0, keepdims=True))
    b_pooled = _measures(bh.sum(axis=1, keepdims=True), ba.sum(axis=1, keepdims=True))
    with np.errstate(invalid="ignore", divide="ignore"):
        curve = h_tot[:, :k] / h_tot[:, :k].sum(axis=-1, keepdims=True)
    lo, hi = common.percentile_ci(b_pooled[:, 0, 0], conf)
    ci = common.percentile_ci(_measures(bh, ba), conf)
    return PositionResult(
        names, k, curve, observed, ci, float(pooled[0, 0]), (float(lo), float(hi)), chi2,
        p_uniform, adj, h_tot.sum(axis=-1).astype(np.int64), E,
    )  # fmt: skip


@dataclass(frozen=True)
class PositionComparison:
    """Pooled bias and missed rate, baseline vs candidate, over the shared entities;
    arrays are over ``DRIFT_MEASURES``."""

    baseline: FloatArray
    candidate: FloatArray
    delta: FloatArray
    p_value: FloatArray
    n_paired: int


def compare_positions(
    baseline: FloatArray,
    candidate: FloatArray,
    *,
    n_resamples: int = 1000,
    seed: int | np.random.Generator = 0,
    margin: float = 0.0,
) -> PositionComparison:
    """Did the pooled bias or missed rate grow by more than ``margin``? (E, k+1) counts of
    the SAME entities; paired entity bootstrap, NaN counting against H1."""
    b = np.asarray(baseline, dtype=np.float64)
    c = np.asarray(candidate, dtype=np.float64)
    if b.ndim != 2 or b.shape != c.shape or b.shape[0] == 0:
        raise DataError(
            f"compare_positions: baseline and candidate must be the same non-empty "
            f"(entities, k+1) count arrays; got {b.shape} and {c.shape}"
        )
    B = common.check_positive_int(n_resamples, "n_resamples")
    W = common.resample_weights(common.make_rng(seed), B, b.shape[0]).astype(np.float64)
    base_pt, cand_pt = _measures(b.sum(axis=0)), _measures(c.sum(axis=0))
    p = common.paired_p(_measures(W @ c) - _measures(W @ b), margin)
    return PositionComparison(base_pt, cand_pt, cand_pt - base_pt, p, int(b.shape[0]))
