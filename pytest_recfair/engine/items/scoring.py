"""The item-side audit, scored: parsed replies + catalogue -> per-field shift results.
Results keep the per-entity category counts, so a later run compares entity by entity."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.metrics import itemshift
from pytest_recfair.replies.catalogue import Catalogue, Coverage
from pytest_recfair.results import GateFailure, Interval, KindResults
from pytest_recfair.settings import AuditSettings

T = TypeVar("T")


def rounded(x: Any) -> Any:
    """Statistics as results keep them: 6 decimals, None for NaN, inf or None; arrays as lists."""
    if np.ndim(x):
        return [rounded(v) for v in x]
    return None if x is None or not math.isfinite(float(x)) else round(float(x), 6)


def paired_runs(
    a: Sequence[T], b: Sequence[T], name: Callable[[T], str]
) -> tuple[list[tuple[T, T]], list[str]]:
    """(A's, B's) result of each attribute both runs hold; notes for those only one holds."""
    was, now = {name(r): r for r in a}, {name(r): r for r in b}
    notes = [f"{n} only in A" for n in was if n not in now]
    return [(was[n], r) for n, r in now.items() if n in was], notes + [
        f"{n} only in B" for n in now if n not in was
    ]


def coverage_dict(c: Coverage) -> dict[str, Any]:
    return {**dataclasses.asdict(c), "unmatched_examples": list(c.unmatched_examples)}


def _plain(x: Any) -> Any:
    """Tuples, all the way down, as JSON lists."""
    return [_plain(v) for v in x] if isinstance(x, tuple) else x


def _tuples(x: Any) -> Any:
    return tuple(_tuples(v) for v in x) if isinstance(x, list) else x


_COUNTS = ("entities", "groups", "fields", "categories")  # ItemCounts' labels, stored as lists


@dataclass(frozen=True)
class FieldShift:
    """One catalogue field: shares per group, shift of each value from neutral, tests."""

    field: str
    categories: tuple[str, ...]
    groups: tuple[str, ...]  # groups[0] is the neutral prompt
    shares: tuple[tuple[float | None, ...], ...]
    share_ci: tuple[tuple[tuple[float | None, float | None], ...], ...]
    n_items: tuple[int, ...]
    shift: tuple[float | None, ...]  # per value (groups[1:])
    shift_ci: tuple[tuple[float | None, float | None], ...]
    p_adjusted: tuple[float, ...]
    association: tuple[tuple[float | None, ...], ...]
    max_shift: float | None
    max_shift_ci: tuple[float | None, float | None]
    # each value against the attribute's other values (LMRec), family-wise p; empty in a
    # baseline stored before they were measured
    between: tuple[float | None, ...] = ()
    p_between: tuple[float, ...] = ()

    @property
    def most_shifted(self) -> str | None:
        vals = [(s, g) for s, g in zip(self.shift, self.groups[1:], strict=True) if s is not None]
        return max(vals)[1] if vals else None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FieldShift:
        return cls(**{
            f.name: _tuples(d[f.name] if f.default is dataclasses.MISSING else d.get(f.name, ()))
            for f in dataclasses.fields(cls)
        })  # fmt: skip


@dataclass(frozen=True)
class ItemSideResult:
    attribute: str
    fields: tuple[FieldShift, ...]
    coverage: Coverage
    counts: itemshift.ItemCounts

    def field(self, name: str) -> FieldShift:
        return {f.field: f for f in self.fields}[name]

    def to_dict(self) -> dict[str, Any]:
        c = self.counts
        return {
            "attribute": self.attribute,
            "coverage": coverage_dict(self.coverage),
            "fields": [f.to_dict() for f in self.fields],
            "counts": {
                **{n: _plain(getattr(c, n)) for n in _COUNTS},
                "cells": c.counts.reshape(len(c.entities), -1).tolist(),
            },
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ItemSideResult:
        cd = d["counts"]
        entities, groups, names, cats = (_tuples(cd[n]) for n in _COUNTS)
        shape = (len(entities), len(groups), sum(len(x) for x in cats))
        cells = np.asarray(cd["cells"], dtype=np.int64).reshape(shape)
        return cls(
            str(d["attribute"]),
            tuple(FieldShift.from_dict(f) for f in d["fields"]),
            Coverage(**{k: _tuples(v) for k, v in d["coverage"].items()}),
            itemshift.ItemCounts(entities, groups, names, cats, cells),
        )


@dataclass(frozen=True, eq=False)  # eq: the Mapping's, so it equals its JSON form
class ItemResults(KindResults):
    """The item-side results of one audit (``AuditResult.extras["items"]``), typed."""

    catalogue: str | None
    attributes: tuple[ItemSideResult, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"catalogue": self.catalogue, "attributes": [a.to_dict() for a in self.attributes]}

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> ItemResults:
        """Typed results from an extras entry: as they are, or read from JSON data."""
        if isinstance(data, ItemResults):
            return data
        data = data or {}
        attributes = tuple(ItemSideResult.from_dict(d) for d in data.get("attributes", ()))
        return cls(data.get("catalogue"), attributes)


def _field_result(res: itemshift.ShiftResult, i: int) -> FieldShift:
    c = res.counts
    sl = c.field_slice(c.fields[i])

    def r(a: Any) -> Any:  # rounded, as tuples all the way down
        return _tuples(rounded(a))

    return FieldShift(
        c.fields[i], c.categories[i], c.groups, r(res.shares[:, sl]), r(res.share_ci[:, sl]),
        tuple(int(x) for x in res.n_items[:, i]), r(res.shift[:, i]), r(res.shift_ci[:, i]),
        tuple(round(float(x), 6) for x in res.p_adjusted[:, i]), r(res.association[:, sl]),
        rounded(res.max_shift[i]), r(res.max_shift_ci[i]), r(res.between[:, i]),
        tuple(round(float(x), 6) for x in res.p_between[:, i]),
    )  # fmt: skip


MatchedReplies = tuple[dict[int, list[int | None] | None], Coverage]


#: A numeric field with at most this many distinct values is read as ordinal levels (Yelp's
#: price 1-4); more must be binned into levels in the catalogue file.
MAX_LEVELS = 20


def _level(value: str | float) -> str:
    """A numeric level as it reads: 2.0 -> "2", 2.5 -> "2.5"."""
    number = float(value)
    return str(int(number)) if number.is_integer() else repr(number)


def field_levels(catalogue: Catalogue, name: str) -> tuple[tuple[str, ...], bool]:
    """The categories of field ``name`` in table order, and whether they are numeric
    levels (ordinal, in numeric order); a clear error for an unknown or continuous field."""
    catalogue.check_field(name)
    if name in catalogue.categorical:
        return catalogue.categories(name), False
    values = sorted({float(it.fields[name]) for it in catalogue.items if name in it.fields})
    if len(values) > MAX_LEVELS:
        raise DataError(
            f"{catalogue.source or 'catalogue'}: field {name!r} is numeric with {len(values)} "
            f"distinct values; item-side distributions take at most {MAX_LEVELS} ordinal "
            "levels (like a price level 1-4): bin it into levels in the file"
        )
    if not values:
        raise DataError(f"{catalogue.source or 'catalogue'}: field {name!r} has no value")
    return tuple(_level(v) for v in values), True


def field_names(item_field: str | None) -> list[str]:
    """The catalogue fields ``item_field`` names ("price, stars")."""
    return [f.strip() for f in (item_field or "").split(",") if f.strip()]


def needed(catalogue: Catalogue | None, marker: str) -> Catalogue:
    """The catalogue ``@fairness(marker)`` needs, else a ConfigError saying how to give one."""
    if catalogue is None:
        raise ConfigError(
            f"@fairness({marker}) needs a catalogue: give catalogue= a CSV/JSON/YAML file "
            "(marker or ini recfair_catalogue), or override the recfair_catalogue fixture"
        )
    return catalogue


def check_fields(settings: AuditSettings, catalogue: Catalogue | None, where: object) -> None:
    """Every ``item_field`` in the catalogue with usable levels: checked before any request."""
    item_field = settings.item_field or ""
    catalogue = needed(catalogue, f"item_field={item_field!r}")
    if not field_names(item_field):
        raise ConfigError(f"item_field={item_field!r} names no field; give e.g. 'price'")
    for name in field_names(item_field):
        field_levels(catalogue, name)


def field_codes(catalogue: Catalogue, names: Sequence[str]) -> list[itemshift.FieldCodes]:
    """The catalogue's fields ``names`` as plain arrays for ``metrics.itemshift``."""
    out = []
    for name in names:
        categories, numeric = field_levels(catalogue, name)
        pos = {c: i for i, c in enumerate(categories)}
        codes = [
            -1
            if name not in it.fields
            else pos.get(_level(it.fields[name]) if numeric else str(it.fields[name]), -1)
            for it in catalogue.items
        ]
        out.append(itemshift.FieldCodes(name, categories, np.array(codes, dtype=np.int64)))
    return out


