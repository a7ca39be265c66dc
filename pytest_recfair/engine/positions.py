"""The candidate-position audit (LRWorld): does where a candidate stands move the pick?
Every group is asked with the same seeded ``orders`` of the candidates; gates need a limit
crossed AND significant; baseline drift is a paired entity bootstrap over per-entity counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pytest_recfair.engine.base import (
    AuditInputs,
    PooledKind,
    Scored,
    attributes_of,
    drifts,
    prop_key,
)
from pytest_recfair.engine.items import paired_runs, rounded
from pytest_recfair.engine.overlap.evidence import SHOW, reply_text
from pytest_recfair.errors import ConfigError
from pytest_recfair.metrics.positions import (
    DRIFT_MEASURES,
    MEASURES,
    PositionComparison,
    compare_positions,
    group_tables,
    position_bias,
)
from pytest_recfair.prompts.candidates import CandidateCase, build_candidate_cases, read_pick
from pytest_recfair.prompts.grids import Grid
from pytest_recfair.prompts.seeds import Entity
from pytest_recfair.report.fmt import Table, fmt, fmt_pair, p_cell, p_text
from pytest_recfair.report.sections import KindComparison, KindRow
from pytest_recfair.results import AuditResult, GateFailure, Interval, Stat, json_nan
from pytest_recfair.settings import AuditSettings

KEY = "positions"
_WORDS = {"bias": "position bias", "missed": "missed rate"}
NEUTRAL = "(neutral)"


class PositionSections:
    """The candidate-position kind's report sections."""

    def measure(self, result: AuditResult) -> str:
        sizes = {a.get("k") for a in _attributes(result)}
        shown = f" of {sizes.pop()}" if len(sizes) == 1 else ""
        return f"candidate position (one pick{shown})"

    def brief(self, data: Any) -> str:
        return "; ".join(
            f"{res['attribute']}: position bias {fmt(res['pooled_bias'])}"
            for res in _attributes(data)
        )

    def tables(self, data: Any) -> list[Table]:
        out = []
        for res in _attributes(data):
            names = list(res["measures"])
            head = ["group", "first-position rate", *names, *(f"p {n}" for n in names), "picks"]
            rows = [
                [g, fmt(res["curve"][i][0]),
                 *(fmt(res["measures"][n][i]) + fmt_pair(res["measures_ci"][n][i]) for n in names),
                 *("—" if i == 0 else p_cell(res["p_adjusted"][n][i - 1]) for n in names),
                 str(res["n_picks"][i])]
                for i, g in enumerate(res["groups"])
            ]  # fmt: skip
            curve = [
                [g, *map(fmt, row)] for g, row in zip(res["groups"], res["curve"], strict=True)
            ]
            lead = (
                f"candidate position bias {fmt(res['pooled_bias'])}"
                f"{fmt_pair(res['pooled_bias_ci'])} (uniformity p {p_text(res['p_uniform'])}), "
                f"chi2 {fmt(res['chi2'])}; {res['n_entities']} entities"
            )
            differing = ", ".join(
                f"{g} ({name})" for name in names
                for g, pv in zip(res["groups"][1:], res["p_adjusted"][name], strict=True)
                if pv is not None and pv < 0.05
            )  # fmt: skip
            note = f"groups differing from neutral (family-wise p < 0.05): {differing or 'none'}"
            out += [
                Table(f"Candidate position: {res['attribute']}", head, rows, lead, [note]),
                Table(f"Share of picks at each shown position: {res['attribute']}",
                      ["group", *(f"#{j + 1}" for j in range(res["k"]))], curve),
            ]  # fmt: skip
        return out

    def series(self, data: Any) -> list[tuple[str, Stat]]:
        return [
            (f"{res['attribute']} · position bias",
             Stat(json_nan(res["pooled_bias"]), Interval.from_obj(res["pooled_bias_ci"])))
            for res in _attributes(data)
        ]  # fmt: skip

    def compare(
        self, a: AuditResult, b: AuditResult, *, tolerance: float, n_resamples: int, seed: int
    ) -> KindComparison:
        """Pooled bias and missed rate, B against A (paired entity bootstrap, Holm); without
        per-entity counts or with another K: its bias, no test."""
        pairs, notes = paired_runs(_attributes(a), _attributes(b), lambda r: r["attribute"])
        rows: list[KindRow] = []
        for was, res in pairs:
            cmp = _paired(was, res, n_resamples=n_resamples, seed=seed, margin=tolerance)
            what = (res["attribute"], f"pick of {res['k']}")
            if cmp is None:  # a stored result without per-entity counts: the numbers only
                bias = (json_nan(was["pooled_bias"]), json_nan(res["pooled_bias"]))
                rows.append(KindRow(*what, "position bias", *bias, None, 0))
                notes.append(f"{what[0]}: no test (per-entity counts missing, or another K)")
                continue
            rows += [
                KindRow(*what, _WORDS[n], was, now, p, cmp.n_paired)
                for n, was, now, p in drifts(cmp, DRIFT_MEASURES)
            ]
        return KindComparison.holm(rows, "paired entity bootstrap", notes)

    def properties(self, data: Any) -> list[tuple[str, float | int | str]]:
        return [
            (f"{prop_key(res['attribute'])}.{name}", value)
            for res in _attributes(data)
            for name, value in (
                ("position_bias", res["pooled_bias"]), ("p_uniform", res["p_uniform"]),
                ("missed", res["measures"]["missed"][0]),
                ("consistency", res["measures"]["consistency"][0]),
            )
            if value is not None
        ]  # fmt: skip


