"""Plain-text lines for the results of other kinds of audit (item-side, candidate position),
shared by the terminal summary and the Markdown and HTML reports."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_recfair.report.fmt import fmt, fmt_p
from pytest_recfair.results import AuditResult

__all__ = ["extra_lines"]


def _p(p: float | None) -> str:
    return "n/a" if p is None else fmt_p(p)


def _ci(pair: Any) -> str:
    if not pair or pair[0] is None or pair[1] is None:
        return ""
    return f" [{fmt(pair[0])}, {fmt(pair[1])}]"


def _item_lines(res: Mapping[str, Any]) -> list[str]:
    cov = res["coverage"]
    share = cov["matched"] / cov["total"] if cov["total"] else 0.0
    unmatched = ", ".join(cov["unmatched_examples"][:3])
    out = [
        f"{res['attribute']}: catalogue matched {share:.0%} of {cov['total']} titles"
        + (f" (unmatched e.g. {unmatched})" if unmatched else "")
    ]
    for f in res["fields"]:
        groups, shifts, ps = f["groups"][1:], f["shift"], f["p_adjusted"]
        top = max(range(len(groups)), key=lambda i: shifts[i] or 0.0) if groups else None
        where = f" ({groups[top]}, family-wise p {_p(ps[top])})" if top is not None else ""
        out.append(
            f"{res['attribute']} · {f['field']}: largest shift from neutral "
            f"{fmt(f['max_shift'])}{_ci(f['max_shift_ci'])}{where}"
        )
        shares = " · ".join(
            f"{g} " + "/".join(fmt(x) for x in row)
            for g, row in zip(f["groups"], f["shares"], strict=True)
        )
        out.append(f"  {'/'.join(f['categories'])} shares: {shares}")
    return out


def _position_lines(res: Mapping[str, Any]) -> list[str]:
    m, p = res["measures"], res["p_adjusted"]
    differ = [
        f"{g} ({name})"
        for name in m
        for g, pv in zip(res["groups"][1:], p[name], strict=True)
        if pv is not None and pv < 0.05
    ]
    return [
        f"{res['attribute']}: candidate position bias {fmt(res['pooled_bias'])}"
        f"{_ci(res['pooled_bias_ci'])} (uniformity p {_p(res['p_uniform'])}); neutral: "
        f"first-position rate {fmt(res['curve'][0][0])}, missed {fmt(m['missed'][0])}, "
        f"consistency {fmt(m['consistency'][0])}",
        f"  groups differing from neutral (family-wise p < 0.05): {', '.join(differ) or 'none'}",
    ]


def extra_lines(r: AuditResult) -> list[str]:
    """Lines describing ``r.extras`` (empty for a list-overlap audit)."""
    out: list[str] = []
    for res in (r.extras.get("items") or {}).get("attributes", ()):
        out += _item_lines(res)
    for res in (r.extras.get("positions") or {}).get("attributes", ()):
        out += _position_lines(res)
    return out
