"""Run a list-overlap audit a chunk of entities at a time: memory bounded by a chunk.

Each chunk's prompts are built, sent (or replayed), parsed, canonicalised and scored into
a :class:`~pytest_recfair.engine.tally.Tally`; then the chunk's cases, replies and cassettes are
dropped. What stays is what the statistics need: entities x values floats per attribute
and metric, and exact sums. A shard (``--fairness-shard=I/N``) streams only its share of
the entities into a tally of the whole audit, which ``shards`` merges later.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_recfair import providers
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.engine import overlap
from pytest_recfair.engine.base import AuditInputs
from pytest_recfair.engine.tally import Tally, TallyConfig
from pytest_recfair.prompts import Entity, Grid, PromptCase
from pytest_recfair.providers import Usage
from pytest_recfair.settings import AuditSettings

__all__ = ["Streamed", "chunk_entities", "layout_of", "prices_of", "run_options", "stream"]

# Prompts per chunk: enough that a live chunk keeps every connection busy, few enough that
# a chunk's replies and cassettes stay a few MB.
CHUNK_PROMPTS = 2048


@dataclass
class Streamed:
    """What streaming an audit produced (the tally holds the scores)."""

    tally: Tally
    usage: Usage = field(default_factory=Usage)
    cases: int = 0  # prompts sent or replayed
    errors: dict[str, str] = field(default_factory=dict)  # case id -> error (no reply)
    failed: list[PromptCase] = field(default_factory=list)  # the cases of ``errors``


def prices_of(settings: AuditSettings) -> tuple[float, float] | None:
    """(input, output) USD per million tokens, when recfair_prices is set."""
    if settings.prices is None:
        return None
    return settings.prices.input_per_mtok, settings.prices.output_per_mtok


def run_options(settings: AuditSettings, live: Any = None) -> providers.RunOptions:
    """How the runner sends this audit's prompts: the settings' provider keys, the
    progress line of the pytest terminal (None: the runner's own on a terminal)."""
    return providers.RunOptions(
        concurrency=settings.concurrency,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
        prices=prices_of(settings),
        live=live,
        max_reply_chars=settings.max_reply_chars,
    )


def layout_of(cases: Sequence[PromptCase]) -> dict[str, list[str]]:
    """attribute -> its values, in prompt order (from one entity's cases)."""
    out: dict[str, list[str]] = {}
    for c in cases:
        if c.attribute is not None and c.value is not None:
            values = out.setdefault(c.attribute, [])
            if c.value not in values:
                values.append(c.value)
    return out


def chunk_entities(settings: AuditSettings, prompts_per_entity: int) -> int:
    """Entities per chunk: CHUNK_PROMPTS prompts, at least 8 per connection in flight."""
    prompts = max(CHUNK_PROMPTS, 8 * settings.concurrency * max(1, prompts_per_entity // 4))
    return max(1, prompts // max(1, prompts_per_entity))


def stream(
    settings: AuditSettings,
    recommender: Any,
    *,
    grid: Grid,
    attributes: list[str] | None,
    entities: Sequence[Entity],
    selected: Sequence[Entity],
    cassettes: CassetteStore | None,
    test_id: str,
    progress: bool | None = None,
    failed: Mapping[str, str] | None = None,
    asked: Callable[[list[PromptCase]], list[PromptCase]] = list,
    inputs: AuditInputs | None = None,
    live: Any = None,
) -> Streamed:
    """Score ``selected`` (all of ``entities``, or a shard's share) chunk by chunk.

    Cases in ``failed`` (id -> error) are not sent: they count as failed prompts.
    ``asked`` keeps the cases to send (a published run's never-answered ones are not).
    """
    inputs = inputs or AuditInputs()
    kind = overlap.OVERLAP
    first = kind.build_cases(settings, grid, list(entities[:1]), attributes, inputs)
    config = TallyConfig(
        settings.metrics, settings.k, settings.repeats, settings.variant, settings.missing
    )
    out = Streamed(Tally.start([e.id for e in entities], layout_of(first), config))
    size = chunk_entities(settings, len(first))
    for start in range(0, len(selected), size):
        chunk = list(selected[start : start + size])
        cases = asked(kind.build_cases(settings, grid, chunk, attributes, inputs))
        known = {c.id: failed[c.id] for c in cases if c.id in failed} if failed else {}
        outcome = providers.run_cases(
            recommender,
            [c for c in cases if c.id not in known] if known else cases,
            run_options(settings, live),
            cassettes=cassettes,
            test_id=test_id,
            progress=False if live is not None else progress,
        )
        if known:
            outcome = dataclasses.replace(outcome, errors={**outcome.errors, **known})
        _absorb(settings, out, cases, outcome)
        if cassettes is not None:
            cassettes.release(test_id, [e.id for e in chunk])
    return out


def _absorb(
    settings: AuditSettings,
    out: Streamed,
    cases: Sequence[PromptCase],
    outcome: providers.RunOutcome,
) -> None:
    """Score one chunk's replies into the tally and keep its totals and failures."""
    replies = overlap.parse_all(cases, outcome.completions, settings.k, settings.parse_style)
    if outcome.errors:
        replies = overlap.mark_failed(replies, outcome.errors)
    if settings.parse_style == "default":
        replies, merges = overlap.canonicalize(replies)
        out.tally.merges += merges
    out.tally.add(replies)
    out.cases += len(cases)
    out.usage = out.usage + outcome.usage
    out.tally.prompt_tokens += outcome.usage.prompt_tokens
    out.tally.completion_tokens += outcome.usage.completion_tokens
    out.tally.models.update(c.model for c in outcome.completions.values() if c.model)
    if outcome.errors:
        out.errors.update(outcome.errors)
        out.failed.extend(c for c in cases if c.id in outcome.errors)