def _score(
    settings: AuditSettings,
    inputs: AuditInputs,
    cases: Sequence[CandidateCase],
    completions: Mapping[str, Any],
) -> Scored:
    out, shown = [], {}
    for attr in attributes_of(cases):
        mine = [c for c in cases if c.attribute in (None, attr)]
        out.append(_score_attribute(settings, mine, completions, attr))
        by_entity: dict[str, list[CandidateCase]] = {}
        for c in mine:
            by_entity.setdefault(c.entity_id, []).append(c)
        rows = sorted((_row(group, completions) for group in by_entity.values()),
                      key=lambda r: (-r[0], r[1]))  # fmt: skip
        if rows:
            shown[attr] = {
                "what": f"the {min(SHOW, len(rows))} of {len(rows)} entities whose pick followed "
                "the position most: share of picks that took the candidate shown first (uniform: "
                f"1/{len(mine[0].shown)}), every group and order",
                "rows": [r[2] for r in rows[:SHOW]],
            }
    return Scored((), 0, {KEY: {"attributes": out}}, evidence=shown)


def _score_attribute(
    settings: AuditSettings,
    mine: Sequence[CandidateCase],
    completions: Mapping[str, Any],
    attribute: str,
) -> dict[str, Any]:
    """One attribute's results from its and the neutral prompts' cases (``mine``)."""
    entities = list(dict.fromkeys(c.entity_id for c in mine))
    groups = [NEUTRAL, *dict.fromkeys(c.value for c in mine if c.value is not None)]
    k = len(mine[0].order)
    E, G, P = len(entities), len(groups), settings.orders
    pos, cho = np.full((2, E, G, P), -2, dtype=np.int64)  # -2: not asked or failed
    orders = np.zeros((E, P, k), dtype=np.int64)
    e_at = {e: i for i, e in enumerate(entities)}
    g_at = {g: i for i, g in enumerate(groups)}
    for c in mine:
        e, g, p = e_at[c.entity_id], g_at[c.value or NEUTRAL], c.order_index
        orders[e, p] = c.order
        completion = completions.get(c.id)
        if completion is None:
            continue  # a failed request: no pick, never a "missed" one
        at = read_pick(completion.text, c.shown, c.style)
        pos[e, g, p] = -1 if at is None else at
        cho[e, g, p] = -1 if at is None else c.order[at]
    n = settings.n_resamples
    r = position_bias(pos, cho, k, orders=orders, groups=tuple(groups), n_permutations=n,
                      n_resamples=n, seed=settings.seed)  # fmt: skip
    hist, _ = group_tables(pos, cho, k)
    return {
        "attribute": attribute, "groups": list(r.groups), "k": r.k, "curve": rounded(r.curve),
        **{name: {m: rounded(getattr(r, name)[:, i]) for i, m in enumerate(MEASURES)}
           for name in ("measures", "measures_ci", "p_adjusted")},
        **{n: rounded(getattr(r, n))
           for n in ("pooled_bias", "pooled_bias_ci", "chi2", "p_uniform")},
        "n_picks": [int(x) for x in r.n_picks], "n_entities": r.n_entities, "entities": entities,
        "entity_counts": hist.sum(axis=1).astype(np.int64).tolist(),  # for the baseline gate
    }  # fmt: skip


