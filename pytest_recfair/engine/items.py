"""The item-side audit (LMRec): does a group's prompt shift the properties of the items? Titles
matched to the catalogue give per-field category shares and shifts from neutral (total variation,
family-wise permutation test); results keep per-entity counts, so later runs compare by entity."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import numpy as np

from pytest_recfair import secrets
from pytest_recfair.engine.base import AuditInputs, Scored, attributes_of, drifts, prop_key
from pytest_recfair.engine.overlap.evidence import SHOW, compare_lists, reply_text
from pytest_recfair.engine.overlap.kind import ListKind, parse_all
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.metrics import itemshift
from pytest_recfair.prompts.cases import PromptCase
from pytest_recfair.replies.catalogue import Catalogue, Coverage
from pytest_recfair.replies.matching import normalize
from pytest_recfair.report.fmt import Table, fmt, fmt_pair, p_cell, p_text
from pytest_recfair.report.sections import KindComparison, KindRow
from pytest_recfair.results import AuditResult, GateFailure, Interval, KindResults, Stat, json_nan
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


#: Most distinct values of a numeric field read as ordinal levels (Yelp's price 1-4): bin more.
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
    """The item-side shift of the replies' titles matched to the catalogue (``matched``: once
    for all attributes, the costly part); implicit proxies pool into their group, as LMRec's."""
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


def _score(
    settings: AuditSettings,
    inputs: AuditInputs,
    cases: Sequence[PromptCase],
    completions: Mapping[str, Any],
) -> Scored:
    """Every attribute's item-side results from all the audit's replies."""
    catalogue = inputs.catalogue
    assert catalogue is not None  # build_cases, always called first, checked it
    fields = field_names(settings.item_field)
    titles = [r.items for r in parse_all(cases, completions, settings.k, settings.parse_style)]
    matched = match_replies(titles, catalogue)  # once for all attributes
    results = tuple(
        score_items(
            cases, titles, catalogue, fields, attribute=attr,
            n_permutations=settings.n_resamples, n_resamples=settings.n_resamples,
            seed=settings.seed, matched=matched,
        )
        for attr in attributes_of(cases)
    )  # fmt: skip
    shown = {  # attribute -> evidence entry (report/evidence.py's shape)
        res.attribute: entry
        for res in results
        if (entry := _entry(cases, titles, matched[0], catalogue, completions, res)) is not None
    }
    return Scored((), 0, {KEY: ItemResults(catalogue.source, results)}, evidence=shown)


def _results(result: AuditResult | None) -> tuple[ItemSideResult, ...]:
    """Typed as this run scored them; read from JSON data only for a stored baseline."""
    data = result.extras.get(KEY) if result is not None else None
    return ItemResults.of(data).attributes