def match_replies(titles: Sequence[list[str] | None], catalogue: Catalogue) -> MatchedReplies:
    """Case index -> catalogue index of each title, and the coverage; matching no title
    at all is a clear error (the wrong domain)."""
    flat = [t for lst in titles if lst for t in lst]
    matched_flat = catalogue.match(flat)
    coverage = catalogue.coverage(flat, matched_flat)
    if flat and coverage.matched == 0:
        raise DataError(
            f"catalogue {catalogue.source or ''}: none of {len(flat)} recommended titles "
            f"matched (e.g. {', '.join(map(repr, coverage.unmatched_examples[:3]))}); is it "
            "the catalogue of this domain?"
        )
    ends = itertools.accumulate(len(t or ()) for t in titles)
    items = {
        i: None if t is None else matched_flat[end - len(t) : end]
        for i, (t, end) in enumerate(zip(titles, ends, strict=True))
    }
    return items, coverage


def score_items(
    cases: Sequence[Any],
    titles: Sequence[list[str] | None],
    catalogue: Catalogue,
    fields: Sequence[str],
    *,
    attribute: str,
    n_permutations: int = 1000,
    n_resamples: int = 1000,
    seed: int = 0,
    matched: MatchedReplies | None = None,
) -> ItemSideResult:
    """Match every reply's titles to the catalogue and score the item-side shift.

    Values that signal a group (implicit proxies) pool into it, as LMRec's groups do.
    ``matched`` is computed once for all attributes: matching is the costly part."""
    items, coverage = matched if matched is not None else match_replies(titles, catalogue)
    neutral: dict[str, list[int | None] | None] = {}
    by_value: dict[str, dict[str, list[int | None] | None]] = {}
    group_of: dict[str, str] = {}
    for i, case in enumerate(cases):
        if case.attribute is None:
            neutral[case.entity_id] = items.get(i)
        elif case.attribute == attribute and case.value is not None:
            by_value.setdefault(case.value, {})[case.entity_id] = items.get(i)
            if case.group:
                group_of[case.value] = case.group
    counts = itemshift.item_counts(
        neutral, by_value, field_codes(catalogue, fields), group_of=group_of
    )
    res = itemshift.shift(counts, n_permutations=n_permutations, n_resamples=n_resamples, seed=seed)
    fields_ = tuple(_field_result(res, i) for i in range(len(fields)))
    return ItemSideResult(attribute, fields_, coverage, counts)


