"""Item exposure and popularity bias (IFairLRS): per item group slot shares (plain and
rank-discounted) against the reference, MGU and DGU, the long-tail share, and per value
the popularity lift over neutral; entities are the resampling unit."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pytest_recfair.errors import DataError
from pytest_recfair.metrics import common

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
#: Items at or above this popularity quantile are the head; the rest is the long tail.
HEAD_QUANTILE = 0.8
#: What the drift test watches: MGU rising, the long-tail share falling, max |lift| rising.
DRIFT_MEASURES = ("mgu", "long_tail_drop", "max_lift")


def gini(x: Sequence[float] | FloatArray) -> float:
    """Gini coefficient of non-negative amounts (0: equal, -> 1: one item takes all)."""
    v = np.sort(np.asarray(x, dtype=np.float64))
    n, total = v.size, float(v.sum())
    if n == 0 or total <= 0:
        return float("nan")
    ranks = np.arange(1, n + 1, dtype=np.float64)
    return float(np.sum((2 * ranks - n - 1) * v) / (n * total))


def popularity_quantiles(pop: Sequence[float] | FloatArray) -> FloatArray:
    """Each item's mid-rank quantile in (0, 1) among the items (ties share a rank)."""
    v = np.asarray(pop, dtype=np.float64)
    _, inverse, counts = np.unique(v, return_inverse=True, return_counts=True)
    mid = np.cumsum(counts) - counts + (counts - 1) / 2  # ties: their mean rank
    return np.asarray((mid[inverse] + 0.5) / max(v.size, 1))


def bin_codes(values: FloatArray, bins: int | Sequence[float]) -> tuple[IntArray, tuple[str, ...]]:
    """Group of each value: ``bins`` quantile groups (an int) or declared edges (ascending
    numbers), with labels; NaN (no value) -> -1."""
    v = np.asarray(values, dtype=np.float64)
    known = v[np.isfinite(v)]
    if known.size == 0:
        raise DataError("no item has a value to bin")
    if isinstance(bins, int):
        edges = np.unique(np.quantile(known, np.linspace(0, 1, bins + 1))[1:-1])
        labels = tuple(f"Q{i + 1}" for i in range(edges.size + 1))
    else:
        edges = np.asarray(sorted(bins), dtype=np.float64)
        cut = [f"{e:g}" for e in edges]
        mid = (f"{a}-{b}" for a, b in itertools.pairwise(cut))
        labels = (f"<{cut[0]}", *mid, f">={cut[-1]}")
    codes = np.where(np.isfinite(v), np.searchsorted(edges, v, side="right"), -1)
    return codes.astype(np.int64), labels


@dataclass(frozen=True)
class ExposureData:
    """Per entity, what every statistic and the drift test need (entities x columns)."""

    entities: tuple[str, ...]
    groups: tuple[str, ...]
    plain: FloatArray  # (E, G) slots given to each item group
    weighted: FloatArray  # (E, G) the same, each slot weighted 1/log2(rank + 1)
    tail: FloatArray  # (E,) slots given to long-tail items (NaN without popularity)
    values: tuple[str, ...]  # demographic values ("attribute: value")
    pop_sum: FloatArray  # (E, 1 + V) popularity quantiles summed; column 0: neutral
    pop_n: FloatArray  # (E, 1 + V) matched items behind them

    def rows(self, keep: Sequence[int]) -> ExposureData:
        idx = list(keep)
        return ExposureData(
            tuple(self.entities[i] for i in idx), self.groups, self.plain[idx],
            self.weighted[idx], self.tail[idx], self.values, self.pop_sum[idx], self.pop_n[idx],
        )  # fmt: skip


