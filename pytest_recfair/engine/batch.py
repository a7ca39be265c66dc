"""``--fairness-batch``: record an audit's missing prompts through the provider's batch
API, into the cassettes a synchronous recording writes; the audit then replays them.

Which prompts are missing is decided the way replay decides it (a lookup in the cassette
store), a chunk of entities at a time. Lines the service did not answer come back as
case id -> error: the audit counts them as failed prompts instead of asking again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pytest_recfair.cassettes.store import CassetteStore, sanitize_name
from pytest_recfair.engine import overlap, pipeline, registry, stream
from pytest_recfair.engine import shardfile as shards
from pytest_recfair.engine.base import AuditInputs
from pytest_recfair.engine.shardfile import Shard
from pytest_recfair.errors import ConfigError
from pytest_recfair.prompts import Entity, Grid, PromptCase
from pytest_recfair.providers.batch import cassette_recorder, run_batch
from pytest_recfair.settings import AuditSettings

__all__ = ["journal_path", "record_batch"]


def journal_path(root: Path, test_id: str) -> Path:
    """Where the batch ids of ``test_id``'s recording are kept while it runs."""
    return root / ".batches" / f"{sanitize_name(test_id)}.json"


def record_batch(
    settings: AuditSettings,
    recommender: Any,
    *,
    seeds: Sequence[Entity],
    grid: Grid,
    root: Path,
    test_id: str,
    shard: Shard | None = None,
    progress: Callable[[str], None] | None = None,
    inputs: AuditInputs | None = None,
) -> dict[str, str]:
    """Record every prompt of the audit that has no recording yet; failed case ids."""
    if not hasattr(recommender, "build_request"):
        raise ConfigError(
            f"--fairness-batch: {test_id} audits a Python callable, which has no batch API; "
            "set recfair_provider = openai or anthropic (and recfair_model), or drop the option."
        )
    store = CassetteStore(root, "new_episodes")
    store.add_secrets(getattr(recommender, "secrets", ()))
    todo = _missing(
        settings, recommender, seeds, grid, store, test_id, shard, inputs or AuditInputs()
    )
    if not todo:
        return {}
    try:
        outcome = run_batch(
            recommender,
            todo,
            journal=journal_path(root, test_id),
            record=cassette_recorder(store, test_id),
            poll_interval=settings.batch_poll,
            progress=progress,
        )
    finally:
        store.flush()
    if outcome.errors and progress is not None:
        first_id, first = next(iter(outcome.errors.items()))
        progress(
            f"batch: {len(outcome.errors)} of {len(todo)} prompts failed (never recorded; "
            f"they count as failed prompts); first [{first_id}] {first}"
        )
    return outcome.errors


def _missing(
    settings: AuditSettings,
    recommender: Any,
    seeds: Sequence[Entity],
    grid: Grid,
    store: CassetteStore,
    test_id: str,
    shard: Shard | None,
    inputs: AuditInputs,
) -> list[PromptCase]:
    """The cases replay would not find, a chunk of entities at a time."""
    todo: list[PromptCase] = []
    for entity_ids, cases in _chunks(settings, seeds, grid, test_id, shard, inputs):
        for case in cases:
            request = recommender.build_request(case.system, case.prompt)
            found = store.lookup(
                test_id,
                case.entity_id,
                request.method,
                str(request.url),
                request.content,
                case.repeat,
                case_id=case.id,
            )
            if found is None:
                todo.append(case)
        store.release(test_id, entity_ids)
    return todo


def _chunks(
    settings: AuditSettings,
    seeds: Sequence[Entity],
    grid: Grid,
    test_id: str,
    shard: Shard | None,
    inputs: AuditInputs,
) -> Iterator[tuple[list[str], list[Any]]]:
    """(entity ids, the cases the audit will send for them), as the audit builds them: a
    list-overlap audit per chunk of entities, other kinds (which need the candidates and
    build across entities) all at once, this shard's entities only."""
    kind = registry.select(settings)
    if kind is not overlap.OVERLAP:
        asked = pipeline.kind_cases(
            settings, kind, seeds=seeds, grid=grid, test_id=test_id, inputs=inputs
        )
        mine = [e.id for e in shards.select(asked.entities, shard)]
        keep = set(mine)
        yield mine, [c for c in asked.cases if c.entity_id in keep]
        return
    entities = shards.select(pipeline.entities_of(settings, seeds, test_id), shard)
    grid, attributes = pipeline.attributes_of(settings, grid)
    size = stream.chunk_entities(settings, 32)
    for start in range(0, len(entities), size):
        chunk = entities[start : start + size]
        built = kind.build_cases(settings, grid, chunk, attributes, inputs)
        yield [e.id for e in chunk], pipeline.asked_cases(settings, built, inputs)
