"""Small HTML building blocks shared by the HTML report and the kinds' HTML sections
(escaped text, a table in the report's styles)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from html import escape

__all__ = ["esc", "table"]


def esc(text: object) -> str:
    """``text`` escaped for HTML text and attribute values."""
    return escape(str(text), quote=True)


def table(
    head: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    label_columns: int = 1,
    text_columns: Collection[int] = (),
) -> str:
    """A scrollable table of plain-text cells (escaped here); the columns after the first
    ``label_columns`` are numbers, right-aligned, except ``text_columns`` (indices: prose
    such as a question and its answers, left-aligned and wrapped)."""

    def cells(row: Sequence[str], tag: str) -> str:
        out = []
        for i, c in enumerate(row):
            numeric = i >= label_columns and i not in text_columns
            num = ' class="num"' if numeric and tag == "td" else ""
            out.append(f"<{tag}{num}>{esc(c)}</{tag}>")
        return "".join(out)

    body = "".join(f"<tr>{cells(r, 'td')}</tr>" for r in rows)
    return f'<div class="scroll"><table><tr>{cells(head, "th")}</tr>{body}</table></div>'
