"""Item-side fairness: how a group's prompt shifts the properties of the recommended items.

For each categorical field of a catalogue (price level, genre, cuisine ...) and each group
(the neutral prompt and every attribute value): the share of each category among the
group's recommended items that the catalogue knows (LMRec's f(c|D_l)); the total variation
distance of each group's distribution from the neutral one (the gated "shift"); and the
LMRec category association score B(c, l) = (f(c|D_l) - f(c|D_l')) / f(c|D), with D_l' the
items of the attribute's other values and D those of all its values.

Uncertainty treats ENTITIES as the unit, like the list-overlap statistics: an entity's
lists for all groups stay together. The tests permute an entity's LISTS (one per prompt:
the neutral one and each value's) within the entity, then pool them into their groups as
observed: under "no group effect" the lists are exchangeable, so the test is exact
whatever the group sizes (one neutral list against ~22 pooled first names per group, the
implicit grid). Permuting the pooled groups instead swaps a 10-item row with a 220-item
one and rejected 47% of null runs at 5% (docs/itemside.md). Two families, each with the
studentized max-T over values x fields: the shift of each value from neutral, and each
value against the attribute's other values (LMRec's comparison). Intervals are
percentile bootstraps over entities. Pure numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pytest_recfair.errors import DataError
from pytest_recfair.metrics.common import (
    check_confidence,
    check_positive_int,
    make_rng,
    maxt,
    percentile_ci,
    resample_weights,
)

__all__ = [
    "NEUTRAL",
    "FieldCodes",
    "ItemCounts",
    "ShiftComparison",
    "ShiftResult",
    "association",
    "compare_shift",
    "group_tests",
    "item_counts",
    "shares",
    "shift",
    "shift_test",
    "tvd",
    "tvd_between",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Interval = tuple[float, float]
#: The label of the neutral prompt's group (always group 0).
NEUTRAL = "(neutral)"
Lists = Mapping[str, Sequence[int | None] | None]  # entity -> matched item indices
# Gathered permutation blocks are kept below this many cells (memory ~ 8 bytes each).
_BLOCK_CELLS = 1 << 22


@dataclass(frozen=True)
class ItemCounts:
    """counts[e, g, c]: how many of entity e's items for group g fall in category c.

    The last axis concatenates the categories of every field; ``offsets[i]`` is where
    field i starts (``offsets[-1]`` = number of categories in all).
    """

    entities: tuple[str, ...]
    groups: tuple[str, ...]
    fields: tuple[str, ...]
    categories: tuple[tuple[str, ...], ...]
    counts: IntArray
    # The same counts per list (value): lists[e, v, c], v = 0 the neutral prompt, and the
    # group of each list (list_group[v]). The test permutes LISTS within an entity: under
    # "no group effect" an entity's lists are exchangeable whatever their group sizes.
    # None (a stored baseline): each group is one list.
    lists: IntArray | None = None
    list_group: IntArray | None = None

    @property
    def offsets(self) -> IntArray:
        sizes = [len(c) for c in self.categories]
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def field_slice(self, name: str) -> slice:
        i = self.fields.index(name)
        off = self.offsets
        return slice(int(off[i]), int(off[i + 1]))


@dataclass(frozen=True)
class FieldCodes:
    """One categorical field of the items: its categories (in table order) and each
    item's category index (item index -> category index, -1 when the item lacks it)."""

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
    """Count categories per (entity, group) from matched item indices (None: unmatched).

    Groups are the values, or with ``group_of`` (value -> group, e.g. first names -> the
    group they signal) the groups, whose items pool over their values. Entities are
    neutral's keys then any others in first-seen order; a missing list counts nothing.
    """
    if not fields:
        raise DataError("item_counts: give at least one catalogue field (item_field)")
    cats = tuple(f.categories for f in fields)
    label = {v: (group_of or {}).get(v, v) for v in by_value}
    groups = (NEUTRAL, *dict.fromkeys(label.values()))
    g_pos = {g: i for i, g in enumerate(groups)}
    entities = list(dict.fromkeys([*neutral, *(e for lists in by_value.values() for e in lists)]))
    e_pos = {e: i for i, e in enumerate(entities)}
    rows_e, rows_g, rows_l, rows_i = [], [], [], []
    sources = [(0, neutral), *((g_pos[label[v]], lists) for v, lists in by_value.items())]
    for src, (g, lists) in enumerate(sources):
        for ent, idx in lists.items():
            hits = [i for i in (idx or ()) if i is not None]
            rows_e += [e_pos[ent]] * len(hits)
            rows_g += [g] * len(hits)
            rows_l += [src] * len(hits)
            rows_i += hits
    e_arr, g_arr, l_arr, i_arr = (
        np.asarray(a, dtype=np.int64) for a in (rows_e, rows_g, rows_l, rows_i)
    )
    n_cat = sum(len(c) for c in cats)
    shape = (len(entities), len(groups), n_cat)
    counts = np.zeros(int(np.prod(shape)), dtype=np.int64)
    offset = 0
    for f in fields:
        code = f.codes[i_arr] if i_arr.size else i_arr
        keep = code >= 0
        flat = (e_arr[keep] * shape[1] + g_arr[keep]) * n_cat + offset + code[keep]
        counts += np.bincount(flat, minlength=counts.size)
        offset += len(f.categories)
    names = tuple(f.name for f in fields)
    per_list = counts.reshape(shape)
    list_group = np.arange(len(groups), dtype=np.int64)
    if group_of:
        per_list = _list_counts(e_arr, l_arr, i_arr, fields, (len(entities), len(sources), n_cat))
        list_group = np.asarray([g for g, _ in sources], dtype=np.int64)
    return ItemCounts(
        tuple(entities), groups, names, cats, counts.reshape(shape), per_list, list_group
    )