def item_failures(
    result: ItemSideResult,
    baseline: ItemSideResult | None,
    *,
    max_shift: float | None,
    tolerance: float,
    alpha: float,
    seed: int = 0,
    n_resamples: int = 1000,
) -> list[GateFailure]:
    """A limit or drift fails only when crossed AND significant (p < alpha)."""
    out: list[GateFailure] = []
    for f in result.fields:
        for g, s, ci, p in zip(f.groups[1:], f.shift, f.shift_ci, f.p_adjusted, strict=True):
            if max_shift is not None and s is not None and s > max_shift and p < alpha:
                out.append(GateFailure(
                    "item_shift", result.attribute, value=s, limit=max_shift, p_value=p,
                    alpha=alpha, group=g, value_ci=None if None in ci else Interval.from_obj(ci),
                    detail=f"item field {f.field!r}: {g} shifts {s:.3f} from neutral (total "
                    f"variation) > max_shift {max_shift:g} (family-wise p = {p:.3g})",
                ))  # fmt: skip
    if baseline is None:
        return out
    cmp = itemshift.compare_shift(
        baseline.counts, result.counts, n_resamples=n_resamples, seed=seed, margin=tolerance
    )
    for i, name in enumerate(cmp.fields):
        delta, p = float(cmp.delta[i]), float(cmp.p_value[i])
        if math.isfinite(delta) and delta > tolerance and p < alpha:
            now, was = float(cmp.candidate[i]), float(cmp.baseline[i])
            group = result.field(name).most_shifted
            out.append(GateFailure(
                "item_shift", result.attribute, value=now, limit=tolerance, baseline=was,
                p_value=p, alpha=alpha, group=group,
                detail=f"item field {name!r}: largest shift {now:.3f} ({group}) vs baseline "
                f"{was:.3f} rose by more than the tolerance {tolerance:g} (paired entity "
                f"bootstrap p = {p:.3g})",
            ))  # fmt: skip
    return out
