"""The exposure audit (``kind="exposure"``): who gets seen, and is popularity favoured?
The list-overlap prompts' top-K titles are matched to the catalogue (unmatched ones counted,
never dropped), grouped by ``item_field`` or popularity ``bins``; gates need a limit crossed
AND significant (family-wise); drift: paired entity bootstrap, Holm across measures."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from pytest_recfair.engine import items as itemside
from pytest_recfair.engine.base import AuditInputs, Scored, drifts, prop_key
from pytest_recfair.engine.items import MAX_LEVELS, field_codes, rounded
from pytest_recfair.engine.overlap.evidence import SHOW
from pytest_recfair.engine.overlap.kind import ListKind, parse_all
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.metrics import exposure as ex
from pytest_recfair.prompts.cases import PromptCase
from pytest_recfair.replies.catalogue import Catalogue
from pytest_recfair.report.fmt import Table, fmt, fmt_pair, p_cell
from pytest_recfair.report.sections import KindComparison, KindRow
from pytest_recfair.results import AuditResult, GateFailure, Interval, Stat, json_nan
from pytest_recfair.settings import AuditSettings

KEY = "exposure"
#: The per-entity arrays a result keeps for the baseline's drift test.
_PER_ENTITY = ("plain", "weighted", "tail", "pop_sum", "pop_n")
_WORDS = {"mgu": "MGU", "long_tail_drop": "long-tail share", "max_lift": "max |lift|"}


@dataclass(frozen=True)
class _Setup:
    """What the catalogue and the reference give the audit, worked out before sending."""

    field: str
    groups: tuple[str, ...]
    group_of: ex.IntArray  # per catalogue item, -1: no value
    reference: ex.FloatArray  # per group
    quantile: ex.FloatArray | None  # per catalogue item; None: no popularity
    history: dict[str, Any] | None  # {"source", "matched", "total"} interactions


def _groups(
    catalogue: Catalogue, name: str, bins: int | tuple[float, ...] | None
) -> tuple[tuple[str, ...], ex.IntArray, ex.FloatArray | None]:
    """Group labels, each item's group and (numeric field) each item's value."""
    catalogue.check_field(name)
    where, text = catalogue.source or "catalogue", name in catalogue.categorical
    if text and bins is not None:
        raise ConfigError(
            f"@fairness(bins={bins!r}): field {name!r} of {where} is text, not numbers; "
            "bins group a numeric field (plays, ratings): remove bins= or name one"
        )
    values = (
        None if text else np.array([float(it.fields.get(name, math.nan)) for it in catalogue.items])
    )
    if values is None or bins is None:
        if values is not None and len(np.unique(values[np.isfinite(values)])) > MAX_LEVELS:
            raise ConfigError(
                f"@fairness(item_field={name!r}): field {name!r} of {where} is numeric with "
                f"more than {MAX_LEVELS} values; give bins=5 (quantile groups) or bin edges "
                "(bins='10,100,1000')"
            )
        fc = field_codes(catalogue, [name])[0]
        return fc.categories, fc.codes, values
    codes, labels = ex.bin_codes(values, bins)
    return labels, codes, values


def _history(ref: str, where: Sequence[Path]) -> tuple[Path, list[tuple[str, str, float]]]:
    """The history file ``reference`` names, and its (title, id, count) per interaction row."""
    tried = [Path(ref)] if Path(ref).is_absolute() or not where else [Path(b) / ref for b in where]
    path = next((p for p in tried if p.is_file()), None)
    if path is None:
        raise DataError(
            f"@fairness(reference={ref!r}): no such history file (looked in "
            f"{', '.join(map(str, tried)) or ref}); give reference='catalogue' or a CSV/JSON "
            "file of interactions (one row per interaction: title or id, optional count)"
        )
    name = f"history file {str(path)!r}"
    try:
        text = path.read_text(encoding="utf-8-sig")
        json_file = path.suffix.lower() == ".json"
        rows = json.loads(text) if json_file else list(csv.DictReader(io.StringIO(text)))
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ValueError("expected a list of records")
        out = [
            (str(r.get("title") or ""), str(r.get("id") or ""), float(r.get("count") or 1))
            for r in rows
        ]
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{name} cannot be read ({exc}); give a CSV or JSON file") from None
    out = [r for r in out if (r[0] or r[1]) and r[2] > 0]
    if not out:
        raise DataError(
            f"{name} holds no interactions; give one row per interaction with a title (or "
            "an id of the catalogue) and an optional positive count, or reference='catalogue'"
        )
    return path, out


def setup(settings: AuditSettings, catalogue: Catalogue | None, where: Sequence[Path]) -> _Setup:
    """Groups, reference and popularity; every bad setting stops here, before any request."""
    names = itemside.field_names(settings.item_field)
    if len(names) != 1:
        raise ConfigError(
            f"@fairness(kind='exposure', item_field={settings.item_field!r}): an exposure "
            "audit groups items by one catalogue field; give e.g. item_field='genre' or "
            "item_field='plays', bins=5"
        )
    name = names[0]
    catalogue = itemside.needed(catalogue, f"kind='exposure', item_field={name!r}")
    groups, group_of, values = _groups(catalogue, name, settings.bins)
    G, known = len(groups), group_of >= 0
    history, popularity = None, values
    reference = np.bincount(group_of[known], minlength=G).astype(np.float64)
    if settings.reference != "catalogue":
        path, rows = _history(settings.reference, where)
        ids = {it.id: i for i, it in enumerate(catalogue.items)}
        by_title = catalogue.match([t for t, i, _ in rows if i not in ids])
        found, hit = iter(by_title), np.zeros(len(catalogue.items))
        for _, ident, count in rows:
            item = ids[ident] if ident in ids else next(found)
            if item is not None:
                hit[item] += count
        if hit.sum() == 0:
            raise DataError(
                f"history file {str(path)!r}: none of its {len(rows)} interactions names an "
                f"item of {catalogue.source or 'the catalogue'}; is it this catalogue's history?"
            )
        matched = sum(1 for t, i, _ in rows if i in ids) + sum(m is not None for m in by_title)
        history = {"source": str(path), "matched": matched, "total": len(rows)}
        reference = np.bincount(group_of[known], hit[known], minlength=G).astype(np.float64)
        popularity = values if values is not None else hit
    return _Setup(
        name, groups, group_of, reference / reference.sum(),
        None if popularity is None else ex.popularity_quantiles(popularity), history,
    )  # fmt: skip


def _score(
    settings: AuditSettings,
    inputs: AuditInputs,
    cases: Sequence[PromptCase],
    completions: Mapping[str, Any],
) -> Scored:
    su, catalogue = setup(settings, inputs.catalogue, inputs.where), inputs.catalogue
    assert catalogue is not None  # setup says so otherwise
    titles = [r.items for r in parse_all(cases, completions, settings.k, settings.parse_style)]
    matched, coverage = itemside.match_replies(titles, catalogue)
    # values that signal a group (implicit proxies: first names) pool into it, as LMRec's
    pair_of = {f"{c.attribute}: {c.group or c.value}": [c.attribute, c.group or c.value]
               for c in cases if c.attribute}  # fmt: skip
    lists = [
        (c.entity_id, None if c.attribute is None else f"{c.attribute}: {c.group or c.value}", m)
        for i, c in enumerate(cases)
        if (m := matched[i]) is not None
    ]
    data = ex.exposure_data(lists, su.group_of, su.groups, su.quantile)
    res = ex.exposure(
        data, su.reference, max_gap=settings.max_exposure_gap,
        min_tail=settings.min_long_tail_share, max_lift=settings.max_popularity_lift,
        n_resamples=settings.n_resamples, seed=settings.seed,
    )  # fmt: skip
    slots = np.bincount([s for _, _, m in lists for s in m if s is not None],
                        minlength=len(catalogue.items)).astype(np.float64)  # fmt: skip
    # what each item would get in proportion to the reference (uniform within its group)
    size = np.bincount(su.group_of[su.group_of >= 0], minlength=len(su.groups))
    share = np.where(su.group_of >= 0, su.reference[su.group_of] / size[su.group_of], 0.0)
    took = slots - slots.sum() * share
    order = np.argsort(-took, kind="stable")
    top = [*order[:SHOW], *order[::-1][:SHOW]]
    out = {
        "field": su.field, "reference": settings.reference, "groups": list(su.groups),
        "bins": None if settings.bins is None else str(settings.bins),
        "reference_share": rounded(res.reference), "p_gap": rounded(res.p_gap),
        **{k: rounded(v) for k, v in res.point.items()},
        **{f"{k}_ci": rounded(v) for k, v in res.ci.items()},
        "p_tail": rounded(res.p_tail), "p_lift": rounded(res.p_lift),
        "values": [pair_of[v] for v in data.values],  # the order of the lift's columns
        "gini": rounded(ex.gini(slots)), "coverage": rounded(np.mean(slots > 0)),
        "matched": itemside.coverage_dict(coverage),
        "history": su.history, "n_entities": res.n_entities,
        "items": [[catalogue.items[i].title, su.groups[su.group_of[i]] if su.group_of[i] >= 0
                   else None, int(slots[i]), rounded(took[i])] for i in top],
        "per_entity": {"entities": list(data.entities),
                       **{k: rounded(getattr(data, k)) for k in _PER_ENTITY}},
    }  # fmt: skip
    return Scored((), 0, {KEY: out}, evidence=_evidence(out, data))


def _evidence(out: Mapping[str, Any], data: ex.ExposureData) -> dict[str, Any]:
    """The field: the items that took and lost most exposure against the reference; each
    attribute: the entities whose lists for its most lifted value went most popular."""
    rows = [
        {"entity": t, "score": d, "why": f"{g}: {n} slots, {d:+.1f} vs the reference",
         "lists": []}
        for t, g, n, d in out["items"] if d is not None
    ]  # fmt: skip
    shown = {
        out["field"]: {
            "what": f"the {SHOW} items that took most exposure from the reference's share "
            f"and the {SHOW} that lost most ({out['field']} groups)",
            "rows": rows,
        }
    }
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = data.pop_sum / data.pop_n
    for attr in dict.fromkeys(a for a, _ in out["values"]):
        cols = [i for i, (a, _) in enumerate(out["values"]) if a == attr]
        v = max(cols, key=lambda i: abs(out["lift"][i] or 0.0))
        lift = mean[:, v + 1] - mean[:, 0]
        best = [
            i for i in np.argsort(-np.nan_to_num(lift, nan=-np.inf))[:SHOW] if np.isfinite(lift[i])
        ]
        value = out["values"][v][1]
        shown[attr] = {
            "what": f"the entities whose lists for {value} went most popular (mean "
            "popularity quantile of the matched items, neutral -> value)",
            "rows": [
                {"entity": data.entities[i], "score": float(lift[i]), "lists": [],
                 "why": f"neutral {mean[i, 0]:.2f} -> {value} {mean[i, v + 1]:.2f}"}
                for i in best
            ],
        }  # fmt: skip
    return shown


def _as_data(d: Mapping[str, Any]) -> ex.ExposureData:
    pe = d["per_entity"]
    arr = {k: np.asarray(pe[k], dtype=np.float64) for k in _PER_ENTITY}
    groups, values = tuple(d["groups"]), tuple(f"{a}: {v}" for a, v in d["values"])
    return ex.ExposureData(tuple(pe["entities"]), groups, values=values, **arr)


def _paired(
    before: Mapping[str, Any], d: Mapping[str, Any], **test: Any
) -> ex.ExposureDrift | None:
    """The drift test of ``d`` against ``before`` on ``d``'s reference; None: no
    per-entity counts, another field, other groups or values, under two shared entities."""
    if not ("per_entity" in before and "per_entity" in d and before["field"] == d["field"]):
        return None
    return ex.compare_exposure(_as_data(before), _as_data(d), d["reference_share"], **test)


def _failures(
    s: AuditSettings, d: Mapping[str, Any], before: Mapping[str, Any] | None
) -> list[GateFailure]:
    out: list[GateFailure] = []

    def fail(attr: str, group: str | None, value: float, limit: float, p: float, why: str) -> None:
        detail = f"{why} (family-wise p = {p:.3g})"
        out.append(GateFailure(KEY, attribute=attr, value=value, limit=limit, p_value=p,
                               alpha=s.alpha, detail=detail, group=group))  # fmt: skip

    field, gap_limit = d["field"], s.max_exposure_gap
    for g, share, ref, gap, p in zip(
        d["groups"], d["share"], d["reference_share"], d["gap"], d["p_gap"], strict=True
    ):
        if gap_limit is not None and gap is not None and abs(gap) > gap_limit and p < s.alpha:
            fail(field, g, share, gap_limit, p, f"{field} group {g!r} took {share:.3f} of the "
                 f"top-K slots vs the reference's {ref:.3f} (gap {gap:+.3f}) beyond "
                 f"max_exposure_gap {gap_limit:g}")  # fmt: skip
    tail, lo = d["long_tail"], s.min_long_tail_share
    if lo is not None and tail is not None and tail < lo and d["p_tail"] < s.alpha:
        fail(field, None, tail, lo, d["p_tail"], f"long-tail share {tail:.3f} (slots to items "
             f"outside the top 20% by popularity) < min_long_tail_share {lo:g}")  # fmt: skip
    hi = s.max_popularity_lift
    for (attr, value), lift, p in zip(d["values"], d["lift"], d["p_lift"], strict=True):
        if hi is not None and lift is not None and abs(lift) > hi and p < s.alpha:
            fail(attr, value, lift, hi, p, f"{value}: popularity lift {lift:+.3f} (mean popularity "
                 f"quantile shown vs neutral) beyond max_popularity_lift {hi:g}")  # fmt: skip
    # drift: MGU, long-tail share and max |lift| worse than the baseline by over the tolerance
    test = {"n_resamples": s.n_resamples, "seed": s.seed, "margin": s.tolerance}
    if (cmp := _paired(before, d, **test) if before else None) is None:
        return out
    moved = sorted(d["items"][:SHOW], key=lambda r: -(r[3] or 0.0))
    names = ", ".join(str(r[0]) for r in moved[:3])
    return out + [  # its own failure kind per measure: a headline each, named ("exposure MGU")
        GateFailure(
            f"{KEY} {_WORDS[name]}", attribute=d["field"], value=now, limit=s.tolerance,
            baseline=was, p_value=p, alpha=s.alpha, n_paired=cmp.n_paired,
            detail=f"exposure {_WORDS[name]} {was:.3f} -> {now:.3f}, worse by more than the "
            f"tolerance {s.tolerance:g} (paired entity bootstrap p = {p:.3g} over "
            f"{cmp.n_paired} entities; most over-exposed now: {names})",
        )
        for name, was, now, p in drifts(cmp, ex.DRIFT_MEASURES)
        if p < s.alpha
    ]  # fmt: skip


def _headline(d: Mapping[str, Any], measure: str) -> float:
    """A stored result's value of one of :data:`ex.DRIFT_MEASURES` (NaN: not measured)."""
    if measure != "max_lift":
        return json_nan(d["mgu" if measure == "mgu" else "long_tail"])
    return max((abs(x) for x in d["lift"] if x is not None), default=math.nan)


