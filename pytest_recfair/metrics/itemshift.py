"""Item-side fairness: category shares per field and group (LMRec's f(c|D_l)), TVD from
neutral (the gated shift), association B(c, l). Tests permute an entity's lists within it:
exact whatever the group sizes (pooled permutation rejected 47% of null runs at 5%)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pytest_recfair.errors import DataError
from pytest_recfair.metrics import common, inference
from pytest_recfair.metrics.common import FloatArray, IntArray

#: The label of the neutral prompt's group (always group 0).
NEUTRAL = "(neutral)"
Lists = Mapping[str, Sequence[int | None] | None]  # entity -> matched item indices


@dataclass(frozen=True)
class ItemCounts:
    """counts[e, g, c]: entity e's items for group g in category c (the categories of every
    field one after another; ``offsets[i]``: where field i starts)."""

    entities: tuple[str, ...]
    groups: tuple[str, ...]
    fields: tuple[str, ...]
    categories: tuple[tuple[str, ...], ...]
    counts: IntArray
    # per list (prompt) lists[e, v, c], v = 0 neutral, and each list's group: what the test
    # permutes; None (a stored baseline): each group is one list
    lists: IntArray | None = None
    list_group: IntArray | None = None

    @property
    def offsets(self) -> IntArray:
        return np.cumsum([0, *map(len, self.categories)], dtype=np.int64)

    def field_slice(self, name: str) -> slice:
        i, off = self.fields.index(name), self.offsets
        return slice(int(off[i]), int(off[i + 1]))


@dataclass(frozen=True)
class FieldCodes:
    """A field's categories (table order) and each item's category index (-1: none)."""

    name: str
    categories: tuple[str, ...]
    codes: IntArray


def item_counts(
    neutral: Lists,
    by_value: Mapping[str, Lists],
    fields: Sequence[FieldCodes],
    *,
    group_of: Mapping[str, str] | None = None,
) -> ItemCounts:
    """Categories per (entity, group) of matched items; groups: the values, or
    ``group_of[value]`` (the group a first name signals) pooling their values' items."""
    if not fields:
        raise DataError("item_counts: give at least one catalogue field (item_field)")
    cats = tuple(f.categories for f in fields)
    label = {v: (group_of or {}).get(v, v) for v in by_value}
    groups = (NEUTRAL, *dict.fromkeys(label.values()))
    g_pos = {g: i for i, g in enumerate(groups)}
    entities = list(dict.fromkeys([*neutral, *(e for lists in by_value.values() for e in lists)]))
    e_pos = {e: i for i, e in enumerate(entities)}
    sources = [(0, neutral), *((g_pos[label[v]], lists) for v, lists in by_value.items())]
    rows = [
        (e_pos[ent], g, src, i)
        for src, (g, lists) in enumerate(sources)
        for ent, idx in lists.items()
        for i in idx or ()
        if i is not None
    ]
    e_arr, g_arr, l_arr, i_arr = np.asarray(rows, dtype=np.int64).reshape(-1, 4).T
    shape = (len(entities), len(groups), sum(len(c) for c in cats))
    counts = _category_counts(e_arr, g_arr, i_arr, fields, shape)
    per_list, list_group = counts, np.arange(len(groups), dtype=np.int64)
    if group_of:
        per_list = _category_counts(e_arr, l_arr, i_arr, fields, (shape[0], len(sources), shape[2]))
        list_group = np.asarray([g for g, _ in sources], dtype=np.int64)
    names = tuple(f.name for f in fields)
    return ItemCounts(tuple(entities), groups, names, cats, counts, per_list, list_group)


def _category_counts(
    e_arr: IntArray,
    col: IntArray,
    i_arr: IntArray,
    fields: Sequence[FieldCodes],
    shape: tuple[int, int, int],
) -> IntArray:
    """counts[e, col, c]: entity e's matched items in column ``col`` (group or list) by category."""
    out = np.zeros(int(np.prod(shape)), dtype=np.int64)
    offset = 0
    for f in fields:
        code = f.codes[i_arr] if i_arr.size else i_arr
        keep = code >= 0
        flat = (e_arr[keep] * shape[1] + col[keep]) * shape[2] + offset + code[keep]
        out += np.bincount(flat, minlength=out.size)
        offset += len(f.categories)
    return out.reshape(shape)


