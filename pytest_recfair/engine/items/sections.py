"""How every report format shows item-side results (``extras["items"]``): coverage of the
catalogue, each group's category shares, each value's shift from the neutral prompt with
its interval and family-wise p-value (see ``report/sections.py`` for the design)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pytest_recfair.report.fmt import fmt, fmt_pair, p_cell, p_text
from pytest_recfair.report.htmlkit import esc, table
from pytest_recfair.results import AuditResult

__all__ = ["KEY", "ItemSections"]

#: The key of the item-side results in ``AuditResult.extras`` (the kind's name).
KEY: Final = "items"


def _attributes(data: Any) -> list[Mapping[str, Any]]:
    return list((data or {}).get("attributes", ()))


def _coverage(res: Mapping[str, Any]) -> str:
    cov = res["coverage"]
    share = cov["matched"] / cov["total"] if cov["total"] else 0.0
    unmatched = ", ".join(cov["unmatched_examples"][:3])
    return f"catalogue matched {share:.0%} of {cov['total']} titles" + (
        f" (unmatched e.g. {unmatched})" if unmatched else ""
    )


def _largest(f: Mapping[str, Any]) -> str:
    groups, shifts, ps = f["groups"][1:], f["shift"], f["p_adjusted"]
    top = max(range(len(groups)), key=lambda i: shifts[i] or 0.0) if groups else None
    where = f" ({groups[top]}, family-wise p {p_text(ps[top])})" if top is not None else ""
    return f"largest shift from neutral {fmt(f['max_shift'])}{fmt_pair(f['max_shift_ci'])}{where}"


def _field_table(f: Mapping[str, Any]) -> str:
    head = ["group", *(f"{c} share" for c in f["categories"]), "items", "shift [95% CI]", "p"]
    rows = []
    for i, (g, shares) in enumerate(zip(f["groups"], f["shares"], strict=True)):
        shift = "—" if i == 0 else fmt(f["shift"][i - 1]) + fmt_pair(f["shift_ci"][i - 1])
        p = "—" if i == 0 else p_cell(f["p_adjusted"][i - 1])
        rows.append([g, *(fmt(x) for x in shares), str(f["n_items"][i]), shift, p])
    return table(head, rows)


class ItemSections:
    """The item-side kind's report sections."""

    def measure(self, result: AuditResult) -> str:
        return f"item side, top {result.meta.k}"

    def lines(self, data: Any) -> list[str]:
        out: list[str] = []
        for res in _attributes(data):
            out.append(f"{res['attribute']}: {_coverage(res)}")
            for f in res["fields"]:
                out.append(f"{res['attribute']} · {f['field']}: {_largest(f)}")
                shares = " · ".join(
                    f"{g} " + "/".join(fmt(x) for x in row)
                    for g, row in zip(f["groups"], f["shares"], strict=True)
                )
                out.append(f"  {'/'.join(f['categories'])} shares: {shares}")
        return out

    def html(self, data: Any) -> str:
        parts = []
        for res in _attributes(data):
            parts.append(
                f'<h3>Item side: {esc(res["attribute"])}</h3><p class="sub">'
                f"{esc(_coverage(res))}</p>"
            )
            for f in res["fields"]:
                parts.append(
                    f"<p><b>{esc(f['field'])}</b>: {esc(_largest(f))} (shift: total "
                    "variation distance of the group's category shares from the neutral "
                    "prompt's; p: family-wise permutation test)</p>" + _field_table(f)
                )
        return f'<div class="kind items">{"".join(parts)}</div>'

    def properties(self, data: Any) -> list[tuple[str, float | int | str]]:
        out: list[tuple[str, float | int | str]] = []
        for res in _attributes(data):
            key = "recfair." + str(res["attribute"]).casefold().replace(" ", "_")
            cov = res["coverage"]
            out.append(
                (
                    f"{key}.coverage",
                    round(cov["matched"] / cov["total"], 6) if cov["total"] else 0.0,
                )
            )
            for f in res["fields"]:
                name = f"{key}.{str(f['field']).casefold().replace(' ', '_')}"
                if f["max_shift"] is not None:
                    out.append((f"{name}.max_shift", f["max_shift"]))
                if f["p_adjusted"]:
                    out.append((f"{name}.min_p", min(f["p_adjusted"])))
        return out
