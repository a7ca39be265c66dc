"""Number, interval and p-value formatting for every report and message, and the
:class:`Table` every channel renders (``table_text`` here; markdown.py, html_report.py)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from html import escape
from typing import Final

from pytest_recfair.results import Interval, Stat
from pytest_recfair.vocab import STATISTICS

#: How each gated quantity is named in text.
LABEL: Final[dict[str, str]] = {s: s.upper() for s in STATISTICS} | {
    "entropy": "entropy", "refusal_gap": "refusal gap", "unusable": "unusable share"
}  # fmt: skip


def fmt(x: float | None, digits: int = 3) -> str:
    """A number to ``digits`` places; "n/a" when it is missing or undefined."""
    if x is None or math.isnan(x):
        return "n/a"
    return f"{x:.{digits}f}"


def fmt_delta(x: float | None) -> str:
    """A signed change; a dash when there is none."""
    if x is None or math.isnan(x):
        return "—"
    return f"{x:+.3f}"


def fmt_interval(value: float | None, ci: Interval | None) -> str:
    """ "0.123 [0.100, 0.150]", or the bare value when the interval is missing or undefined."""
    if ci is None or math.isnan(ci.low) or math.isnan(ci.high):
        return fmt(value)
    return f"{fmt(value)} [{ci.low:.3f}, {ci.high:.3f}]"


def fmt_ci(s: Stat) -> str:
    """A statistic with its bootstrap interval."""
    return fmt_interval(s.value, s.ci)


def fmt_p(p: float) -> str:
    """A p-value after "p": "< 0.001" or "= 0.042"."""
    return "< 0.001" if p < 0.001 else f"= {p:.3f}"


def p_text(p: float | None) -> str:
    """A p-value after "p" ("= 0.042", "< 0.001"), or "n/a" when there is none."""
    return "n/a" if p is None else fmt_p(p)


def p_cell(p: float | None) -> str:
    """A p-value in a table's "p" column: "0.042", "< 0.001" or "n/a"."""
    return p_text(p).removeprefix("= ")


def fmt_pair(pair: Sequence[float | None] | None) -> str:
    """ " [0.100, 0.150]" for an interval stored as a pair; "" when it is undefined."""
    if not pair or pair[0] is None or pair[1] is None:
        return ""
    return f" [{fmt(pair[0])}, {fmt(pair[1])}]"


def nice_step(raw: float) -> float:
    """The first round step (1, 2, 2.5 or 5 times a power of ten) at least ``raw``."""
    mag: float = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, with an ellipsis when cut."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


class Status(str):
    """A status cell (PASS, FAIL, FLAG, n/a): a badge in HTML, an icon in Markdown."""


@dataclass(frozen=True)
class Table:
    """Results as one table: a title, a lead line, columns, rows of cells, notes. Columns
    after ``labels`` are right-aligned numbers, but ``text`` ones (prose)."""

    title: str
    head: Sequence[str] = ()
    rows: Sequence[Sequence[str]] = ()
    lead: str = ""
    notes: Sequence[str] = ()
    labels: int = 1
    text: Collection[int] = ()


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


def table_text(t: Table, width: int) -> list[str]:
    """A table in the terminal: title and lead, its columns aligned when they fit ``width``
    (else a last prose column below its row, or a line per row), then its notes."""
    lead = " — ".join(x for x in (t.title, t.lead) if x)
    lines = wrap_text(lead, width) if lead else []
    table = [t.head, *t.rows] if t.rows else []
    last = len(t.head) - 1 in t.text  # a prose column: it may wrap below its row
    pad = "  " if lead else ""  # under a title; the attribute table has none

    def grid(rows: Sequence[Sequence[str]]) -> list[str]:
        """Columns two spaces apart; after ``labels`` right-aligned, but ``text`` ones."""
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))] if rows else []
        return [
            pad
            + "  "
            + "  ".join(
                c.ljust(w) if i < t.labels or i in t.text else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
            for r in rows
        ]

    if max(map(len, full := grid(table)), default=0) <= width:
        lines += full
    elif last and max(map(len, part := grid([r[:-1] for r in table]))) + 10 <= width:
        for line, row in zip(part, table, strict=True):
            joined = f"{line.ljust(len(max(part, key=len)))}  {row[-1]}".rstrip()
            more = pad + "    "
            fits = len(joined) <= width
            lines += [joined] if fits else [line, *wrap_text(row[-1], width, more, more)]
    else:  # prose cells cut to a few lines: whole in the HTML and Markdown reports
        for row in t.rows:
            cells = [
                f"{t.head[i]} {clip(c, 160) if i in t.text else c}"
                for i, c in enumerate(row)
                if i >= t.labels and c not in ("", "—")
            ]
            text = " · ".join(row[: t.labels]) + ": " + ", ".join(cells)
            lines += wrap_text(text, width, pad + "  ", pad + "    ")
    for note in t.notes:
        lines += wrap_text(note, width, pad + "  ", pad + "    ")
    return lines


def esc(text: object) -> str:
    """``text`` escaped for HTML text and attribute values; a :class:`Status` as a badge."""
    if isinstance(text, Status):
        return f'<span class="badge {"na" if text == "n/a" else text}">{escape(text)}</span>'
    return escape(str(text), quote=True)


def svg_open(cid: str, kind: str, width: float, height: float, title: str) -> str:
    """A chart's ``<svg>`` tag (scaled by its viewBox) and its title, escaped here."""
    size = f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}"'
    return (
        f'<svg id="{esc(cid)}" class="chart {kind}" role="img" xmlns="http://www.w3.org/2000/svg" '
        f"{size}><title>{esc(title)}</title>"
    )
