"""The item-side audit (LMRec): does a group's prompt shift the properties of the items?
Titles are matched to the catalogue; :mod:`.scoring` gives per-field category shares and
shifts from neutral (total variation distance, family-wise permutation test over entities)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from pytest_recfair import secrets
from pytest_recfair.engine.base import AuditInputs, Scored, attributes_of, drifts, prop_key
from pytest_recfair.engine.items import scoring as itemside
from pytest_recfair.engine.items.scoring import ItemSideResult, field_codes
from pytest_recfair.engine.overlap.evidence import SHOW, compare_lists, reply_text
from pytest_recfair.engine.overlap.kind import ListKind, parse_all
from pytest_recfair.errors import DataError
from pytest_recfair.metrics.itemshift import compare_shift
from pytest_recfair.prompts.cases import PromptCase
from pytest_recfair.replies.catalogue import Catalogue
from pytest_recfair.replies.matching import normalize
from pytest_recfair.report.fmt import Table, fmt, fmt_pair, p_cell, p_text
from pytest_recfair.report.sections import KindComparison, KindRow
from pytest_recfair.results import AuditResult, GateFailure, Interval, Stat, json_nan
from pytest_recfair.settings import AuditSettings


def _score(
    settings: AuditSettings,
    inputs: AuditInputs,
    cases: Sequence[PromptCase],
    completions: Mapping[str, Any],
) -> Scored:
    """Every attribute's item-side results from all the audit's replies."""
    catalogue = inputs.catalogue
    assert catalogue is not None  # build_cases, always called first, checked it
    fields = itemside.field_names(settings.item_field)
    titles = [r.items for r in parse_all(cases, completions, settings.k, settings.parse_style)]
    matched = itemside.match_replies(titles, catalogue)  # once for all attributes
    results = tuple(
        itemside.score_items(
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
    return Scored((), 0, {KEY: itemside.ItemResults(catalogue.source, results)}, evidence=shown)


def _results(result: AuditResult | None) -> tuple[itemside.ItemSideResult, ...]:
    """Typed as this run scored them; read from JSON data only for a stored baseline."""
    data = result.extras.get(KEY) if result is not None else None
    return itemside.ItemResults.of(data).attributes


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
        pairs, notes = itemside.paired_runs(_results(a), _results(b), lambda r: r.attribute)
        rows: list[KindRow] = []
        for was, res in pairs:
            try:
                cmp = compare_shift(
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
                name = prop_key(res["attribute"], f["field"])
                if f["max_shift"] is not None:
                    out.append((f"{name}.max_shift", f["max_shift"]))
                if f["p_adjusted"]:
                    out.append((f"{name}.min_p", min(f["p_adjusted"])))
                for word, group in zip(("most", "least"), _shifted(f) or (), strict=False):
                    out.append((f"{name}.{word}_shifted", group))
                if f.get("p_between"):
                    out.append((f"{name}.min_p_between", min(f["p_between"])))
        return out


class ItemAudit(ListKind):
    """The LMRec item-side audit: item properties per group, scored over all entities."""

    name = KEY
    sections = ItemSections()

    def wants(self, settings: AuditSettings) -> bool:
        return settings.item_field is not None

    check_catalogue = staticmethod(itemside.check_fields)
    score = staticmethod(_score)

    def failures(
        self, settings: AuditSettings, result: AuditResult, baseline: AuditResult | None
    ) -> tuple[GateFailure, ...]:
        """``max_shift`` crossed (and significant), or the largest shift rose vs baseline."""
        before = {r.attribute: r for r in _results(baseline)} if baseline else {}
        return tuple(
            f
            for res in _results(result)
            for f in itemside.item_failures(
                res, before.get(res.attribute), max_shift=settings.max_shift,
                tolerance=settings.tolerance, alpha=settings.alpha, seed=settings.seed,
                n_resamples=settings.n_resamples,
            )
        )  # fmt: skip


ITEMS = ItemAudit()
