"""The evidence behind a failing attribute, in every channel: the entities (or items,
cases, questions) that moved its statistic most, with their lists and replies.

Every kind of audit hands its evidence over in one shape (``AuditResult.evidence``:
attribute label, as the gate's failures name it -> an entry), so no channel names a kind:

``{"what": headline, "rows": [row, ...]}``, a row
``{"entity": name, "score": float, "why": text, "lists": [list, ...]}``, a list
``{"label": "neutral" | a value | ..., "titles": [...], "kept": [...], "dropped": [...],
"added": [...], "reply": text, "notes": [...]}`` (all keys but ``label`` optional; kept /
dropped / added: compared with the first list of the row, the neutral one).

The JSON report writes the entries as they are; the HTML report shows each failing
attribute's rows as collapsible ``<details>`` with the lists side by side and the reply
text one more click away; Markdown and the terminal (``-v``) show a short line per row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_recfair.report.fmt import esc, fmt
from pytest_recfair.results import AuditResult

__all__ = ["EVIDENCE_CSS", "evidence_html", "evidence_lines", "evidence_markdown", "failing"]

#: titles named per row in the brief (terminal, Markdown) before "..."
_BRIEF_TITLES = 3

EVIDENCE_CSS = """
section.evidence { margin: 12px 0; }
section.evidence details.row { border: 1px solid var(--line); border-radius: 6px;
  padding: 4px 10px; margin: 4px 0; }
section.evidence summary { cursor: pointer; }
table.lists td { min-width: 180px; }
table.lists li.kept { color: var(--muted); } table.lists li.added { color: var(--fail); }
table.lists li.dropped { color: var(--accent); text-decoration: line-through; }
table.lists ol, table.lists ul { margin: 0; padding-left: 20px; }
pre.reply { white-space: pre-wrap; max-height: 320px; overflow: auto; background: var(--panel);
  padding: 6px; font-size: 12px; }
"""


def failing(r: AuditResult) -> list[tuple[str, Mapping[str, Any]]]:
    """The evidence entries of the attributes whose gate failed, in failure order."""
    if r.gate is None or not r.evidence:
        return []
    out: dict[str, Mapping[str, Any]] = {}
    for f in r.gate.failures:
        entry = r.evidence.get(f.attribute) if f.attribute is not None else None
        if f.attribute is not None and entry and entry.get("rows") and f.attribute not in out:
            out[f.attribute] = entry
    return list(out.items())


def _changes(lst: Mapping[str, Any]) -> str:
    """``kept 3, dropped 22, added 22`` of a list compared with the neutral one."""
    if "kept" not in lst:
        return ""
    return (
        f"kept {len(lst.get('kept') or [])}, dropped {len(lst.get('dropped') or [])}, "
        f"added {len(lst.get('added') or [])}"
    )


def _some(titles: Sequence[str]) -> str:
    shown = ", ".join(titles[:_BRIEF_TITLES])
    return shown + (", ..." if len(titles) > _BRIEF_TITLES else "")


def _row_brief(row: Mapping[str, Any]) -> str:
    """One row in a line: entity, score, what it says, and each compared list's change."""
    parts = [f"{row.get('entity', '?')} ({row.get('why') or fmt(row.get('score'))})"]
    lists = row.get("lists", [])
    compared = any("kept" in lst for lst in lists)
    for lst in lists[1:] if compared else lists:
        change = _changes(lst)
        if change:
            added = lst.get("added") or []
            more = f"; added {_some(added)}" if added else ""
            parts.append(f"{lst.get('label')}: {change}{more}")
        elif lst.get("notes"):
            parts.append(f"{lst.get('label')}: {'; '.join(lst['notes'])}")
        elif lst.get("titles"):  # no neutral list to compare with: its first entry
            parts.append(f"{lst.get('label')}: {lst['titles'][0]}")
    return " · ".join(parts)


def evidence_lines(r: AuditResult) -> list[str]:
    """The terminal's (``-v``) evidence lines: per failing attribute, a line per row."""
    out: list[str] = []
    for attr, entry in failing(r):
        out.append(f"evidence {attr}: {entry.get('what', '')}")
        out += [f"  {_row_brief(row)}" for row in entry.get("rows", [])]
    return out


def evidence_markdown(r: AuditResult, md: Any) -> list[str]:
    """Markdown bullets (``md``: the Markdown escaper of the report)."""
    out: list[str] = []
    for attr, entry in failing(r):
        out += [f"**Evidence, {md(attr)}**: {md(str(entry.get('what', '')))}", ""]
        out += [f"- {md(_row_brief(row))}" for row in entry.get("rows", [])]
        out.append("")
    return out


def _items(lst: Mapping[str, Any], neutral: set[str]) -> str:
    """A list's titles as list items: kept (also in the neutral list) or added."""
    kept = set(lst.get("kept") or [])
    compared = "kept" in lst
    out = []
    for t in lst.get("titles") or []:
        cls = ("kept" if t in kept else "added") if compared else ""
        mark = "" if not compared else (" ✓" if t in kept else " +")
        out.append(f'<li class="{cls}">{esc(t)}{mark}</li>')
    dropped = "".join(f'<li class="dropped">{esc(t)}</li>' for t in lst.get("dropped") or [])
    notes = "".join(f"<li>{esc(n)}</li>" for n in lst.get("notes") or [])
    body = f"<ol>{''.join(out)}</ol>" if out else ""
    if dropped:
        body += f"<p>dropped ({len(lst.get('dropped') or [])}):</p><ul>{dropped}</ul>"
    if notes:
        body += f"<ul>{notes}</ul>"
    return body


def _lists_table(row: Mapping[str, Any]) -> str:
    lists = row.get("lists") or []
    if not lists:
        return ""
    neutral = set(lists[0].get("titles") or [])
    head = "".join(
        f"<th>{esc(lst.get('label', ''))}<br><small>{esc(_changes(lst))}</small></th>"
        for lst in lists
    )
    cells = "".join(f"<td>{_items(lst, neutral)}</td>" for lst in lists)
    replies = "".join(
        f'<details class="reply"><summary>reply text: {esc(lst.get("label", ""))}</summary>'
        f'<pre class="reply">{esc(lst["reply"])}</pre></details>'
        for lst in lists
        if lst.get("reply")
    )
    return (
        f'<div class="scroll"><table class="lists"><tr>{head}</tr><tr>{cells}</tr></table>'
        f"</div>{replies}"
    )


def evidence_html(r: AuditResult) -> str:
    """Each failing attribute's evidence: a collapsible row per entity, lists side by side."""
    parts = []
    for attr, entry in failing(r):
        rows = "".join(
            f'<details class="row"><summary><b>{esc(row.get("entity", "?"))}</b> '
            f"{esc(row.get('why') or fmt(row.get('score')))}</summary>"
            f"{_lists_table(row)}</details>"
            for row in entry.get("rows", [])
        )
        parts.append(
            f'<section class="evidence"><h3>Evidence: {esc(attr)}</h3>'
            f'<p class="sub">{esc(entry.get("what", ""))}</p>{rows}</section>'
        )
    return "".join(parts)
