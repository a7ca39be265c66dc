"""The "models side by side" section of every report (terminal, JSON, Markdown, HTML).

Pure rendering of :class:`pytest_recfair.compare.models.ModelComparison`: models as columns,
each attribute's SNSR with its interval, then one sentence per pair of models and
attribute from the paired test on the shared entities.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from pytest_recfair.compare.models import ModelComparison, PairRow
from pytest_recfair.report.fmt import fmt, fmt_ci, fmt_p
from pytest_recfair.report.terminal import wrap_text
from pytest_recfair.results import Stat

__all__ = ["html_section", "json_section", "markdown_lines", "pair_text", "terminal_lines"]

TITLE = "models side by side"
_CELL = 22  # "0.368 [0.301, 0.420]" and two spaces


def _cell(s: Stat | None) -> str:
    return "—" if s is None else fmt_ci(s)


def _interval(p: PairRow) -> str:
    if p.ci is None:
        return ""
    return f" [{p.ci.low:+.3f}, {p.ci.high:+.3f}]"


def pair_text(p: PairRow) -> str:
    """One sentence: which model is significantly fairer on this attribute, or none."""
    if p.p_value is None:
        return f"{p.attribute}: {p.a} vs {p.b}: not compared ({p.note or 'no shared entity'})"
    if p.fairer is not None:
        other = p.b if p.fairer == p.a else p.a
        verdict = f"{p.fairer} is significantly fairer than {other}"
    else:
        verdict = f"{p.a} vs {p.b}: no significant difference"
    return (
        f"{p.attribute}: {verdict} (SNSR {fmt(p.snsr_a)} vs {fmt(p.snsr_b)}, difference "
        f"{p.delta:+.3f}{_interval(p)}, p {fmt_p(p.p_value)}, {p.n_paired} shared entities)"
    )


def _lead(c: ModelComparison) -> str:
    return (
        f"{c.group}: SNSR [95% CI] per model, lower is fairer; pairs tested on the shared "
        f"entities (paired permutation test, two-sided, alpha {c.alpha:g})"
    )


def _table(c: ModelComparison, width: int) -> list[str] | None:
    """Models as columns, or None when the columns do not fit ``width``."""
    name_w = max(9, *(len(a) for a in c.attributes))
    widths = [max(_CELL, len(m) + 2) for m in c.models]
    if 2 + name_w + 1 + sum(widths) > width:
        return None
    lines = [
        "  "
        + "attribute".ljust(name_w)
        + " "
        + "".join(m.ljust(w) for m, w in zip(c.models, widths, strict=True))
    ]
    for attr, row in zip(c.attributes, c.snsr, strict=True):
        cells = "".join(_cell(s).ljust(w) for s, w in zip(row, widths, strict=True))
        lines.append(("  " + attr.ljust(name_w) + " " + cells).rstrip())
    return [line.rstrip() for line in lines]


def terminal_lines(comparisons: Sequence[ModelComparison], width: int = 100) -> list[str]:
    """The terminal section: a table per compared test (or, when the models do not fit the
    width, a line per attribute), then a sentence per pair and attribute."""
    lines: list[str] = []
    for c in comparisons:
        lines += wrap_text(f"{TITLE} — {_lead(c)}", width, "", "  ")
        table = _table(c, width)
        if table is None:
            table = []
            for attr, row in zip(c.attributes, c.snsr, strict=True):
                cells = "; ".join(f"{m} {_cell(s)}" for m, s in zip(c.models, row, strict=True))
                table += wrap_text(f"{attr}: {cells}", width)
        lines += table
        for p in c.pairs:
            lines += wrap_text(("✓ " if p.fairer else "= ") + pair_text(p), width)
    return lines


def json_section(comparisons: Sequence[ModelComparison]) -> list[dict[str, Any]]:
    """The JSON report's ``models`` list (``ModelComparison.to_dict``, plus each pair's
    sentence as ``message``)."""
    out = []
    for c in comparisons:
        d = c.to_dict()
        for p, pd in zip(c.pairs, d["pairs"], strict=True):
            pd["message"] = pair_text(p)
        out.append(d)
    return out


def _md(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown_lines(comparisons: Sequence[ModelComparison]) -> list[str]:
    """The Markdown section (a GitHub job summary): one table per compared test."""
    if not comparisons:
        return []
    out = ["### Models side by side", ""]
    for c in comparisons:
        out += [f"`{c.group}`: {_md(_lead(c).split(': ', 1)[1])}", ""]
        out.append("| Attribute | " + " | ".join(_md(m) for m in c.models) + " |")
        out.append("|---|" + "---|" * len(c.models))
        for attr, row in zip(c.attributes, c.snsr, strict=True):
            out.append(f"| {_md(attr)} | " + " | ".join(_cell(s) for s in row) + " |")
        out.append("")
        out += [f"- {'✅' if p.fairer else '➖'} {_md(pair_text(p))}" for p in c.pairs]
        out.append("")
    return out


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def html_section(comparisons: Sequence[ModelComparison]) -> str:
    """The HTML section, before the per-test sections: a table and the pair verdicts."""
    if not comparisons:
        return ""
    parts = [
        '<section class="test models" id="models"><header><h2>Models side by side</h2></header>'
    ]
    for c in comparisons:
        head = "".join(f"<th>{_e(m)}</th>" for m in c.models)
        ids = "".join(f"<td>{_e(t)}</td>" for t in c.model_ids)
        rows = "".join(
            f"<tr><td>{_e(attr)}</td>"
            + "".join(f'<td class="num">{_e(_cell(s))}</td>' for s in row)
            + "</tr>"
            for attr, row in zip(c.attributes, c.snsr, strict=True)
        )
        verdicts = "".join(
            f'<li class="{"fairer" if p.fairer else "same"}">{_e(pair_text(p))}</li>'
            for p in c.pairs
        )
        parts.append(
            f'<h3>{_e(c.group)}</h3><p class="sub">{_e(_lead(c).split(": ", 1)[1])}</p>'
            f'<div class="scroll"><table class="models"><tr><th>attribute</th>{head}</tr>'
            f'<tr class="sub"><td>model id</td>{ids}</tr>{rows}</table></div>'
            f'<ul class="pairs">{verdicts}</ul>'
        )
    return "".join(parts) + "</section>"
