"""``--fairness-batch``: record an audit's missing prompts through the provider's batch
API, into the cassettes a synchronous recording writes; the audit then replays them.

Which prompts are missing is decided the way replay decides it (a lookup in the cassette
store), a chunk of entities at a time. Lines the service did not answer come back as
case id -> error: the audit counts them as failed prompts instead of asking again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.engine import registry, stream
from pytest_recfair.engine.base import AuditRequest, shard_share
from pytest_recfair.errors import ConfigError

__all__ = ["journal_dir", "record_batch"]


def journal_dir(root: Path) -> Path:
    """Where the batch journals of the cassettes under ``root`` are kept while they run
    (one per batch, named by its request set: shared by every test and shard)."""
    return root / ".batches"


def record_batch(
    request: AuditRequest, root: Path, progress: Callable[[str], None] | None = None
) -> dict[str, str]:
    """Record every prompt of the audit (its shard's share) that has no recording yet
    under ``root``; returns the failed case ids with their errors."""
    recommender, test_id = request.recommender, request.test_id
    if not hasattr(recommender, "build_request"):
        raise ConfigError(
            f"--fairness-batch: {test_id} audits a Python callable, which has no batch API; "
            "set recfair_provider = openai or anthropic (and recfair_model), or drop the option."
        )
    from pytest_recfair.providers.batch import cassette_recorder, run_batch

    store = CassetteStore(root, "new_episodes")
    store.add_secrets(getattr(recommender, "secrets", ()))
    todo = _missing(request, store)
    if not todo and not _interrupted(journal_dir(root)):
        return {}
    try:
        outcome = run_batch(
            recommender,
            todo,
            journals=journal_dir(root),
            record=cassette_recorder(store, test_id),
            test_id=test_id,
            poll_interval=request.settings.batch_poll,
            progress=progress,
        )
    finally:
        store.flush()
    from pytest_recfair.providers.replay import remember_failures

    remember_failures(recommender, todo, outcome.errors, root, test_id)  # a replay fails them again
    if outcome.errors and progress is not None:
        first_id, first = next(iter(outcome.errors.items()))
        progress(
            f"batch: {len(outcome.errors)} of {len(todo)} prompts failed (never recorded; "
            f"they count as failed prompts); first [{first_id}] {first}"
        )
    return outcome.errors


def _interrupted(journals: Path) -> bool:
    """Whether an interrupted batch may wait there (its answered lines are taken in by
    any run, even one with nothing of its own to ask)."""
    return journals.is_dir() and any(journals.glob("rf*.json"))


def _missing(request: AuditRequest, store: CassetteStore) -> list[Any]:
    """The cases replay would not find, a chunk of entities at a time."""
    todo: list[Any] = []
    for entity_ids, cases in _chunks(request):
        for case in cases:
            built = request.recommender.build_request(case.system, case.prompt)
            found = store.lookup(
                request.test_id,
                case.entity_id,
                built.method,
                str(built.url),
                built.content,
                case.repeat,
                case_id=case.id,
            )
            if found is None:
                todo.append(case)
        store.release(request.test_id, entity_ids)
    return todo


def _chunks(request: AuditRequest) -> Iterator[tuple[list[str], list[Any]]]:
    """(entity ids, the cases the audit will send for them), chunk by chunk as the audit
    builds them, this shard's entities only."""
    s, inputs = request.settings, request.inputs
    kind = registry.kind_for(s)
    entities = stream.entities_of(s, request.seeds, request.test_id, kind, inputs)
    grid, attributes = stream.attributes_of(s, request.grid, kind)
    first = kind.build_cases(s, grid, entities[:1], attributes, inputs)
    selected = shard_share(entities, request.shard)
    size = stream.chunk_entities(s, len(first))
    for start in range(0, len(selected), size):
        chunk = selected[start : start + size]
        built = kind.build_cases(s, grid, chunk, attributes, inputs)
        yield [e.id for e in chunk], stream.asked_cases(s, built, inputs)
