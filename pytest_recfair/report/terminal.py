"""The "fairness summary" of the pytest terminal report, and the "models side by side"
section of every report (``compare.models.ModelComparison``)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import replace

from pytest_recfair.compare.models import ModelComparison, PairRow
from pytest_recfair.report.failures import (
    evidence_lines,
    failure_label,
    failure_text,
    headlines,
)
from pytest_recfair.report.fmt import clip, esc, fmt, fmt_ci, fmt_delta, fmt_p
from pytest_recfair.report.sections import extra_lines, kind_sections
from pytest_recfair.report.status import (
    FLAG_SNSR,
    FLAG_SNSV,
    attribute_label,
    check_results,
    describe,
    drift_of,
    failed_text,
    favoured_text,
    lead_notes,
    repeat_stats,
    result_status,
    shown,
    usage_text,
)
from pytest_recfair.results import AttributeResult, AuditResult
from pytest_recfair.vocab import STATISTICS

_NAME = 18  # attribute column; a longer name gets a line of its own, never a cut
_COLS = (("gate", 4), ("SNSR", 6), ("SNSV", 6), ("PAFS", 6))
_DRIFT_COLS = (("ΔSNSR", 7), ("ΔSNSV", 7), ("ΔPAFS", 7))


def wrap_text(text: str, width: int, first: str = "  ", rest: str = "    ") -> list[str]:
    """``text`` wrapped at spaces: a long name or path stays whole on its own line."""
    return textwrap.wrap(
        text,
        width=max(width, 40),
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def _row(name: str, cells: Sequence[str], rest: str, width: int, name_width: int) -> list[str]:
    widths = [w for _, w in _COLS + _DRIFT_COLS]
    lines = [f"  {name}"] if len(name) > name_width else []
    head = "  " + " ".join(
        c.ljust(w)
        for c, w in zip(["" if lines else name, *cells], [name_width, *widths], strict=True)
    )
    if len(head) + 1 + len(rest) <= width:
        return [*lines, (head + " " + rest).rstrip()]
    return [*lines, head.rstrip(), *wrap_text(rest, width, "      ", "      ")]


def _heading(r: AuditResult, width: int) -> list[str]:
    """``test id  STATUS  model ...`` on one line when it fits; else wrapped below the id."""
    line = f"{r.meta.test_id}  {result_status(r)}  {describe(r)}"
    if len(line) <= width:
        return [line]
    first = f"{r.meta.test_id}  {result_status(r)}"
    if len(first) > width:
        return [r.meta.test_id, *wrap_text(f"{result_status(r)}  {describe(r)}", width)]
    return [first, *wrap_text(describe(r), width)]


def _brief(r: AuditResult) -> str:
    """A test's one figure: the largest SNSR (a failing one first), or its kind's own."""
    own = "; ".join(b for s, d in kind_sections(r) if (b := s.brief(d)))
    if not r.attributes:
        return own

    def order(a: AttributeResult) -> tuple[bool, float]:
        snsr = shown(a, "snsr").value  # NaN: nothing usable, shown as n/a
        return attribute_label(r, a) == "FAIL", snsr if math.isfinite(snsr) else -1.0

    a = max(r.attributes, key=order)
    least = a.favoured()[1]
    text = f"{a.attribute} SNSR {fmt(shown(a, 'snsr').value)} {attribute_label(r, a)}"
    text += f", {least} least favoured" if a.values and least != favoured_text(a) else ""
    return "; ".join(x for x in (text, own) if x)


_FIGURE = 24  # the room a test's figure needs beside its name on one line
_FULL = "-v: the full tables, notes and evidence"


def _short_summary(results: Sequence[AuditResult], width: int, flagged: bool) -> list[str]:
    """A line per test under its file, and below it what needs reading; the run's tokens
    and cost when priced. ``flagged``: the header says what FLAG means."""
    hint = f"FLAG: SNSR > {FLAG_SNSR:g} or SNSV > {FLAG_SNSV:g}; -v: the tables"
    lines = [f"gate  test  what it found ({hint if flagged else _FULL})"]
    names = [len(r.meta.test_id.rpartition("::")[2]) for r in results]
    name_w = max([n for n in names if n + 8 + _FIGURE <= width] or [0])
    file = ""
    for r in results:
        where, _, name = r.meta.test_id.rpartition("::")
        if where and where != file:
            file = where
            lines.append(where)
        head = f"{result_status(r):4}  {name.ljust(name_w)}  "  # a name is never cut
        if len(head) + _FIGURE > width:  # too long a name: its figure on the next line
            lines += [head.rstrip(), *wrap_text(_brief(r), width, "      ", "        ")]
        else:
            lines.append((head + clip(_brief(r), width - len(head))).rstrip())
        below = [failed_text(r)] if r.failed else []
        if r.gate is not None:
            below += [f"✗ {h}" for h in headlines(r.gate, r)]
            notes = lead_notes(r.gate.notes) if r.gate.passed else []  # else: failure text
            below += [f"note: {n}" for n in notes]
        for text in below:
            lines += wrap_text(text, width, "      ", "        ")
    priced = [r for r in results if r.cost is not None]
    if priced:  # what the run cost, when prices are known
        total = replace(
            priced[0],
            prompt_tokens=sum(r.prompt_tokens for r in results),
            completion_tokens=sum(r.completion_tokens for r in results),
            cost=sum(r.cost or 0.0 for r in priced),
        )
        lines.append(f"run {usage_text(total)}")
    return lines


def terminal_summary(
    results: Sequence[AuditResult], width: int = 100, *, verbose: bool = False
) -> list[str]:
    """A line per test, or with ``verbose`` (``-v``) a table per test wrapped to ``width``
    (never cutting a name), its notes and evidence."""
    rs = check_results(results)
    flagged = any(attribute_label(r, a) == "FLAG" for r in rs for a in r.attributes)
    lines = [] if verbose or not rs else _short_summary(rs, width, flagged)
    header = [name for name, _ in _COLS + _DRIFT_COLS]
    for r in rs if verbose else []:
        lines += _heading(r, width)
        if r.failed:
            lines += wrap_text(failed_text(r), width)
        # as wide as the longest attribute name (9 to 18): a longer one gets its own line
        name_width = min(_NAME, max([9, *(len(a.attribute) for a in r.attributes)]))
        if r.attributes:
            head = _row("attribute", header, "most / least favoured", width, name_width)
            short = _row("attribute", header, "most / least", width, name_width)
            lines += head if len(head) == 1 else short
        for a in r.attributes:
            cells = [
                attribute_label(r, a),
                *(fmt(shown(a, s).value) for s in STATISTICS),
                *(fmt_delta(drift_of(r.gate, a.attribute, s)) for s in STATISTICS),
            ]
            lines += _row(a.attribute, cells, favoured_text(a), width, name_width)
        for line in extra_lines(r):  # after the rows: a kind's lines never split the table
            lines += wrap_text(line, width)
        for a in r.attributes:
            if stats := repeat_stats(a):
                lines += wrap_text(f"{a.attribute}: {stats}", width)
        for f in r.gate.failures if r.gate is not None else ():
            lines += wrap_text(f"{failure_label(f)}: {failure_text(f, r)}", width, "  ✗ ")
        for n in r.gate.notes if r.gate is not None else ():
            lines += wrap_text(f"note: {n}", width)
        for line in evidence_lines(r):
            lines += wrap_text(line, width, "  ", "      ")
        if usage := usage_text(r):
            lines += wrap_text(usage, width)
    if flagged and verbose:
        lines += wrap_text(
            f"FLAG: not a gate failure, but a large gap (SNSR > {FLAG_SNSR:g} or SNSV > "
            f"{FLAG_SNSV:g})",
            width,
            "",
        )
    return lines


_CELL = 22  # "0.368 [0.301, 0.420]" and two spaces


def _rows(c: ModelComparison) -> list[tuple[str, list[str]]]:
    """Each attribute's SNSR [95% CI] per model ("—": not audited with that model)."""
    cells = (["—" if s is None else fmt_ci(s) for s in row] for row in c.snsr)
    return list(zip(c.attributes, cells, strict=True))