def shares(tot: FloatArray, offsets: IntArray) -> FloatArray:
    """(..., C) category counts -> shares within each field (NaN where a field has none)."""
    per = np.repeat(np.add.reduceat(tot, offsets[:-1], axis=-1), np.diff(offsets), axis=-1)
    out = np.full(tot.shape, np.nan)
    np.divide(tot, per, out=out, where=per > 0)
    return out


def tvd(share: FloatArray, offsets: IntArray) -> FloatArray:
    """(..., G, C) shares -> (..., G-1, F): each value's TVD from neutral per field."""
    diff = np.abs(share[..., 1:, :] - share[..., :1, :])
    return 0.5 * np.add.reduceat(diff, offsets[:-1], axis=-1)


def tvd_between(tot: FloatArray, offsets: IntArray) -> FloatArray:
    """(..., G, C) counts -> (..., G-1, F): each value's TVD from its OTHER values pooled
    (LMRec's f(c|D_l) vs f(c|D_l')); NaN with a single value."""
    values = tot[..., 1:, :]
    others = values.sum(axis=-2, keepdims=True) - values
    diff = np.abs(shares(values, offsets) - shares(others, offsets))
    return 0.5 * np.add.reduceat(diff, offsets[:-1], axis=-1)


def association(tot: FloatArray, offsets: IntArray) -> FloatArray:
    """(..., G, C) counts -> (..., G-1, C): LMRec B(c, l) for each value l (neutral aside)."""
    values = tot[..., 1:, :]
    pooled = values.sum(axis=-2, keepdims=True)
    f_l, f_other, f_all = (shares(x, offsets) for x in (values, pooled - values, pooled))
    out = np.full(f_l.shape, np.nan)
    np.divide(f_l - f_other, f_all, out=out, where=np.isfinite(f_all) & (f_all > 0))
    return out


