"""How every report format shows role-play results (``extras["roleplay"]``): the biased
question rate per attribute x question type with its Wilson interval (the paper's Table 2;
Table 3 without the role), the worst roles with their biased questions and answers, and
the role effect when asked (see ``report/sections.py`` for the design)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pytest_recfair.report.fmt import esc, fmt, fmt_pair, p_text, table
from pytest_recfair.results import AuditResult

__all__ = ["KEY", "LABELS", "RoleplaySections"]

#: The key of the role-play results in ``AuditResult.extras`` (the kind's name).
KEY: Final = "roleplay"
#: The paper's spelling of each question type.
LABELS: Final = {"yesno": "Yes/No", "choice": "Choice", "why": "Why"}


def _condition(cell: Mapping[str, Any]) -> str:
    return "" if cell["with_role"] else " (without role)"


def _cell_text(cell: Mapping[str, Any]) -> str:
    return (
        f"biased {cell['biased']}/{cell['n']} = {fmt(cell['rate'])}"
        f"{fmt_pair([cell['low'], cell['high']])}; refusals {cell['refusals']} of "
        f"{cell['rounds']} answers, failed {cell['failed']}, unusable {cell['unusable']}, "
        f"undetermined questions {cell['undetermined']}"
    )


def _head(data: Mapping[str, Any]) -> str:
    why = data.get("why_not_asked") or 0
    note = f"; {why} Why questions not asked (no judge configured)" if why else ""
    return (
        f"{data['source']}: {data['asked']} questions x {data['rounds']} rounds, "
        f"{data['oracle']} oracle{note}"
    )


def _role_text(r: Mapping[str, Any]) -> str:
    return (
        f"{r['role']} ({r['attribute']}) {fmt(r['rate'])}{fmt_pair([r['low'], r['high']])} "
        f"({r['biased']}/{r['n']})"
    )


def _effect_text(e: Mapping[str, Any]) -> str:
    t = e["total"]
    red = "—" if t["reduction"] is None else f"{t['reduction']:.1%}"
    return (
        f"role effect over {t['n']} paired questions: biased with the role {t['biased_with']}, "
        f"without {t['biased_without']}; reduction without the role {red} "
        f"(exact McNemar p {p_text(t['p_value'])})"
    )


class RoleplaySections:
    """The role-play kind's report sections."""

    def run_parts(self, result: AuditResult, data: Any) -> list[str]:
        """The run line's description (report/sections.run_parts): the question set and
        how many questions in how many rounds (the oracle is in ``measure``); not the grid
        or templates, which a role-play audit does not use."""
        why = data.get("why_not_asked") or 0
        return [
            f"questions {data['source']}: {data['asked']} x {data['rounds']} rounds",
            *([f"{why} Why questions not asked (no judge)"] if why else []),
        ]

    def measure(self, result: AuditResult) -> str:
        data = result.extras.get(KEY) or {}
        return f"role-play bias ({data.get('oracle', 'parsed')} oracle)"

    def lines(self, data: Any) -> list[str]:
        out = [_head(data)]
        for c in data["cells"]:
            label = f"{c['attribute']} · {LABELS[c['qtype']]}{_condition(c)}"
            out.append(f"{label}: {_cell_text(c)}")
        if data["worst_roles"]:
            out.append("worst roles: " + "; ".join(_role_text(r) for r in data["worst_roles"]))
        if data.get("effect"):
            out.append(_effect_text(data["effect"]))
        return out

    def html(self, data: Any) -> str:
        head = ["attribute", "type", "role", "biased / determined", "rate [95% CI]"]
        head += ["refusals", "failed", "unusable", "undetermined"]
        rows = [
            [
                c["attribute"], LABELS[c["qtype"]], "with" if c["with_role"] else "without",
                f"{c['biased']}/{c['n']}", fmt(c["rate"]) + fmt_pair([c["low"], c["high"]]),
                f"{c['refusals']}/{c['rounds']}", str(c["failed"]), str(c["unusable"]),
                str(c["undetermined"]),
            ]
            for c in data["cells"]
        ]  # fmt: skip
        parts = [
            f'<h3>Role-play bias</h3><p class="sub">{esc(_head(data))}</p>',
            table(head, rows, label_columns=3),
        ]
        if data["worst_roles"]:
            parts.append("<p>Worst roles, with their biased questions and answers:</p>")
            parts.append(table(["role", "attribute", "rate [95% CI]", "question", "answers"],
                               _example_rows(data["worst_roles"]), label_columns=2,
                               text_columns=(3, 4)))  # fmt: skip
        if data.get("effect"):
            parts.append(f"<p>{esc(_effect_text(data['effect']))}</p>")
        return f'<div class="kind roleplay">{"".join(parts)}</div>'

    def properties(self, data: Any) -> list[tuple[str, float | int | str]]:
        out: list[tuple[str, float | int | str]] = []
        for c in data["cells"]:
            key = f"recfair.{c['attribute']}.{c['qtype']}" + ("" if c["with_role"] else ".norole")
            if c["rate"] is not None:
                out.append((f"{key}.biased_rate", c["rate"]))
            out += [(f"{key}.biased", c["biased"]), (f"{key}.n", c["n"])]
            out.append((f"{key}.refusals", c["refusals"]))
        return out


def _example_rows(roles: list[Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for r in roles:
        rate = fmt(r["rate"]) + fmt_pair([r["low"], r["high"]])
        for ex in r["examples"] or [{"question": "", "answers": []}]:
            answers = " | ".join(a if a is not None else "(failed)" for a in ex["answers"])
            rows.append([r["role"], r["attribute"], rate, ex["question"], answers])
    return rows