def exposure_data(
    lists: Sequence[tuple[str, str | None, Sequence[int | None]]],
    group_of: IntArray,
    groups: Sequence[str],
    quantile: FloatArray | None,
) -> ExposureData:
    """``lists``: (entity, value or None, catalogue index per slot or None); ``group_of``:
    each item's group (-1: none); ``quantile``: its popularity quantile (None: none)."""
    entities = list(dict.fromkeys(e for e, _, _ in lists))
    values = list(dict.fromkeys(v for _, v, _ in lists if v is not None))
    e_at = {e: i for i, e in enumerate(entities)}
    v_at = {v: i + 1 for i, v in enumerate(values)}
    E, G, V = len(entities), len(groups), len(values)
    # every slot of every list at once: its entity, its column (0: neutral), rank and item
    lens = np.array([len(s) for _, _, s in lists], dtype=np.int64)
    n = int(lens.sum())
    item = np.fromiter((-1 if x is None else x for _, _, s in lists for x in s), np.int64, n)
    ent = np.repeat(np.array([e_at[e] for e, _, _ in lists], dtype=np.int64), lens)
    col = np.repeat(np.array([v_at.get(v or "", 0) for _, v, _ in lists], dtype=np.int64), lens)
    rank = np.arange(n) - np.repeat(np.cumsum(lens) - lens, lens)
    ok = item >= 0
    g = np.where(ok, group_of[np.where(ok, item, 0)], -1)
    has = g >= 0
    plain, weighted = np.zeros((E, G)), np.zeros((E, G))
    np.add.at(plain, (ent[has], g[has]), 1.0)
    np.add.at(weighted, (ent[has], g[has]), 1.0 / np.log2(rank[has] + 2.0))
    tail = np.full(E, np.nan)  # NaN: no popularity
    pop_sum, pop_n = np.zeros((E, V + 1)), np.zeros((E, V + 1))
    if quantile is not None:
        q = quantile[item[ok]]
        tail = np.bincount(ent[ok], weights=(q < HEAD_QUANTILE).astype(np.float64), minlength=E)
        np.add.at(pop_sum, (ent[ok], col[ok]), q)
        np.add.at(pop_n, (ent[ok], col[ok]), 1.0)
    return ExposureData(
        tuple(entities), tuple(groups), plain, weighted, tail, tuple(values), pop_sum, pop_n
    )


def _beyond(point: FloatArray, boot: FloatArray, limit: float) -> FloatArray:
    """Centred bootstrap p of |theta| <= limit (one-sided by the observed sign; 0: doubled)."""
    B = boot.shape[0]
    with np.errstate(invalid="ignore"):
        hits = np.sum(np.sign(point) * (boot - point) >= np.abs(point) - limit, axis=0)
    p = (1.0 + hits) / (B + 1.0) * (2.0 if limit == 0 else 1.0)
    return np.where(np.isfinite(point), np.minimum(p, 1.0), np.nan)


def _stats(W: FloatArray, d: ExposureData, reference: FloatArray) -> dict[str, FloatArray]:
    """Every resampled statistic for weight rows ``W`` (B, E)."""
    plain, weighted = W @ d.plain, W @ d.weighted
    with np.errstate(invalid="ignore", divide="ignore"):
        share = plain / plain.sum(axis=-1, keepdims=True)
        weighted = weighted / weighted.sum(axis=-1, keepdims=True)
        mean = d.pop_sum / d.pop_n  # (E, V) lift, NaN where a side showed no matched item
        diff = mean[:, 1:] - mean[:, :1]
        ok = np.isfinite(diff)
        lift = (W @ np.where(ok, diff, 0.0)) / (W @ ok.astype(np.float64))
        tail = (W @ d.tail) / (W @ d.plain.sum(axis=1))
        ratio = share / reference
    gap = share - reference
    return {
        "share": share, "weighted": weighted, "gap": gap, "ratio": ratio,
        "mgu": np.mean(np.abs(gap), axis=1), "dgu": gap.max(axis=1) - gap.min(axis=1),
        "long_tail": tail, "lift": lift,
    }  # fmt: skip


