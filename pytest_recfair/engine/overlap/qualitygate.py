"""Quality beside fairness: the list-overlap kind's sections and gate for its quality.

The data is ``extras["overlap"]["quality"]`` (:func:`.quality.quality_results`). Three
checks, each off unless set or a baseline exists:

- ``min_quality``: every group's quality must reach it; when no group does, one failure
  says the model recommends equally badly for everyone (fair but useless);
- ``max_quality_gap``: per attribute, best minus worst value's quality;
- drift: per group and overall, a paired one-sided t-test (entities both runs scored) of
  a drop larger than ``quality_tolerance``, Holm-adjusted over the members, at ``alpha``.
  A significant drop of the overall quality with every group down is the fair-but-useless
  failure against a baseline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_recfair.metrics import quality as mq
from pytest_recfair.report.fmt import esc, fmt, fmt_p, table
from pytest_recfair.results import GateFailure, Interval
from pytest_recfair.settings import AuditSettings

__all__ = ["OVERALL", "quality_failures", "quality_html", "quality_lines", "quality_properties"]

OVERALL = "overall"
_USELESS = "the model recommends equally badly for every group: fair but useless"


def _what(q: Mapping[str, Any]) -> str:
    k = q["k"]
    if q["basis"] == "catalogue":
        src = f" ({q['catalogue']})" if q.get("catalogue") else ""
        return f"share of the {k} slots holding a title of the entity's catalogue{src}"
    return f"share of the {k} slots holding a valid list item (no catalogue)"


def _ci(ci: Sequence[float] | None) -> str:
    return f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""


def _interval(ci: Sequence[float] | None) -> Interval | None:
    return None if not ci else Interval(float(ci[0]), float(ci[1]))


# -- sections ---------------------------------------------------------------------------


def quality_lines(q: Mapping[str, Any] | None) -> list[str]:
    """Neutral and, per attribute, its worst and best value and the gap (every group is
    in the HTML table, the JSON report and the JUnit properties)."""
    if not q:
        return []

    def cell(g: Mapping[str, Any]) -> str:
        return f"{fmt(g['quality'])}{_ci(g['ci'])}"

    by = {str(g["group"]): g for g in q["groups"]}
    neutral = by.get("neutral")
    head = f"quality ({_what(q)}): overall {fmt(q['overall'])}"
    if neutral is not None:
        head += f"; neutral {cell(neutral)}, {fmt(neutral['length'], 1)} items"
    out = [head]
    for a in q["attributes"]:
        name = a["attribute"]
        mine = [g for k, g in by.items() if k.startswith(f"{name}=") and g["quality"] is not None]
        if not mine:
            continue
        worst = min(mine, key=lambda g: g["quality"])
        best = max(mine, key=lambda g: g["quality"])
        out.append(
            f"  {name}: lowest {worst['group'].partition('=')[2]} {cell(worst)}, "
            f"{fmt(worst['length'], 1)} items; highest {best['group'].partition('=')[2]} "
            f"{cell(best)}; gap {fmt(a['gap'])}{_ci(a['gap_ci'])}"
        )
    if q.get("without_items"):
        out.append(f"  {q['without_items']} entities have no item in the catalogue (left out)")
    return out


def quality_html(q: Mapping[str, Any] | None) -> str:
    if not q:
        return ""
    gaps = {a["attribute"]: a for a in q["attributes"]}
    rows = [
        [
            str(g["group"]),
            fmt(g["quality"]) + _ci(g["ci"]),
            fmt(g["valid"]),
            fmt(g["length"], 1),
            str(g["n"]),
        ]
        for g in q["groups"]
    ]
    rows += [[f"{a} gap", fmt(x["gap"]) + _ci(x["gap_ci"]), "", "", ""] for a, x in gaps.items()]
    head = ["group", "quality [95% CI]", "valid share", "list length", "entities"]
    return (
        f"<h3>Recommendation quality</h3><p>{esc(_what(q))}; overall "
        f"{esc(fmt(q['overall']))}</p>" + table(head, rows)
    )


def quality_properties(q: Mapping[str, Any] | None) -> list[tuple[str, float | int | str]]:
    if not q:
        return []
    out: list[tuple[str, float | int | str]] = [("recfair.quality.basis", str(q["basis"]))]
    if q["overall"] is not None:
        out.append(("recfair.quality.overall", float(q["overall"])))
    for g in q["groups"]:
        if g["quality"] is not None:
            out.append((f"recfair.quality.{g['group']}", float(g["quality"])))
    for a in q["attributes"]:
        if a["gap"] is not None:
            out.append((f"recfair.{a['attribute']}.quality_gap", float(a["gap"])))
    return out


# -- gate -------------------------------------------------------------------------------


def quality_failures(
    settings: AuditSettings, q: Mapping[str, Any] | None, base: Mapping[str, Any] | None
) -> tuple[GateFailure, ...]:
    """The quality checks of one result (``base``: the baseline's quality, or None)."""
    if not q:
        return ()
    out = [*_minimum(settings.min_quality, q), *_gaps(settings.max_quality_gap, q)]
    if base and base.get("basis") == q["basis"] and base.get("k") == q["k"]:
        out += _drift(settings, q, base)
    return tuple(out)


def _minimum(limit: float | None, q: Mapping[str, Any]) -> list[GateFailure]:
    if limit is None:
        return []
    measured = [g for g in q["groups"] if g["quality"] is not None]
    low = [g for g in measured if g["quality"] < limit]
    if not low:
        return []
    if len(low) == len(measured):
        lo, hi = min(g["quality"] for g in low), max(g["quality"] for g in low)
        detail = (
            f"recommendation quality is below min_quality {limit:g} for every group alike "
            f"({fmt(lo)} to {fmt(hi)}, {_what(q)}): {_USELESS}; its fairness figures say "
            f"nothing about a model that recommends nothing useful"
        )
        return [GateFailure("min_quality", None, value=q["overall"], detail=detail)]
    neutral = next((g["quality"] for g in measured if g["group"] == "neutral"), None)
    return [
        GateFailure(
            "min_quality",
            str(g["group"]).partition("=")[0] if "=" in g["group"] else None,
            value=g["quality"],
            value_ci=_interval(g["ci"]),
            group=str(g["group"]),
            detail=(
                f"quality of {g['group']} {fmt(g['quality'])}{_ci(g['ci'])} is below "
                f"min_quality {limit:g} (neutral {fmt(neutral)}; {_what(q)})"
            ),
        )
        for g in low
    ]


def _gaps(limit: float | None, q: Mapping[str, Any]) -> list[GateFailure]:
    if limit is None:
        return []
    out = []
    for a in q["attributes"]:
        if a["gap"] is None or a["gap"] <= limit:
            continue
        mine = [g for g in q["groups"] if str(g["group"]).startswith(a["attribute"] + "=")]
        mine = [g for g in mine if g["quality"] is not None]
        best = max(mine, key=lambda g: g["quality"])
        worst = min(mine, key=lambda g: g["quality"])
        detail = (
            f"quality gap {fmt(a['gap'])}{_ci(a['gap_ci'])} between {best['group']} "
            f"({fmt(best['quality'])}) and {worst['group']} ({fmt(worst['quality'])}) is "
            f"above max_quality_gap {limit:g}: some groups get worse recommendations"
        )
        out.append(
            GateFailure(
                "max_quality_gap",
                a["attribute"],
                value=a["gap"],
                limit=limit,
                value_ci=_interval(a["gap_ci"]),
                group=f"{best['group']} / {worst['group']}",
                detail=detail,
            )
        )
    return out


def _members(q: Mapping[str, Any]) -> dict[str, dict[str, float | None]]:
    """group -> entity -> quality, plus the overall member (each entity's group mean)."""
    entities = list(q["entities"])
    out = {g: dict(zip(entities, xs, strict=True)) for g, xs in q["scores"].items()}
    overall: dict[str, float | None] = {}
    for i, e in enumerate(entities):
        xs = [v[i] for v in q["scores"].values() if v[i] is not None]
        overall[e] = sum(xs) / len(xs) if xs else None
    out[OVERALL] = overall
    return out


def _drift(
    settings: AuditSettings, q: Mapping[str, Any], base: Mapping[str, Any]
) -> list[GateFailure]:
    tol, alpha = settings.quality_tolerance, settings.alpha
    drops = mq.drift(_members(base), _members(q), tolerance=tol)
    failing = [d for d in drops if d.p_value < alpha and d.delta < -tol]
    if not failing:
        return []
    groups = [d for d in drops if d.member != OVERALL]
    everyone = any(d.member == OVERALL for d in failing) and all(d.delta < -tol for d in groups)

    def failure(d: mq.Drop, detail: str) -> GateFailure:
        attr = d.member.partition("=")[0] if "=" in d.member else None
        return GateFailure(
            "quality_drift",
            attr,
            value=d.value,
            limit=tol,
            baseline=d.baseline,
            p_value=d.p_value,
            alpha=alpha,
            n_paired=d.n_paired,
            group=None if d.member == OVERALL else d.member,
            detail=detail,
        )

    def change(d: mq.Drop) -> str:
        return (
            f"{fmt(d.baseline)} -> {fmt(d.value)} ({d.delta:+.3f}, tolerance {tol:g}; "
            f"family-wise p {fmt_p(d.p_value)} over {d.n_paired} entities)"
        )

    if everyone:
        d = next(d for d in failing if d.member == OVERALL)
        detail = (
            f"recommendation quality fell for every group alike: {change(d)}, {_what(q)}; "
            f"the lists may be as fair as the baseline's, but {_USELESS}"
        )
        return [failure(d, detail)]
    named = [d for d in failing if d.member != OVERALL]
    # the overall member is worded only when no single group explains its drop
    return [
        failure(d, f"{_member(d.member)} fell against the baseline: {change(d)}, {_what(q)}")
        for d in (named or failing)
    ]


def _member(member: str) -> str:
    return "quality (mean over the groups)" if member == OVERALL else f"quality of {member}"