def pair_text(p: PairRow) -> str:
    """One sentence: which model is significantly fairer on this attribute, or none."""
    if p.p_value is None:
        return f"{p.attribute}: {p.a} vs {p.b}: not compared ({p.note or 'no shared entity'})"
    if p.fairer is not None:
        other = p.b if p.fairer == p.a else p.a
        verdict = f"{p.fairer} is significantly fairer than {other}"
    else:
        verdict = f"{p.a} vs {p.b}: no significant difference"
    ci = "" if p.ci is None else f" [{p.ci.low:+.3f}, {p.ci.high:+.3f}]"
    return (
        f"{p.attribute}: {verdict} (SNSR {fmt(p.snsr_a)} vs {fmt(p.snsr_b)}, difference "
        f"{p.delta:+.3f}{ci}, p {fmt_p(p.p_value)}, {p.n_paired} shared entities)"
    )


def _lead(c: ModelComparison) -> str:
    return (
        f"{c.group}: SNSR [95% CI] per model, lower is fairer; pairs tested on the shared "
        f"entities (paired permutation test, two-sided, alpha {c.alpha:g})"
    )


def terminal_lines(comparisons: Sequence[ModelComparison], width: int = 100) -> list[str]:
    """A table per compared test (a line per attribute when too wide), then a sentence
    per pair and attribute."""
    lines: list[str] = []
    for c in comparisons:
        lines += wrap_text(f"models side by side — {_lead(c)}", width, "", "  ")
        name_w = max(9, *(len(a) for a in c.attributes))
        widths = [max(_CELL, len(m) + 2) for m in c.models]
        if 2 + name_w + 1 + sum(widths) <= width:  # models as columns
            for name, xs in [("attribute", list(c.models)), *_rows(c)]:
                cells = "".join(x.ljust(w) for x, w in zip(xs, widths, strict=True))
                lines.append(f"  {name.ljust(name_w)} {cells}".rstrip())
        else:
            for attr, xs in _rows(c):
                cells = "; ".join(f"{m} {x}" for m, x in zip(c.models, xs, strict=True))
                lines += wrap_text(f"{attr}: {cells}", width)
        for p in c.pairs:
            lines += wrap_text(("✓ " if p.fairer else "= ") + pair_text(p), width)
    return lines


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
        out += [f"| {_md(attr)} | " + " | ".join(xs) + " |" for attr, xs in _rows(c)] + [""]
        out += [f"- {'✅' if p.fairer else '➖'} {_md(pair_text(p))}" for p in c.pairs]
        out.append("")
    return out


