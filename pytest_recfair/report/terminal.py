"""The "fairness summary" of the pytest terminal report, and the "models side by side"
table of every report (``compare.models.ModelComparison``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pytest_recfair.compare.models import ModelComparison, PairRow
from pytest_recfair.report.failures import evidence_lines, failure_label, failure_text, headlines
from pytest_recfair.report.fmt import (
    Table,
    clip,
    fmt,
    fmt_ci,
    fmt_delta,
    fmt_p,
    table_text,
    wrap_text,
)
from pytest_recfair.report.sections import kind_tables
from pytest_recfair.report.status import (
    FLAG_SNSR,
    FLAG_SNSV,
    attribute_label,
    check_results,
    describe,
    failed_text,
    favoured_text,
    headline,
    lead_notes,
    repeat_stats,
    result_status,
    shown,
    usage_text,
)
from pytest_recfair.results import AuditResult
from pytest_recfair.vocab import STATISTICS

#: the verbose summary's attribute table: the values (their intervals are in the reports)
_HEAD = ["attribute", "gate", "SNSR", "SNSV", "PAFS", "ΔSNSR", "ΔSNSV", "ΔPAFS"]
_HEAD += ["most / least favoured"]


def _heading(r: AuditResult, width: int) -> list[str]:
    """``test id  STATUS  model ...`` on one line when it fits; else wrapped below the id."""
    line = f"{r.meta.test_id}  {result_status(r)}  {describe(r)}"
    if len(line) <= width:
        return [line]
    first = f"{r.meta.test_id}  {result_status(r)}"
    if len(first) > width:
        return [r.meta.test_id, *wrap_text(f"{result_status(r)}  {describe(r)}", width)]
    return [first, *wrap_text(describe(r), width)]


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
            lines += [head.rstrip(), *wrap_text(headline(r), width, "      ", "        ")]
        else:
            lines.append((head + clip(headline(r), width - len(head))).rstrip())
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
    for r in rs if verbose else []:
        lines += _heading(r, width)
        if r.failed:
            lines += wrap_text(failed_text(r), width)
        drift = r.gate.drift if r.gate is not None else {}  # now - baseline, when compared
        rows = [
            [a.attribute, attribute_label(r, a), *(fmt(shown(a, s).value) for s in STATISTICS),
             *(fmt_delta(drift.get(a.attribute, {}).get(s)) for s in STATISTICS),
             favoured_text(a)]
            for a in r.attributes
        ]  # fmt: skip
        lines += table_text(Table("", _HEAD, rows, text=(1, 8)), width) if rows else []
        for t in kind_tables(r):  # after the rows: a kind's tables never split the table
            lines += table_text(t, width)
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
    flag = (
        f"FLAG: not a gate failure, but a large gap (SNSR > {FLAG_SNSR:g} or SNSV > {FLAG_SNSV:g})"
    )
    return lines + (wrap_text(flag, width, "") if flagged and verbose else [])


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


def models_table(c: ModelComparison) -> Table:
    """A compared test: each attribute's SNSR [95% CI] per model ("—": not audited with
    that model), then a verdict per pair and attribute (✓: one is significantly fairer)."""
    rows = [["model id", *c.model_ids]]
    rows += [[a, *("—" if s is None else fmt_ci(s) for s in row)]
             for a, row in zip(c.attributes, c.snsr, strict=True)]  # fmt: skip
    lead = (
        "SNSR [95% CI] per model, lower is fairer; pairs tested on the shared entities "
        f"(paired permutation test, two-sided, alpha {c.alpha:g})"
    )
    notes = [("✓ " if p.fairer else "= ") + pair_text(p) for p in c.pairs]
    return Table(f"models side by side — {c.group}", ["attribute", *c.models], rows, lead, notes)


def terminal_lines(comparisons: Sequence[ModelComparison], width: int = 100) -> list[str]:
    """A table per compared test (a line per attribute when too wide), then its verdicts."""
    return [line for c in comparisons for line in table_text(models_table(c), width)]