def _list_counts(
    e_arr: IntArray,
    l_arr: IntArray,
    i_arr: IntArray,
    fields: Sequence[FieldCodes],
    shape: tuple[int, int, int],
) -> IntArray:
    """counts[e, list, c] before the lists pool into groups."""
    out = np.zeros(int(np.prod(shape)), dtype=np.int64)
    offset = 0
    for f in fields:
        code = f.codes[i_arr] if i_arr.size else i_arr
        keep = code >= 0
        flat = (e_arr[keep] * shape[1] + l_arr[keep]) * shape[2] + offset + code[keep]
        out += np.bincount(flat, minlength=out.size)
        offset += len(f.categories)
    return out.reshape(shape)


# --------------------------------------------------------------------------- point statistics


def _field_totals(tot: FloatArray, offsets: IntArray) -> FloatArray:
    """(..., C) -> (..., F): items per field."""
    return np.add.reduceat(tot, offsets[:-1], axis=-1)


def shares(tot: FloatArray, offsets: IntArray) -> FloatArray:
    """(..., C) category counts -> shares within each field (NaN where a field has none)."""
    per = np.repeat(_field_totals(tot, offsets), np.diff(offsets), axis=-1)
    out = np.full(tot.shape, np.nan)
    np.divide(tot, per, out=out, where=per > 0)
    return out


def tvd(share: FloatArray, offsets: IntArray) -> FloatArray:
    """(..., G, C) shares -> (..., G-1, F): total variation distance of each value from
    group 0 (neutral) in each field, 0.5 * sum |p_g - p_0|."""
    diff = np.abs(share[..., 1:, :] - share[..., :1, :])
    return 0.5 * np.add.reduceat(diff, offsets[:-1], axis=-1)


def tvd_between(tot: FloatArray, offsets: IntArray) -> FloatArray:
    """(..., G, C) counts -> (..., G-1, F): total variation distance of each value's shares
    from the pooled shares of the attribute's OTHER values (LMRec's f(c|D_l) vs
    f(c|D_l')), neutral aside; NaN with a single value."""
    values = tot[..., 1:, :]
    others = values.sum(axis=-2, keepdims=True) - values
    diff = np.abs(shares(values, offsets) - shares(others, offsets))
    return 0.5 * np.add.reduceat(diff, offsets[:-1], axis=-1)


def association(tot: FloatArray, offsets: IntArray) -> FloatArray:
    """(..., G, C) counts -> (..., G-1, C): LMRec B(c, l) for each value l (neutral aside)."""
    values = tot[..., 1:, :]
    pooled = values.sum(axis=-2, keepdims=True)
    f_l = shares(values, offsets)
    f_other = shares(pooled - values, offsets)
    f_all = shares(pooled, offsets)
    out = np.full(f_l.shape, np.nan)
    np.divide(f_l - f_other, f_all, out=out, where=np.isfinite(f_all) & (f_all > 0))
    return out


# --------------------------------------------------------------------------- the test


def _lists_of(counts: ItemCounts) -> tuple[IntArray, FloatArray]:
    """Per-list counts (E, L, C) and the (G, L) matrix pooling lists into groups."""
    if counts.lists is None or counts.list_group is None:
        lists, group = counts.counts, np.arange(len(counts.groups))
    else:
        lists, group = counts.lists, counts.list_group
    pool = (group[None, :] == np.arange(len(counts.groups))[:, None]).astype(np.float64)
    return lists, pool


