"""How every report format shows item-side results (``extras["items"]``): coverage of the
catalogue, each group's category shares, each value's shift from the neutral prompt with
its interval and family-wise p-value (see ``report/sections.py`` for the design)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pytest_recfair.report.fmt import esc, fmt, fmt_pair, p_cell, p_text, table
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


def _shifted(f: Mapping[str, Any]) -> tuple[str, str] | None:
    """(most, least) shifted group from neutral, or None without a measured shift."""
    pairs = [(s, g) for s, g in zip(f["shift"], f["groups"][1:], strict=True) if s is not None]
    return (max(pairs)[1], min(pairs)[1]) if pairs else None


def _between(f: Mapping[str, Any]) -> str | None:
    """ "A 0.041 (p 0.002) · B 0.041 (p 0.002)": each group against the others."""
    between, ps = f.get("between") or [], f.get("p_between") or []
    if not between or all(b is None for b in between):
        return None
    cells = [
        f"{g} {fmt(b)} (p {p_text(p)})"
        for g, b, p in zip(f["groups"][1:], between, ps, strict=True)
    ]
    return "each group vs the others (family-wise): " + " · ".join(cells)


def _field_table(f: Mapping[str, Any]) -> str:
    head = ["group", *(f"{c} share" for c in f["categories"]), "items", "shift [95% CI]", "p"]
    between, ps = f.get("between") or [], f.get("p_between") or []
    head += ["vs others", "p (vs others)"] if between else []
    rows = []
    for i, (g, shares) in enumerate(zip(f["groups"], f["shares"], strict=True)):
        shift = "—" if i == 0 else fmt(f["shift"][i - 1]) + fmt_pair(f["shift_ci"][i - 1])
        p = "—" if i == 0 else p_cell(f["p_adjusted"][i - 1])
        row = [g, *(fmt(x) for x in shares), str(f["n_items"][i]), shift, p]
        if between:
            row += ["—", "—"] if i == 0 else [fmt(between[i - 1]), p_cell(ps[i - 1])]
        rows.append(row)
    return table(head, rows)


class ItemSections:
    """The item-side kind's report sections."""

    def measure(self, result: AuditResult) -> str:
        return f"item side, top {getattr(result.meta, 'k', '?')}"

    def lines(self, data: Any) -> list[str]:
        out: list[str] = []
        for res in _attributes(data):
            out.append(f"{res['attribute']}: {_coverage(res)}")
            for f in res["fields"]:
                out.append(f"{res['attribute']} · {f['field']}: {_largest(f)}")
                shifted, between = _shifted(f), _between(f)
                if shifted is not None:
                    out.append(f"  most / least shifted from neutral: {shifted[0]} / {shifted[1]}")
                if between is not None:
                    out.append(f"  {between}")
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
                    "prompt's; p: family-wise permutation test; vs others: the group's shares "
                    "against the attribute's other groups')</p>" + _field_table(f)
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
                shifted = _shifted(f)
                if shifted is not None:
                    out += [
                        (f"{name}.most_shifted", shifted[0]),
                        (f"{name}.least_shifted", shifted[1]),
                    ]
                if f.get("p_between"):
                    out.append((f"{name}.min_p_between", min(f["p_between"])))
        return out