def _family(observed: FloatArray, null: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Raw and family-wise p-values; 1 where the statistic is undefined (NaN)."""
    raw, adj = common.maxt(observed, null)
    undefined = ~np.isfinite(observed)
    return np.where(undefined, 1.0, raw), np.where(undefined, 1.0, adj)


def group_tests(
    counts: ItemCounts, n_permutations: int = 1000, seed: int | np.random.Generator = 0
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Both families of one permutation run: shift from neutral (observed, raw and
    family-wise p) and each value against the others (observed, family-wise p)."""
    B = common.check_positive_int(n_permutations, "n_permutations")
    rng = common.make_rng(seed)
    off = counts.offsets
    tot = counts.counts.sum(axis=0, dtype=np.float64)
    observed, between = tvd(shares(tot, off), off), tvd_between(tot, off)
    lists, group = counts.counts, np.arange(len(counts.groups))
    if counts.lists is not None and counts.list_group is not None:  # None: a stored baseline
        lists, group = counts.lists, counts.list_group
    pool = (group[None, :] == np.arange(len(counts.groups))[:, None]).astype(np.float64)
    # float32 rows and one flat ``take``: 4x faster than fancy indexing of an int cube, and
    # exact (counts are small integers).
    null, null_between = [], []
    for rows in inference.permuted_totals(lists.astype(np.float32), B, rng):
        t = np.einsum("gl,blc->bgc", pool, rows)
        null.append(tvd(shares(t, off), off))
        null_between.append(tvd_between(t, off))
    raw, adj = _family(observed, np.concatenate(null))
    _, adj_between = _family(between, np.concatenate(null_between))
    return observed, raw, adj, between, adj_between


@dataclass(frozen=True)
class ShiftResult:
    """Item-side statistics of one attribute along ``counts``' axes (G groups, C categories,
    F fields), family-wise p and percentile bootstrap intervals."""

    counts: ItemCounts
    shares: FloatArray
    n_items: FloatArray
    shift: FloatArray
    max_shift: FloatArray
    association: FloatArray
    p_adjusted: FloatArray
    between: FloatArray
    p_between: FloatArray
    shift_ci: npt.NDArray[np.float64]
    max_shift_ci: npt.NDArray[np.float64]
    share_ci: npt.NDArray[np.float64]


def _boot(W: FloatArray, counts: IntArray) -> FloatArray:
    """(B, G, C) category totals of the resampled entities (weight rows ``W``)."""
    return (W @ counts.reshape(counts.shape[0], -1).astype(np.float64)).reshape(
        -1, *counts.shape[1:]
    )


def _top(t: FloatArray) -> FloatArray:
    """The largest shift over values (axis -2), NaN where none is defined."""
    return np.asarray(np.fmax.reduce(t, axis=-2))


def shift(
    counts: ItemCounts,
    *,
    n_permutations: int = 1000,
    n_resamples: int = 1000,
    seed: int | np.random.Generator = 0,
    confidence: float = 0.95,
) -> ShiftResult:
    """Every item-side statistic of one attribute, with its test and intervals."""
    conf = common.check_confidence(confidence)
    B = common.check_positive_int(n_resamples, "n_resamples")
    rng = common.make_rng(seed)
    off = counts.offsets
    tot = counts.counts.sum(axis=0, dtype=np.float64)
    observed, _, adj, between, p_between = group_tests(counts, n_permutations, rng)
    boot = _boot(
        common.resample_weights(rng, B, len(counts.entities)).astype(np.float64), counts.counts
    )
    b_shares = shares(boot, off)
    b_shift = tvd(b_shares, off)
    return ShiftResult(
        counts, shares(tot, off), np.add.reduceat(tot, off[:-1], axis=-1), observed,
        _top(observed), association(tot, off), adj, between, p_between,
        common.percentile_ci(b_shift, conf), common.percentile_ci(_top(b_shift), conf),
        common.percentile_ci(b_shares, conf),
    )  # fmt: skip


@dataclass(frozen=True)
class ShiftComparison:
    """Per field: the largest shift of both runs, the change, its interval, its one-sided p."""

    fields: tuple[str, ...]
    baseline: FloatArray
    candidate: FloatArray
    delta: FloatArray
    ci: npt.NDArray[np.float64]
    p_value: FloatArray
    n_paired: int


def compare_shift(
    baseline: ItemCounts,
    candidate: ItemCounts,
    *,
    n_resamples: int = 1000,
    seed: int | np.random.Generator = 0,
    confidence: float = 0.95,
    margin: float = 0.0,
) -> ShiftComparison:
    """Did the largest item-side shift grow by more than ``margin``? Paired entity
    bootstrap (same draws for both); p = (1 + #{delta* <= margin}) / (B + 1)."""
    conf = common.check_confidence(confidence)
    B = common.check_positive_int(n_resamples, "n_resamples")
    rng = common.make_rng(seed)
    if baseline.groups != candidate.groups or baseline.fields != candidate.fields:
        raise DataError(
            "compare_shift: the runs differ in values or fields "
            f"({baseline.groups[1:]}/{baseline.fields} vs {candidate.groups[1:]}/"
            f"{candidate.fields}); accept a new baseline for the changed audit"
        )
    if baseline.categories != candidate.categories:
        raise DataError(
            "compare_shift: the catalogue's categories changed since the baseline; "
            "accept a new baseline for the new catalogue"
        )
    at_b, at_c = common.shared_rows(baseline.entities, candidate.entities)
    if not at_b:
        raise DataError("compare_shift: the runs share no entity; accept a new baseline")
    b, c = baseline.counts[at_b], candidate.counts[at_c]
    off = baseline.offsets
    base_pt, cand_pt = (
        _top(tvd(shares(x.sum(axis=0, dtype=np.float64), off), off)) for x in (b, c)
    )
    W = common.resample_weights(rng, B, b.shape[0]).astype(np.float64)
    db, dc = (_top(tvd(shares(_boot(W, x), off), off)) for x in (b, c))
    p, ci = common.paired_p(dc - db, margin), common.percentile_ci(dc - db, conf)
    return ShiftComparison(baseline.fields, base_pt, cand_pt, cand_pt - base_pt, ci, p, len(at_b))