def _entry(
    cases: Sequence[Any],
    titles: Sequence[list[str] | None],
    matched: Mapping[int, list[int | None] | None],
    catalogue: Catalogue,
    completions: Mapping[str, Any],
    res: ItemSideResult,
) -> dict[str, Any] | None:
    shifted = [f for f in res.fields if f.max_shift is not None and f.most_shifted]
    if not shifted:
        return None
    f = max(shifted, key=lambda x: x.max_shift or 0.0)
    group = f.most_shifted or ""
    g = f.groups.index(group)
    moved = [(s or 0.0) - (n or 0.0) for s, n in zip(f.shares[g], f.shares[0], strict=True)]
    cat = max(range(len(moved)), key=lambda i: moved[i])
    codes = field_codes(catalogue, [f.field])[0]
    labels = codes.categories

    def tagged(i: int) -> tuple[list[str], list[str], int, int]:
        """Case i's titles with their category, their keys, items in ``cat``, matched."""
        shown, keys, hits, n = [], [], 0, 0
        # titles as shown: parsed from a reply, so scrubbed of secrets like its text
        for t, m in zip(map(secrets.scrub, titles[i] or []), matched.get(i) or [], strict=False):
            code = -1 if m is None else int(codes.codes[m])
            shown.append(f"{t} [{labels[code]}]" if code >= 0 else f"{t} [not in catalogue]")
            keys.append(normalize(t))
            n += code >= 0
            hits += code == cat
        return shown, keys, hits, n

    neutral: dict[str, int] = {}
    grouped: dict[str, list[int]] = {}
    for i, c in enumerate(cases):
        if c.repeat != 0 or titles[i] is None:
            continue
        if c.attribute is None:
            neutral[c.entity_id] = i
        elif c.attribute == res.attribute and (c.group or c.value) == group:
            grouped.setdefault(c.entity_id, []).append(i)
    rows = []
    for entity, idx in grouped.items():
        if entity not in neutral:
            continue
        n_shown, n_keys, n_hits, n_n = tagged(neutral[entity])
        per = [(i, *tagged(i)) for i in idx]
        hits, n = sum(p[3] for p in per), sum(p[4] for p in per)
        score = hits / max(n, 1) - n_hits / max(n_n, 1)
        i, shown, keys, _, _ = max(per, key=lambda p: (p[3], -p[0]))
        n_reply = _reply(completions, cases[neutral[entity]])
        diff = compare_lists(n_shown, n_keys, shown, keys)
        # the added items of the category that moved first: they are the shift
        diff["added"].sort(key=lambda t: not t.endswith(f" [{labels[cat]}]"))
        lists = [
            {"label": "neutral", "titles": n_shown, "reply": n_reply},
            {"label": f"{cases[i].value} ({group})", "titles": shown,
             **diff, "reply": _reply(completions, cases[i])},
        ]  # fmt: skip
        why = f"share of {labels[cat]!r}: neutral {n_hits}/{n_n}, {group} {hits}/{n} ({score:+.3f})"
        rows.append((score, entity, {"entity": cases[i].entity, "score": score, "why": why,
                                     "lists": lists}))  # fmt: skip
    rows.sort(key=lambda r: (-r[0], r[1]))
    if not rows:
        return None
    return {
        "what": (
            f"{f.field}: the {min(SHOW, len(rows))} of {len(rows)} entities whose lists for "
            f"{group} (shift {f.max_shift:.3f} from neutral) gained most {labels[cat]!r} "
            "items; titles tagged with their catalogue category, first repeat"
        ),
        "rows": [r[2] for r in rows[:SHOW]],
    }


def _reply(completions: Mapping[str, Any], case: Any) -> str:
    return reply_text(getattr(completions.get(case.id), "text", None))


#: The key of the item-side results in ``AuditResult.extras`` (the kind's name).
KEY: Final = "items"


def _attributes(data: Any) -> list[Mapping[str, Any]]:
    return list((data or {}).get("attributes", ()))


def _share(cov: Mapping[str, Any]) -> float:
    return cov["matched"] / cov["total"] if cov["total"] else 0.0


def _shifted(f: Mapping[str, Any]) -> tuple[str, str] | None:
    """(most, least) shifted group from neutral, or None without a measured shift."""
    pairs = [(s, g) for s, g in zip(f["shift"], f["groups"][1:], strict=True) if s is not None]
    return (max(pairs)[1], min(pairs)[1]) if pairs else None


def _field_table(res: Mapping[str, Any], f: Mapping[str, Any]) -> Table:
    """A field's shares per group, its shift from neutral and (when tested) from the others."""
    head = ["group", *(f"{c} share" for c in f["categories"]), "items", "shift [95% CI]", "p"]
    between, ps = f.get("between") or [], f.get("p_between") or []
    tested = any(b is not None for b in between)
    head += ["vs others", "p (vs others)"] if tested else []
    rows = []
    for i, (g, shares) in enumerate(zip(f["groups"], f["shares"], strict=True)):
        shift = "—" if i == 0 else fmt(f["shift"][i - 1]) + fmt_pair(f["shift_ci"][i - 1])
        p = "—" if i == 0 else p_cell(f["p_adjusted"][i - 1])
        row = [g, *(fmt(x) for x in shares), str(f["n_items"][i]), shift, p]
        if tested:
            row += ["—", "—"] if i == 0 else [fmt(between[i - 1]), p_cell(ps[i - 1])]
        rows.append(row)
    shifted = _shifted(f)
    most = "" if shifted is None else f"; most / least shifted from neutral: {' / '.join(shifted)}"
    groups, shifts = f["groups"][1:], f["shift"]
    top = max(range(len(groups)), key=lambda i: shifts[i] or 0.0) if groups else None
    where = "" if top is None else f" ({groups[top]}, family-wise p {p_text(f['p_adjusted'][top])})"
    lead = f"largest shift from neutral {fmt(f['max_shift'])}{fmt_pair(f['max_shift_ci'])}{where}"
    others = "; vs others: the group's shares against the attribute's other groups'"
    cov = res["coverage"]
    unmatched = ", ".join(cov["unmatched_examples"][:3])
    notes = [
        f"catalogue matched {_share(cov):.0%} of {cov['total']} titles"
        + (f" (unmatched e.g. {unmatched})" if unmatched else ""),
        "shift: total variation distance of the group's category shares from the neutral "
        "prompt's; p: family-wise permutation test" + (others if tested else ""),
    ]
    title = f"Item side: {res['attribute']} · {f['field']}"
    return Table(title, head, rows, lead + most, notes)


