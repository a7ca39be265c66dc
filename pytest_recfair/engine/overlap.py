"""The list-overlap audit (FaiRLLM / FairEval): neutral vs attribute-conditioned lists.

Each entity is asked for a top-K list once neutrally and once per attribute value; the
lists are parsed (in the settings' parse style), titles of one entity are merged to one
key (default parse style only: the FaiRLLM notebook compares exact titles), and
:mod:`.scoring` turns them into similarities per value and SNSR/SNSV/PAFS.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pytest_recfair import prompts
from pytest_recfair.engine import scoring
from pytest_recfair.engine.base import AuditInputs, Scored
from pytest_recfair.engine.scoring import Reply
from pytest_recfair.engine.tally import FAILED
from pytest_recfair.prompts import Entity, Grid, PromptCase
from pytest_recfair.replies import matching, parse
from pytest_recfair.results import AuditResult, GateFailure
from pytest_recfair.settings import AuditSettings

__all__ = ["OVERLAP", "OverlapAudit"]


class OverlapAudit:
    """Today's audit kind, and the default one."""

    name = "overlap"

    def wants(self, settings: AuditSettings) -> bool:
        return True

    def build_cases(
        self,
        settings: AuditSettings,
        grid: Grid,
        entities: Sequence[Entity],
        attributes: list[str] | None,
        inputs: AuditInputs,
    ) -> list[PromptCase]:
        return prompts.build_cases(
            grid=grid,
            templates=settings.templates,
            entities=list(entities),
            domain=settings.domain,
            k=settings.k,
            language=settings.language,
            perturbation=settings.perturbation,
            seed=settings.seed,
            repeats=settings.repeats,
            attributes=attributes,
        )

    def score(
        self,
        settings: AuditSettings,
        cases: Sequence[PromptCase],
        completions: Mapping[str, Any],
        inputs: AuditInputs,
    ) -> Scored:
        style = settings.parse_style
        replies = parse_all(cases, completions, settings.k, style)
        merges = 0
        if style == "default":
            replies, merges = canonicalize(replies)
        return Scored(scoring.score(settings, replies), merges)

    def failures(
        self, settings: AuditSettings, result: AuditResult, baseline: AuditResult | None
    ) -> tuple[GateFailure, ...]:
        return ()  # the list-overlap gate (pytest_recfair.gate.thresholds) judges these results


OVERLAP = OverlapAudit()


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
            out[i] = replace(replies[i], items=list(keys))
    return out, merges
