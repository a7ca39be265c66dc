"""The "fairness summary" section of the pytest terminal report."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from pytest_recfair.report.evidence import evidence_lines
from pytest_recfair.report.failures import failure_label, failure_text
from pytest_recfair.report.fmt import fmt, fmt_delta
from pytest_recfair.report.sections import extra_lines
from pytest_recfair.report.status import (
    FLAG_SNSR,
    FLAG_SNSV,
    attribute_label,
    check_results,
    describe,
    drift_of,
    failed_text,
    favoured_text,
    repeat_stats,
    result_status,
    shown,
    usage_text,
)
from pytest_recfair.results import AuditResult
from pytest_recfair.vocab import STATISTICS

__all__ = ["WIDTH", "terminal_summary", "wrap_text"]

WIDTH = 100  # the default width (pytest passes its terminal's)

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
    """``test id  STATUS  model ...`` on one line when it fits; else the test id, then the
    status and description wrapped below it."""
    line = f"{r.meta.test_id}  {result_status(r)}  {describe(r)}"
    if len(line) <= width:
        return [line]
    first = f"{r.meta.test_id}  {result_status(r)}"
    if len(first) > width:
        return [r.meta.test_id, *wrap_text(f"{result_status(r)}  {describe(r)}", width)]
    return [first, *wrap_text(describe(r), width)]


def _gate_lines(r: AuditResult, width: int) -> list[str]:
    if r.gate is None:
        return []
    lines: list[str] = []
    for f in r.gate.failures:
        lines += wrap_text(f"{failure_label(f)}: {failure_text(f, r)}", width, "  ✗ ")
    for n in r.gate.notes:
        lines += wrap_text(f"note: {n}", width)
    return lines


def terminal_summary(
    results: Sequence[AuditResult], width: int = WIDTH, *, verbose: bool = False
) -> list[str]:
    """The "fairness summary" lines: one small table per test, fitted to ``width``
    columns by wrapping (never by cutting a name); ``verbose`` (``-v``) adds the evidence
    of each failing attribute (report/evidence.py)."""
    lines: list[str] = []
    header = [name for name, _ in _COLS + _DRIFT_COLS]
    for r in check_results(results):
        lines += _heading(r, width)
        if r.failed:
            lines += wrap_text(failed_text(r), width)
        # as wide as the longest attribute name (9 to 18): a longer one gets its own line
        name_width = min(_NAME, max([9, *(len(a.attribute) for a in r.attributes)]))
        if r.attributes:
            head = _row("attribute", header, "most / least favoured", width, name_width)
            lines += (
                head
                if len(head) == 1
                else _row("attribute", header, "most / least", width, name_width)
            )
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
            stats = repeat_stats(a)
            if stats:
                lines += wrap_text(f"{a.attribute}: {stats}", width)
        lines += _gate_lines(r, width)
        if verbose:
            for line in evidence_lines(r):
                lines += wrap_text(line, width, "  ", "      ")
        usage = usage_text(r)
        if usage:
            lines += wrap_text(usage, width)
    if any(attribute_label(r, a) == "FLAG" for r in check_results(results) for a in r.attributes):
        lines += wrap_text(
            f"FLAG: not a gate failure, but above the method's descriptive flags (SNSR > "
            f"{FLAG_SNSR:g} or SNSV > {FLAG_SNSV:g}): a large gap between groups",
            width,
            "",
        )
    return lines
