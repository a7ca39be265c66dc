"""The cases behind a candidate-position bias: per attribute, the entities whose pick
followed the position most (the candidate shown first taken, whichever it was), with each
group's picks across the shown orders side by side and the replies.

Computed from the replies the pooled scorer holds anyway; at most
:data:`~pytest_recfair.engine.overlap.evidence.SHOW` entities per attribute.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_recfair.engine.overlap.evidence import SHOW, reply_text
from pytest_recfair.prompts.candidates import CandidateCase, read_pick

__all__ = ["entries"]

NEUTRAL = "neutral"


def entries(
    cases: Sequence[CandidateCase], completions: Mapping[str, Any], attributes: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """attribute -> evidence entry (report/evidence.py's shape)."""
    out = {}
    for attr in attributes:
        mine = [c for c in cases if c.attribute in (None, attr)]
        by_entity: dict[str, list[CandidateCase]] = {}
        for c in mine:
            by_entity.setdefault(c.entity_id, []).append(c)
        rows = [_row(group, completions) for group in by_entity.values()]
        rows.sort(key=lambda r: (-r[0], r[1]))
        if rows:
            k = len(mine[0].shown)
            out[attr] = {
                "what": (
                    f"the {min(SHOW, len(rows))} of {len(rows)} entities whose pick followed "
                    f"the position most: share of picks that took the candidate shown first "
                    f"(uniform: 1/{k}), every group and order"
                ),
                "rows": [r[2] for r in rows[:SHOW]],
            }
    return out


def _row(
    cases: Sequence[CandidateCase], completions: Mapping[str, Any]
) -> tuple[float, str, dict[str, Any]]:
    lists: dict[str, dict[str, Any]] = {}
    first = picks = 0
    for c in sorted(cases, key=lambda c: (c.value is not None, c.value or "", c.order_index)):
        text = getattr(completions.get(c.id), "text", None)
        label = c.value or NEUTRAL
        entry = lists.setdefault(label, {"label": label, "titles": [], "reply": ""})
        if text is None:
            entry["titles"].append(f"order {c.order_index + 1}: no reply (failed)")
            continue
        at = read_pick(text, c.shown, c.style)
        picks += 1
        first += at == 0
        picked = (
            "missed (no candidate named)"
            if at is None
            else f"{c.shown[at]} (shown {at + 1} of {len(c.shown)})"
        )
        entry["titles"].append(f"order {c.order_index + 1}: {picked}")
        entry["reply"] += (
            f"order {c.order_index + 1} [{' / '.join(c.shown)}]:\n{reply_text(text)}\n\n"
        )
    share = first / picks if picks else 0.0
    why = f"took the first-shown candidate in {first} of {picks} picks ({share:.0%})"
    row = {"entity": cases[0].entity, "score": share, "why": why, "lists": list(lists.values())}
    return share, cases[0].entity_id, row
