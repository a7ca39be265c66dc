"""``--fairness-batch``: record an audit's missing prompts through the provider's batch
API, into the cassettes a synchronous recording writes; the audit then replays them.

Which prompts are missing is decided the way replay decides it (a lookup in the cassette
store), a chunk of entities at a time. Lines the service did not answer come back as
case id -> error: the audit counts them as failed prompts instead of asking again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_recfair import shards
from pytest_recfair.audit import pipeline, registry, stream
from pytest_recfair.audit.base import AuditInputs
from pytest_recfair.cassettes import CassetteStore, sanitize_name
from pytest_recfair.errors import ConfigError
from pytest_recfair.prompts import Entity, Grid, PromptCase
from pytest_recfair.providers.batch import cassette_recorder, run_batch
from pytest_recfair.settings import AuditSettings
from pytest_recfair.shards import Shard

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
) -> dict[str, str]:
    """Record every prompt of the audit that has no recording yet; failed case ids."""
    if not hasattr(recommender, "build_request"):
        raise ConfigError(
            f"--fairness-batch: {test_id} audits a Python callable, which has no batch API; "
            "set recfair_provider = openai or anthropic (and recfair_model), or drop the option."
        )
    store = CassetteStore(root, "new_episodes")
    store.add_secrets(getattr(recommender, "secrets", ()))
    todo = _missing(settings, recommender, seeds, grid, store, test_id, shard)
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
) -> list[PromptCase]:
    """The cases replay would not find, a chunk of entities at a time."""
    entities = shards.select(pipeline.entities_of(settings, seeds, test_id), shard)
    grid, attributes = pipeline.attributes_of(settings, grid)
    kind = registry.select(settings)
    todo: list[PromptCase] = []
    size = stream.chunk_entities(settings, 32)
    for start in range(0, len(entities), size):
        chunk = entities[start : start + size]
        for case in kind.build_cases(settings, grid, chunk, attributes, AuditInputs()):
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
        store.release(test_id, [e.id for e in chunk])
    return todo
