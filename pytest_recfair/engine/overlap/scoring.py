"""List-overlap replies, parsed: every reply's list, failed prompts marked, titles merged.

Pure: prompt cases and completions in, :class:`Reply` objects out for the
:class:`~pytest_recfair.engine.overlap.tally.Tally`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_recfair.engine.overlap.tally import FAILED
from pytest_recfair.prompts.cases import PromptCase
from pytest_recfair.replies import matching, parse

__all__ = ["Reply", "canonicalize", "mark_failed", "parse_all"]


@dataclass(frozen=True, slots=True)
class Reply:
    """One parsed reply to one prompt."""

    case: PromptCase
    items: list[str] | None  # None: no completion at all (provider error)
    status: str


def parse_all(
    cases: Sequence[PromptCase], completions: Mapping[str, Any], k: int, style: parse.Style
) -> list[Reply]:
    """Parse every reply; identical texts (common: fair values repeat the neutral list)
    are parsed once."""
    seen: dict[str, tuple[tuple[str, ...], str]] = {}
    out = []
    for case in cases:
        completion = completions.get(case.id)
        if completion is None:  # no reply at all: counted as missing, status "empty"
            parsed = parse.reply(None, k, style=style)
            out.append(Reply(case, None, str(parsed.status.value)))
            continue
        hit = seen.get(completion.text)
        if hit is None:
            parsed = parse.reply(completion.text, k, style=style)
            hit = seen[completion.text] = (tuple(parsed.items), str(parsed.status.value))
        out.append(Reply(case, list(hit[0]), hit[1]))
    return out


def mark_failed(replies: list[Reply], errors: Mapping[str, str]) -> list[Reply]:
    """Replies of prompts that got no valid response (``errors``: case id -> error) get
    the status "failed" and no list; so do the replies compared with a failed neutral
    prompt. The tally leaves them out of their value's mean instead of scoring them."""
    dead = {
        (r.case.entity_id, r.case.repeat)
        for r in replies
        if r.case.attribute is None and r.case.id in errors
    }
    return [
        replace(r, items=None, status=FAILED)
        if r.case.id in errors or (r.case.entity_id, r.case.repeat) in dead
        else r
        for r in replies
    ]


def canonicalize(replies: list[Reply]) -> tuple[list[Reply], int]:
    """Map every title of one entity (all its lists) to one canonical key."""
    by_entity: dict[str, list[int]] = {}
    for i, r in enumerate(replies):
        if r.items is not None:
            by_entity.setdefault(r.case.entity_id, []).append(i)
    out = list(replies)
    merges = 0
    for entity_id, idx in by_entity.items():
        lists = [replies[i].items or [] for i in idx]
        canon, merged = matching.canonicalize(lists, entity=entity_id)
        merges += len(merged)
        for i, keys in zip(idx, canon, strict=True):
            r = replies[i]  # built directly: dataclasses.replace costs 2 us x 31,000
            out[i] = Reply(r.case, keys, r.status)
    return out, merges