def _null_stats(
    counts: ItemCounts, B: int, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray]:
    """(B, G-1, F) TVDs from neutral and from the other values, with the entity's LISTS
    shuffled within each entity (then pooled into their groups as observed): exact under
    "no group effect" whatever the number of lists (items) per group."""
    lists, pool = _lists_of(counts)
    off = counts.offsets
    E, L, C = lists.shape
    # float32 rows and one flat ``take``: 4x faster than fancy indexing of an int cube, and
    # exact (counts are small integers).
    flat = lists.reshape(E * L, C).astype(np.float32)
    base = (np.arange(E, dtype=np.int64) * L)[None, :, None]
    block = max(1, _BLOCK_CELLS // max(1, E * L * C))
    neutral, between = [], []
    for start in range(0, B, block):
        b = min(block, B - start)
        perm = rng.random((b, E, L)).argsort(axis=2) + base
        rows = np.take(flat, perm.reshape(-1), axis=0).reshape(b, E, L, C)
        tot = np.einsum("gl,blc->bgc", pool, rows.sum(axis=1, dtype=np.float64))
        neutral.append(tvd(shares(tot, off), off))
        between.append(tvd_between(tot, off))
    return np.concatenate(neutral, axis=0), np.concatenate(between, axis=0)


def _family(observed: FloatArray, null: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Raw and family-wise p-values; 1 where the statistic is undefined (NaN)."""
    raw, adj = maxt(observed, null)
    undefined = ~np.isfinite(observed)
    return np.where(undefined, 1.0, raw), np.where(undefined, 1.0, adj)


def shift_test(
    counts: ItemCounts, n_permutations: int = 1000, seed: int | np.random.Generator = 0
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Observed TVDs from neutral (G-1, F), raw and family-wise permutation p-values."""
    observed, raw, adj, *_ = group_tests(counts, n_permutations, seed)
    return observed, raw, adj


def group_tests(
    counts: ItemCounts, n_permutations: int = 1000, seed: int | np.random.Generator = 0
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Both families of one permutation run: shift from neutral (observed, raw p,
    family-wise p) and each value against the others (observed, family-wise p)."""
    B = check_positive_int(n_permutations, "n_permutations")
    rng = make_rng(seed)
    off = counts.offsets
    tot = counts.counts.sum(axis=0, dtype=np.float64)
    observed, between = tvd(shares(tot, off), off), tvd_between(tot, off)
    null_neutral, null_between = _null_stats(counts, B, rng)
    raw, adj = _family(observed, null_neutral)
    _, adj_between = _family(between, null_between)
    return observed, raw, adj, between, adj_between


# --------------------------------------------------------------------------- the result


@dataclass(frozen=True)
class ShiftResult:
    """Item-side statistics of one attribute; arrays follow ``counts`` axes.

    ``shares`` (G, C), ``n_items`` (G, F) matched items, ``shift`` (G-1, F) TVD from
    neutral, ``max_shift`` (F,) the largest over values, ``association`` (G-1, C),
    ``p_value``/``p_adjusted`` (G-1, F) permutation p-values (adjusted: family-wise over
    every value and field), ``between`` (G-1, F) each value's TVD from the attribute's
    other values with ``p_between`` (family-wise over values and fields), and percentile
    bootstrap intervals over entities.
    """

    counts: ItemCounts
    shares: FloatArray
    n_items: FloatArray
    shift: FloatArray
    max_shift: FloatArray
    association: FloatArray
    p_value: FloatArray
    p_adjusted: FloatArray
    between: FloatArray
    p_between: FloatArray
    shift_ci: npt.NDArray[np.float64]
    max_shift_ci: npt.NDArray[np.float64]
    share_ci: npt.NDArray[np.float64]
    association_ci: npt.NDArray[np.float64]
    n_permutations: int
    n_resamples: int
    confidence: float


def _bootstrap_totals(counts: IntArray, B: int, rng: np.random.Generator) -> FloatArray:
    E, G, C = counts.shape
    W = resample_weights(rng, B, E).astype(np.float64)
    return (W @ counts.reshape(E, G * C).astype(np.float64)).reshape(B, G, C)


def shift(
    counts: ItemCounts,
    *,
    n_permutations: int = 1000,
    n_resamples: int = 1000,
    seed: int | np.random.Generator = 0,
    confidence: float = 0.95,
) -> ShiftResult:
    """Every item-side statistic of one attribute, with its test and intervals."""
    conf = check_confidence(confidence)
    B = check_positive_int(n_resamples, "n_resamples")
    rng = make_rng(seed)
    off = counts.offsets
    tot = counts.counts.sum(axis=0, dtype=np.float64)
    observed, raw, adj, between, p_between = group_tests(counts, n_permutations, rng)
    boot = _bootstrap_totals(counts.counts, B, rng)
    b_shares = shares(boot, off)
    b_shift = tvd(b_shares, off)
    with np.errstate(all="ignore"):
        b_max = np.nanmax(np.where(np.isnan(b_shift), -np.inf, b_shift), axis=1)
    b_max = np.where(np.isinf(b_max), np.nan, b_max)
    with np.errstate(all="ignore"):
        max_shift = np.nanmax(np.where(np.isnan(observed), -np.inf, observed), axis=0)
    return ShiftResult(
        counts=counts,
        shares=shares(tot, off),
        n_items=_field_totals(tot, off),
        shift=observed,
        max_shift=np.where(np.isinf(max_shift), np.nan, max_shift),
        association=association(tot, off),
        p_value=raw,
        p_adjusted=adj,
        between=between,
        p_between=p_between,
        shift_ci=percentile_ci(b_shift, conf),
        max_shift_ci=percentile_ci(b_max, conf),
        share_ci=percentile_ci(b_shares, conf),
        association_ci=percentile_ci(association(boot, off), conf),
        n_permutations=check_positive_int(n_permutations, "n_permutations"),
        n_resamples=B,
        confidence=conf,
    )


# --------------------------------------------------------------------------- against a baseline


@dataclass(frozen=True)
class ShiftComparison:
    """Per field: the largest shift in the baseline and candidate runs (paired entities),
    the change, its bootstrap interval and the one-sided p-value for "candidate shifts more"."""

    fields: tuple[str, ...]
    baseline: FloatArray
    candidate: FloatArray
    delta: FloatArray
    ci: npt.NDArray[np.float64]
    p_value: FloatArray
    n_paired: int


def _aligned(base: ItemCounts, cand: ItemCounts) -> tuple[IntArray, IntArray, int]:
    if base.groups != cand.groups or base.fields != cand.fields:
        raise DataError(
            "compare_shift: the runs differ in values or fields "
            f"({base.groups[1:]}/{base.fields} vs {cand.groups[1:]}/{cand.fields}); "
            "accept a new baseline for the changed audit"
        )
    if base.categories != cand.categories:
        raise DataError(
            "compare_shift: the catalogue's categories changed since the baseline; "
            "accept a new baseline for the new catalogue"
        )
    shared = [e for e in base.entities if e in set(cand.entities)]
    if not shared:
        raise DataError("compare_shift: the runs share no entity; accept a new baseline")
    bi = {e: i for i, e in enumerate(base.entities)}
    ci = {e: i for i, e in enumerate(cand.entities)}
    b = base.counts[[bi[e] for e in shared]]
    c = cand.counts[[ci[e] for e in shared]]
    return b, c, len(shared)


def _max_shift(tot: FloatArray, off: IntArray) -> FloatArray:
    t = tvd(shares(tot, off), off)
    with np.errstate(all="ignore"):
        m = np.nanmax(np.where(np.isnan(t), -np.inf, t), axis=-2)
    return np.where(np.isinf(m), np.nan, m)


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
    conf = check_confidence(confidence)
    B = check_positive_int(n_resamples, "n_resamples")
    rng = make_rng(seed)
    b, c, n = _aligned(baseline, candidate)
    off = baseline.offsets
    base_pt = _max_shift(b.sum(axis=0, dtype=np.float64), off)
    cand_pt = _max_shift(c.sum(axis=0, dtype=np.float64), off)
    E, G, C = b.shape
    W = resample_weights(rng, B, E).astype(np.float64)
    db = _max_shift((W @ b.reshape(E, -1).astype(np.float64)).reshape(B, G, C), off)
    dc = _max_shift((W @ c.reshape(E, -1).astype(np.float64)).reshape(B, G, C), off)
    delta = dc - db
    p = (1.0 + np.sum(~(delta > margin), axis=0)) / (B + 1.0)  # NaN counts against H1
    return ShiftComparison(
        fields=baseline.fields,
        baseline=base_pt,
        candidate=cand_pt,
        delta=cand_pt - base_pt,
        ci=percentile_ci(delta, conf),
        p_value=p,
        n_paired=n,
    )