class ExposureSections:
    """The exposure kind's report sections."""

    def measure(self, result: AuditResult) -> str:
        return f"item exposure, top {getattr(result.meta, 'k', '?')}"

    def tables(self, d: Any) -> list[Table]:
        if not d:
            return []
        head = ["group", "share", "weighted", "reference", "ratio", "p (gap)"]
        rows = [
            [g, fmt(s) + fmt_pair(sc), fmt(w), fmt(r), fmt(q) + fmt_pair(qc), p_cell(p)]
            for g, s, sc, w, r, q, qc, p in zip(
                d["groups"], d["share"], d["share_ci"], d["weighted"], d["reference_share"],
                d["ratio"], d["ratio_ci"], d["p_gap"], strict=True,
            )
        ]  # fmt: skip
        lift = [
            [f"{a}: {v}", fmt(x) + fmt_pair(c), p_cell(p)]
            for (a, v), x, c, p in zip(
                d["values"], d["lift"], d["lift_ci"], d["p_lift"], strict=True
            )
            if x is not None
        ]
        m = d["matched"]
        tail = "" if d["long_tail"] is None else f", long-tail share {fmt(d['long_tail'])}"
        lead = (
            f"{d['field']} exposure vs {d['reference']}: MGU {fmt(d['mgu'])}"
            f"{fmt_pair(d['mgu_ci'])}, DGU {fmt(d['dgu'])}, Gini {fmt(d['gini'])}, coverage "
            f"{fmt(d['coverage'])}{tail}; {m['matched']} of {m['total']} titles matched the "
            "catalogue"
        )
        out = [Table(f"Item exposure: {d['field']}", head, rows, lead)]
        if lift:
            out.append(Table(f"Popularity lift: {d['field']}", ["value", "lift", "p"], lift))
        return out

    def brief(self, data: Any) -> str:
        gaps = [(abs(x), x, g) for g, x in zip(data["groups"], data["gap"], strict=True)
                if x is not None] if data else []  # fmt: skip
        if not gaps:
            return ""
        _, gap, group = max(gaps)
        return f"{data['field']}: largest exposure gap {gap:+.3f} ({group})"

    def series(self, data: Any) -> list[tuple[str, Stat]]:
        # lower is fairer on the history chart: MGU and DGU, not the long-tail share
        return [
            (f"{data['field']} exposure · {k.upper()}",
             Stat(json_nan(data[k]), Interval.from_obj(data[f"{k}_ci"])))
            for k in ("mgu", "dgu")
        ]  # fmt: skip

    def resolution(self, data: Any, settings: Any) -> list[tuple[str, float, int, int]]:
        """For the plan, what the drift gate tests: MGU (its SE from its interval), one of
        the measures the baseline measured (Holm); DGU is reported, not gated."""
        ci, n = Interval.from_obj(data["mgu_ci"]), int(data.get("n_entities") or 0)
        m = sum(not math.isnan(_headline(data, k)) for k in ex.DRIFT_MEASURES)
        if ci is None or n < 2:
            return []
        se = (ci.high - ci.low) / (2 * NormalDist().inv_cdf(0.975))
        return [(f"{data['field']} exposure · MGU", se, n, max(1, m))]

    def compare(
        self, a: AuditResult, b: AuditResult, *, tolerance: float, n_resamples: int, seed: int
    ) -> KindComparison:
        """MGU, long-tail share and max |lift|, B against A (paired entity bootstrap, Holm);
        results without per-entity counts or with other groups: their numbers, no test."""
        was, now = a.extras[KEY], b.extras[KEY]
        what = (str(now["field"]), f"exposure vs {now['reference']}")
        cmp = _paired(was, now, n_resamples=n_resamples, seed=seed, margin=tolerance)
        if cmp is None:
            rows = [
                KindRow(*what, _WORDS[m], _headline(was, m), _headline(now, m), None, 0)
                for m in ex.DRIFT_MEASURES
                if not (math.isnan(_headline(was, m)) and math.isnan(_headline(now, m)))
            ]
            why = f"{now['field']}: no test (per-entity counts missing, or other groups or values)"
            return KindComparison(tuple(rows), "no test", (why,))
        rows = [
            KindRow(*what, _WORDS[m], was, now, p, cmp.n_paired)
            for m, was, now, p in drifts(cmp, ex.DRIFT_MEASURES)
            if math.isfinite(p)
        ]
        notes = () if was["reference"] == now["reference"] else (
            f"A's reference was {was['reference']}; both runs measured against B's",
        )  # fmt: skip
        return KindComparison(tuple(rows), "paired entity bootstrap, Holm", notes)

    def properties(self, data: Any) -> list[tuple[str, float | int | str]]:
        if not data:
            return []
        names = ("mgu", "dgu", "gini", "coverage", "long_tail")
        return [(prop_key(KEY, data["field"], n), data[n]) for n in names if data[n] is not None]


class ExposureAudit(ListKind):
    """Item exposure and popularity bias, scored over all entities."""

    name = KEY
    sections = ExposureSections()

    check_catalogue = staticmethod(setup)
    score = staticmethod(_score)

    def failures(
        self, settings: AuditSettings, result: AuditResult, baseline: AuditResult | None
    ) -> tuple[GateFailure, ...]:
        d, before = result.extras.get(KEY), baseline.extras.get(KEY) if baseline else None
        if not d:
            return ()
        return tuple(_failures(settings, d, before))


EXPOSURE = ExposureAudit()