def _failures(
    settings: AuditSettings, res: Mapping[str, Any], before: Mapping[str, Any] | None
) -> list[GateFailure]:
    attr, alpha, tol = res["attribute"], settings.alpha, settings.tolerance
    out: list[GateFailure] = []

    def fail(value: float, limit: float | None, p: float | None, detail: str, ci: Any,
             **more: Any) -> None:  # fmt: skip
        out.append(GateFailure("position", attribute=attr, value=value, limit=limit, p_value=p,
                               alpha=alpha, detail=detail, value_ci=Interval.from_obj(ci),
                               **more))  # fmt: skip

    bias, p_uni, limit = res["pooled_bias"], res["p_uniform"], settings.max_position_bias
    if limit is not None and bias is not None and bias > limit and (p_uni or 1.0) < alpha:
        fail(bias, limit, p_uni, f"candidate position bias {bias:.3f} (distance of the pick "
             f"positions from uniform) > max_position_bias {limit:g} (p = {p_uni:.3g})",
             res["pooled_bias_ci"])  # fmt: skip
    most, m_ci = settings.max_missed_rate, (res["measures"]["missed"], res["measures_ci"]["missed"])
    for g, m, ci in zip(res["groups"], *m_ci, strict=True):
        if most is not None and m is not None and m > most:
            fail(m, most, None, f"{g}: missed rate {m:.3f} (no valid candidate picked) > "
                 f"max_missed_rate {most:g}", ci, group=g)  # fmt: skip
    for name in MEASURES:
        values, cis = res["measures"][name], res["measures_ci"][name]
        for i, (g, p) in enumerate(zip(res["groups"][1:], res["p_adjusted"][name], strict=True)):
            v = values[i + 1]
            diff = None if v is None or values[0] is None else v - values[0]
            if diff is not None and p is not None and p < alpha and abs(diff) > tol:
                # bound "tol": the tolerance on the difference from neutral
                fail(v, tol, p, f"{g}: {name} {v:.3f} differs from the neutral prompt's "
                     f"{values[0]:.3f} (family-wise p = {p:.3g})", cis[i + 1], group=g,
                     bound="tol")  # fmt: skip
    # drift: pooled bias / missed rate risen by more than the tolerance on shared entities
    # (incompatible baselines are reported by the baseline layer)
    cmp = _paired(before or {}, res, n_resamples=settings.n_resamples, seed=settings.seed,
                  margin=tol)  # fmt: skip
    n = 0 if cmp is None else cmp.n_paired
    for name, was, now, p in [] if cmp is None else drifts(cmp, DRIFT_MEASURES):
        if np.isfinite(now - was) and now - was > tol and p < alpha:
            fail(now, tol, p, f"pooled position {name} {was:.3f} -> {now:.3f} rose by more than "
                 f"the tolerance {tol:g} (paired entity bootstrap p = {p:.3g} over {n} "
                 "entities)", None, baseline=was, n_paired=n)  # fmt: skip
    return out


def _paired(
    before: Mapping[str, Any], res: Mapping[str, Any], **test: Any
) -> PositionComparison | None:
    """``compare_positions`` on shared entities; None without counts, other K or < 2 shared."""
    if "entity_counts" not in before or "entity_counts" not in res or before["k"] != res["k"]:
        return None
    row = {e: i for i, e in enumerate(before["entities"])}
    shared = [(row[e], i) for i, e in enumerate(res["entities"]) if e in row]
    if len(shared) < 2:
        return None
    b = np.asarray([before["entity_counts"][j] for j, _ in shared], dtype=np.float64)
    c = np.asarray([res["entity_counts"][i] for _, i in shared], dtype=np.float64)
    return compare_positions(b, c, **test)


def _attributes(data: Any) -> list[Mapping[str, Any]]:
    """The per-attribute results of ``extras["positions"]`` (``data`` an AuditResult: its)."""
    if isinstance(data, AuditResult):
        data = data.extras.get(KEY)
    return list((data or {}).get("attributes", ()))


class PositionAudit(PooledKind):
    """The LRWorld candidate-position audit, scored over all entities."""

    name = KEY
    # the input files the plugin checks before any test runs (plugin/collection.py)
    named_inputs = ("candidates",)
    sections = PositionSections()

    def build_cases(
        self, settings: AuditSettings, grid: Grid, entities: Sequence[Entity], inputs: AuditInputs
    ) -> list[CandidateCase]:
        if inputs.candidates is None:
            raise ConfigError(
                f"@fairness(candidates={settings.candidates!r}) gave no candidate lists"
            )
        return build_candidate_cases(
            grid, list(entities), inputs.candidates, style=settings.pick, orders=settings.orders,
            domain=settings.domain, seed=settings.seed,
            attributes=None if settings.attr is None else [settings.attr],
        )  # fmt: skip

    score = staticmethod(_score)

    def failures(
        self, settings: AuditSettings, result: AuditResult, baseline: AuditResult | None
    ) -> tuple[GateFailure, ...]:
        before = {r["attribute"]: r for r in _attributes(baseline)}
        return tuple(
            f
            for res in _attributes(result)
            for f in _failures(settings, res, before.get(res["attribute"]))
        )


POSITIONS = PositionAudit()


def _row(
    cases: Sequence[CandidateCase], completions: Mapping[str, Any]
) -> tuple[float, str, dict[str, Any]]:
    lists: dict[str, dict[str, Any]] = {}
    first = picks = 0
    for c in sorted(cases, key=lambda c: (c.value is not None, c.value or "", c.order_index)):
        text = getattr(completions.get(c.id), "text", None)
        label = c.value or "neutral"  # the evidence rows' label (the report's words)
        entry = lists.setdefault(label, {"label": label, "titles": [], "reply": ""})
        if text is None:
            entry["titles"].append(f"order {c.order_index + 1}: no reply (failed)")
            continue
        at = read_pick(text, c.shown, c.style)
        picks += 1
        first += at == 0
        missed = "missed (no candidate named)"
        picked = missed if at is None else f"{c.shown[at]} (shown {at + 1} of {len(c.shown)})"
        entry["titles"].append(f"order {c.order_index + 1}: {picked}")
        entry["reply"] += (
            f"order {c.order_index + 1} [{' / '.join(c.shown)}]:\n{reply_text(text)}\n\n"
        )
    share = first / picks if picks else 0.0
    why = f"took the first-shown candidate in {first} of {picks} picks ({share:.0%})"
    row = {"entity": cases[0].entity, "score": share, "why": why, "lists": list(lists.values())}
    return share, cases[0].entity_id, row
