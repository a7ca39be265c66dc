"""The "fairness summary" section of the pytest terminal report."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_recfair.kinds import STATISTICS
from pytest_recfair.report.failures import failure_label, failure_text
from pytest_recfair.report.fmt import clip, fmt, fmt_delta
from pytest_recfair.report.kinds import extra_lines
from pytest_recfair.report.status import (
    attribute_status,
    check_results,
    describe,
    drift_of,
    failed_text,
    favoured_text,
    repeat_stats,
    result_status,
    shown,
)
from pytest_recfair.results import AuditResult

__all__ = ["WIDTH", "terminal_summary"]

WIDTH = 100  # the terminal summary never exceeds this many columns

_COLS = (("attribute", 18), ("gate", 4), ("SNSR", 6), ("SNSV", 6), ("PAFS", 6))
_DRIFT_COLS = (("ΔSNSR", 7), ("ΔSNSV", 7), ("ΔPAFS", 7))


def _row(cells: Sequence[str], widths: Sequence[int], rest: str) -> str:
    head = "  " + " ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))
    return clip((head + " " + rest).rstrip(), WIDTH)


def _gate_lines(r: AuditResult) -> list[str]:
    if r.gate is None:
        return []
    lines = [clip(f"  ✗ {failure_label(f)}: {failure_text(f, r)}", WIDTH) for f in r.gate.failures]
    lines += [clip(f"  note: {n}", WIDTH) for n in r.gate.notes]
    return lines


def terminal_summary(results: Sequence[AuditResult]) -> list[str]:
    """The "fairness summary" lines: one small table per test, at most 100 columns wide."""
    lines: list[str] = []
    widths = [w for _, w in _COLS + _DRIFT_COLS]
    for r in check_results(results):
        lines.append(clip(f"{r.meta.test_id}  {result_status(r)}  {describe(r)}", WIDTH))
        if r.failed:
            lines.append(clip(f"  {failed_text(r)}", WIDTH))
        header = [name for name, _ in _COLS + _DRIFT_COLS]
        if r.attributes:
            lines.append(_row(header, widths, "most / least favoured"))
        lines += [clip(f"  {line}", WIDTH) for line in extra_lines(r)]
        for a in r.attributes:
            cells = [
                clip(a.attribute, 18),
                attribute_status(r, a.attribute),
                *(fmt(shown(a, s).value) for s in STATISTICS),
                *(fmt_delta(drift_of(r.gate, a.attribute, s)) for s in STATISTICS),
            ]
            lines.append(_row(cells, widths, favoured_text(a)))
        for a in r.attributes:
            stats = repeat_stats(a)
            if stats:
                lines.append(clip(f"  {a.attribute}: {stats}", WIDTH))
        lines += _gate_lines(r)
    return lines