def html_section(comparisons: Sequence[ModelComparison]) -> str:
    """The HTML section, before the per-test sections: a table and the pair verdicts."""
    if not comparisons:
        return ""
    parts = [
        '<section class="test models" id="models"><header><h2>Models side by side</h2></header>'
    ]
    for c in comparisons:
        head = "".join(f"<th>{esc(m)}</th>" for m in c.models)
        ids = "".join(f"<td>{esc(t)}</td>" for t in c.model_ids)
        rows = "".join(
            f"<tr><td>{esc(attr)}</td>"
            + "".join(f'<td class="num">{esc(x)}</td>' for x in xs)
            + "</tr>"
            for attr, xs in _rows(c)
        )
        verdicts = "".join(
            f'<li class="{"fairer" if p.fairer else "same"}">{esc(pair_text(p))}</li>'
            for p in c.pairs
        )
        parts.append(
            f'<h3>{esc(c.group)}</h3><p class="sub">{esc(_lead(c).split(": ", 1)[1])}</p>'
            f'<div class="scroll"><table class="models"><tr><th>attribute</th>{head}</tr>'
            f'<tr class="sub"><td>model id</td>{ids}</tr>{rows}</table></div>'
            f'<ul class="pairs">{verdicts}</ul>'
        )
    return "".join(parts) + "</section>"
