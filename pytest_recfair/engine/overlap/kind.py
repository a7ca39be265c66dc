"""The list-overlap audit (FaiRLLM / FairEval): neutral vs attribute-conditioned lists.

Each entity is asked for a top-K list once neutrally and once per attribute value; the
lists are parsed (in the settings' parse style), titles of one entity are merged to one
key (default parse style only: the FaiRLLM notebook compares exact titles), and the
:class:`~pytest_recfair.engine.overlap.tally.Tally` turns them, a chunk of entities at a
time, into similarities per value and SNSR/SNSV/PAFS. Shards write their tally.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_recfair import prompts
from pytest_recfair.engine.base import AuditInputs, Merged, Rebuild, Scored, Sent
from pytest_recfair.engine.overlap import evidence as overlap_evidence
from pytest_recfair.engine.overlap.scoring import canonicalize, mark_failed, parse_all
from pytest_recfair.engine.overlap.tally import Tally, TallyConfig
from pytest_recfair.gate import unanswered
from pytest_recfair.prompts import Entity, Grid, PromptCase
from pytest_recfair.results import AuditResult, GateFailure
from pytest_recfair.settings import AuditSettings

if TYPE_CHECKING:
    from pytest_recfair.engine.sharding import ShardResult
    from pytest_recfair.providers import RunOutcome

__all__ = ["OVERLAP", "OverlapAudit", "OverlapScorer", "OverlapSections", "layout_of", "list_cases"]


class OverlapScorer:
    """A list-overlap audit's tally, fed one chunk of entities' replies at a time."""

    def __init__(self, settings: AuditSettings, tally: Tally) -> None:
        self.settings = settings
        self.tally = tally

    def add(self, cases: Sequence[PromptCase], outcome: RunOutcome) -> None:
        s = self.settings
        replies = parse_all(cases, outcome.completions, s.k, s.parse_style)
        if outcome.errors:
            replies = mark_failed(replies, outcome.errors)
        raw = replies
        if s.parse_style == "default":
            replies, merges = canonicalize(replies)
            self.tally.merges += merges
        self.tally.add(replies)
        self.tally.evidence.add(raw, replies, outcome.completions, self.tally)
        self.tally.prompt_tokens += outcome.usage.prompt_tokens
        self.tally.completion_tokens += outcome.usage.completion_tokens
        self.tally.models.update(c.model for c in outcome.completions.values() if c.model)

    def scored(self) -> Scored:
        s = self.settings
        attributes = self.tally.results(n_resamples=s.n_resamples, seed=s.resample_seed)
        evidence = overlap_evidence.entries(self.tally, attributes)
        return Scored(attributes, self.tally.merges, evidence=evidence)

    def payload(self, sent: Sent) -> dict[str, Any]:
        counted = {"cases": sent.prompts, "failed": [dataclasses.asdict(f) for f in sent.failed]}
        return {"tally": self.tally, "failures": counted}


class OverlapSections:
    """List-overlap results are the AttributeResults every report format renders as its
    core tables and charts; the kind adds no section of its own."""

    def measure(self, result: AuditResult) -> str:
        m = result.meta
        return f"{m.metric}@{m.k} {m.variant}"

    def lines(self, data: Any) -> list[str]:
        return []

    def html(self, data: Any) -> str:
        return ""

    def properties(self, data: Any) -> list[tuple[str, float | int | str]]:
        return []


class OverlapAudit:
    """The FaiRLLM list-overlap audit, and the default kind."""

    name = "overlap"
    sections = OverlapSections()

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
        return list_cases(settings, grid, entities, attributes)

    def scorer(
        self,
        settings: AuditSettings,
        entities: Sequence[str],
        first: Sequence[PromptCase],
        inputs: AuditInputs,
    ) -> OverlapScorer:
        s = settings
        config = TallyConfig(s.metrics, s.k, s.repeats, s.variant, s.missing)
        return OverlapScorer(settings, Tally.start(entities, layout_of(first), config))

    def merge(
        self, settings: AuditSettings, parts: Sequence[ShardResult], rebuild: Rebuild
    ) -> Merged:
        """The shards' tallies united (the prompts are never rebuilt)."""
        from pytest_recfair.engine import sharding

        meta, tally = sharding.merge_results(parts)
        counted = [p.failures for p in parts if p.failures is not None]
        sent = Sent(
            prompts=sum(int(c["cases"]) for c in counted),
            failed=[unanswered.FailedPrompt(**f) for c in counted for f in c["failed"]],
            prompt_tokens=tally.prompt_tokens,
            completion_tokens=tally.completion_tokens,
            cost=sharding.merged_cost(parts),
            models=set(tally.models),
        )
        return Merged(meta, OverlapScorer(settings, tally), sent)

    def failures(
        self, settings: AuditSettings, result: AuditResult, baseline: AuditResult | None
    ) -> tuple[GateFailure, ...]:
        return ()  # the list-overlap gate (pytest_recfair.gate.thresholds) judges these results


OVERLAP = OverlapAudit()


def layout_of(cases: Sequence[PromptCase]) -> dict[str, list[str]]:
    """attribute -> its values, in prompt order (from one entity's cases)."""
    out: dict[str, list[str]] = {}
    for c in cases:
        if c.attribute is not None and c.value is not None:
            values = out.setdefault(c.attribute, [])
            if c.value not in values:
                values.append(c.value)
    return out


def list_cases(
    settings: AuditSettings, grid: Grid, entities: Sequence[Entity], attributes: list[str] | None
) -> list[PromptCase]:
    """The recommendation-list prompts of the settings (neutral and per attribute value);
    the item-side audit asks the same lists and reads other things off them."""
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