class ItemSections:
    """The item-side kind's report sections."""

    def measure(self, result: AuditResult) -> str:
        return f"item side, top {getattr(result.meta, 'k', '?')}"

    def tables(self, data: Any) -> list[Table]:
        return [_field_table(res, f) for res in _attributes(data) for f in res["fields"]]

    def brief(self, data: Any) -> str:
        return "; ".join(
            f"{res['attribute']} · {f['field']}: largest shift {fmt(f['max_shift'])}"
            + "".join(f" ({s[0]})" for s in [_shifted(f)] if s)
            for res in _attributes(data)
            for f in res["fields"]
        )

    def series(self, data: Any) -> list[tuple[str, Stat]]:
        return [
            (f"{res['attribute']} · {f['field']} · largest shift",
             Stat(json_nan(f["max_shift"]), Interval.from_obj(f["max_shift_ci"])))
            for res in _attributes(data)
            for f in res["fields"]
        ]  # fmt: skip

    def compare(
        self, a: AuditResult, b: AuditResult, *, tolerance: float, n_resamples: int, seed: int
    ) -> KindComparison:
        """Each field's largest shift, B against A (paired entity bootstrap, Holm); runs with
        other values, fields or categories: the numbers, no test."""
        pairs, notes = paired_runs(_results(a), _results(b), lambda r: r.attribute)
        rows: list[KindRow] = []
        for was, res in pairs:
            try:
                cmp = itemshift.compare_shift(
                    was.counts, res.counts, n_resamples=n_resamples, seed=seed, margin=tolerance
                )
            except DataError as exc:
                notes.append(f"{res.attribute}: no test ({exc})")
                shifts = {f.field: f.max_shift for f in was.fields}
                rows += [
                    KindRow(res.attribute, f.field, "largest shift",
                            json_nan(shifts.get(f.field)), json_nan(f.max_shift), None, 0)
                    for f in res.fields
                ]  # fmt: skip
                continue
            rows += [
                KindRow(res.attribute, *cell[:1], "largest shift", *cell[1:], cmp.n_paired)
                for cell in drifts(cmp, cmp.fields)
            ]
        return KindComparison.holm(rows, "paired entity bootstrap", notes)

    def properties(self, data: Any) -> list[tuple[str, float | int | str]]:
        out: list[tuple[str, float | int | str]] = []
        for res in _attributes(data):
            out.append((prop_key(res["attribute"], "coverage"), round(_share(res["coverage"]), 6)))
            for f in res["fields"]:
                most, least = _shifted(f) or ("", "")
                found = {"max_shift": f["max_shift"], "min_p": min(f["p_adjusted"], default=None),
                         "most_shifted": most, "least_shifted": least,
                         "min_p_between": min(f.get("p_between") or (), default=None)}  # fmt: skip
                name = prop_key(res["attribute"], f["field"])
                out += [(f"{name}.{k}", v) for k, v in found.items() if v not in (None, "")]
        return out


class ItemAudit(ListKind):
    """The LMRec item-side audit: item properties per group, scored over all entities."""

    name = KEY
    sections = ItemSections()

    check_catalogue = staticmethod(check_fields)
    score = staticmethod(_score)

    def failures(
        self, settings: AuditSettings, result: AuditResult, baseline: AuditResult | None
    ) -> tuple[GateFailure, ...]:
        """``max_shift`` crossed (and significant), or the largest shift rose vs baseline."""
        before = {r.attribute: r for r in _results(baseline)} if baseline else {}
        return tuple(
            f
            for res in _results(result)
            for f in item_failures(
                res, before.get(res.attribute), max_shift=settings.max_shift,
                tolerance=settings.tolerance, alpha=settings.alpha, seed=settings.seed,
                n_resamples=settings.n_resamples,
            )
        )  # fmt: skip


ITEMS = ItemAudit()