@dataclass(frozen=True)
class ExposureResult:
    """Point values, percentile intervals (``_ci``) and family-wise p of |gap| > max_gap,
    long-tail share < min_tail, |lift| > max_lift."""

    point: dict[str, FloatArray]
    ci: dict[str, FloatArray]
    reference: FloatArray
    p_gap: FloatArray
    p_tail: float
    p_lift: FloatArray
    n_entities: int


def exposure(
    d: ExposureData,
    reference: Sequence[float] | FloatArray,
    *,
    max_gap: float | None = None,
    min_tail: float | None = None,
    max_lift: float | None = None,
    n_resamples: int = 1000,
    seed: int | np.random.Generator = 0,
    confidence: float = 0.95,
) -> ExposureResult:
    """The exposure statistics of one audit (see the module's docstring)."""
    conf = common.check_confidence(confidence)
    B = common.check_positive_int(n_resamples, "n_resamples")
    ref = np.asarray(reference, dtype=np.float64)
    E = len(d.entities)
    point = {k: v[0] for k, v in _stats(np.ones((1, E)), d, ref).items()}
    W = common.resample_weights(common.make_rng(seed), B, E).astype(np.float64)
    boot = _stats(W, d, ref)
    ci = {k: common.percentile_ci(v, conf) for k, v in boot.items()}
    p_gap = np.asarray(common.holm(_beyond(point["gap"], boot["gap"], max_gap or 0.0)))
    p_lift = np.asarray(common.holm(_beyond(point["lift"], boot["lift"], max_lift or 0.0)))
    t, tb = point["long_tail"], boot["long_tail"]
    limit = min_tail if min_tail is not None else 1.0
    p_tail = float((1.0 + np.sum(tb - t <= t - limit)) / (B + 1.0)) if np.isfinite(t) else np.nan
    return ExposureResult(point, ci, ref, p_gap, p_tail, p_lift, E)


@dataclass(frozen=True)
class ExposureDrift:
    """Per :data:`DRIFT_MEASURES`: baseline and candidate values and the Holm-adjusted
    paired bootstrap p of "worse by more than the margin"."""

    baseline: FloatArray
    candidate: FloatArray
    p_value: FloatArray
    n_paired: int


def _drift_stats(W: FloatArray, d: ExposureData, ref: FloatArray) -> FloatArray:
    """The :data:`DRIFT_MEASURES` for weight rows ``W``, each higher when worse."""
    s = _stats(W, d, ref)
    worst = np.fmax.reduce(np.abs(s["lift"]), axis=1)  # NaN: no popularity, not measured
    return np.stack([s["mgu"], -s["long_tail"], worst], axis=1)  # higher: worse


def compare_exposure(
    base: ExposureData,
    cand: ExposureData,
    reference: Sequence[float] | FloatArray,
    *,
    n_resamples: int = 1000,
    seed: int | np.random.Generator = 0,
    margin: float = 0.0,
) -> ExposureDrift | None:
    """Worse than the baseline by more than ``margin``? Paired entity bootstrap, Holm over
    the measures both runs measured; None: < 2 shared entities, or other groups/values."""
    B = common.check_positive_int(n_resamples, "n_resamples")
    at_c, at_b = common.shared_rows(cand.entities, base.entities)
    n = len(at_c)
    if n < 2 or base.groups != cand.groups or base.values != cand.values:
        return None
    b, c = base.rows(at_b), cand.rows(at_c)
    ref = np.asarray(reference, dtype=np.float64)
    pb, pc = (_drift_stats(np.ones((1, n)), x, ref)[0] for x in (b, c))
    W = common.resample_weights(common.make_rng(seed), B, n).astype(np.float64)
    raw = common.paired_p(_drift_stats(W, c, ref) - _drift_stats(W, b, ref), margin)
    # a measure one side did not measure (no popularity) is not tested, nor in the family
    p = np.asarray(common.holm(np.where(np.isfinite(pb) & np.isfinite(pc), raw, np.nan)))
    pb[1], pc[1] = -pb[1], -pc[1]  # the long-tail share itself, for the words
    return ExposureDrift(pb, pc, p, n)
