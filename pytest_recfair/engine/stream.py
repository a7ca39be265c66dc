"""Send an audit's prompts a chunk of entities at a time: memory bounded by a chunk.

For every kind alike: each chunk's prompts are built by the kind, sent (or replayed),
handed to the kind's :class:`~pytest_recfair.engine.base.Scorer` and counted in a
:class:`~pytest_recfair.engine.base.Sent`; then the chunk's cases, replies and cassettes
are dropped. A shard (``--fairness-shard=I/N``) streams only its share of the entities
into the scorer of the whole audit.

``--fairness-batch`` (:func:`record_batch`) records an audit's missing prompts through
the provider's batch API, into the cassettes a synchronous recording writes; the audit
then replays them. Which prompts are missing is decided the way replay decides it (a
lookup in the cassette store), a chunk of entities at a time. Lines the service did not
answer come back as case id -> error: the audit counts them as failed prompts instead of
asking again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.engine import registry, replaymemo
from pytest_recfair.engine.base import (
    AuditInputs,
    AuditKind,
    AuditRequest,
    Scorer,
    Sent,
    shard_share,
)
from pytest_recfair.errors import ConfigError, DataError, RecfairError
from pytest_recfair.prompts.grids import Grid, load_grid
from pytest_recfair.prompts.seeds import Entity, subsample
from pytest_recfair.prompts.templates import persona_system
from pytest_recfair.settings import AuditSettings

if TYPE_CHECKING:
    from pytest_recfair.providers.runstate import RunOptions, RunOutcome

__all__ = [
    "Streamed",
    "all_cases",
    "asked_cases",
    "attributes_of",
    "chunk_entities",
    "entities_of",
    "journal_dir",
    "prices_of",
    "record_batch",
    "run_options",
    "send",
    "stream",
]

#: Non-empty while :func:`fewer_collections` holds (it is re-entrant).
_FROZEN: list[bool] = []

# Prompts per chunk: enough that a live chunk keeps every connection busy, few enough that
# a chunk's replies and cassettes stay a few MB.
CHUNK_PROMPTS = 2048


@dataclass
class Streamed:
    """What streaming an audit produced: the scorer holds the scores."""

    entities: list[Entity]  # of the whole audit (a shard scores its share)
    grid: Grid
    scorer: Scorer
    sent: Sent


def prices_of(settings: AuditSettings) -> tuple[float, float] | None:
    """(input, output) USD per million tokens, when recfair_prices is set."""
    if settings.prices is None:
        return None
    return settings.prices.input_per_mtok, settings.prices.output_per_mtok


def run_options(settings: AuditSettings, live: Any = None) -> RunOptions:
    """How the runner sends this audit's prompts: the settings' provider keys, the
    progress line of the pytest terminal (None: the runner's own on a terminal)."""
    from pytest_recfair.providers.runstate import RunOptions  # the engine's way to httpx

    return RunOptions(
        # vcrpy patches process-wide: a prompt's calls are told apart only one at a time
        concurrency=1 if settings.intercept == "vcr" else settings.concurrency,
        intercept=settings.intercept,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
        max_retry_after=settings.max_retry_after,
        prices=prices_of(settings),
        live=live,
        max_reply_chars=settings.max_reply_chars,
        rpm=settings.rpm,
        tpm=settings.tpm,
    )


def chunk_entities(settings: AuditSettings, prompts_per_entity: int) -> int:
    """Entities per chunk: CHUNK_PROMPTS prompts, at least 8 per connection in flight."""
    count = max(CHUNK_PROMPTS, 8 * settings.concurrency * max(1, prompts_per_entity // 4))
    return max(1, count // max(1, prompts_per_entity))


def stream(request: AuditRequest, kind: AuditKind) -> Streamed:
    """Score the request's entities (all, or its shard's share) chunk by chunk; a replay
    of unchanged inputs is served whole from :mod:`.replaymemo`."""
    with fewer_collections():
        return _stream(request, kind)


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Python's cyclic collector runs every 700 net allocations and then walks every
    tracked object; an audit allocates millions of small acyclic objects (decoded
    cassettes, parsed replies, cases), so it spent ~15% of a replay walking the same
    long-lived objects (pytest's, numpy's, the plugin's) again and again. For the audit
    those are frozen (never walked) and the first threshold raised; both are restored
    after. Nothing here makes reference cycles, so memory is unchanged
    (docs/performance.md)."""
    if _FROZEN:  # inside another audit step's: already frozen
        yield
        return
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(old[0], 50_000), *old[1:])
    _FROZEN.append(True)
    try:
        yield
    finally:
        _FROZEN.pop()
        gc.set_threshold(*old)
        gc.unfreeze()


def _stream(request: AuditRequest, kind: AuditKind) -> Streamed:
    s, inputs = request.settings, request.inputs
    entities = entities_of(s, request.seeds, request.test_id, kind, inputs)
    grid, attributes = attributes_of(s, request.grid, kind)
    first = kind.build_cases(s, grid, entities[:1], attributes, inputs)
    size = chunk_entities(s, len(first))

    def built() -> Iterator[list[Any]]:  # what replaymemo.prompts_digest digests
        if getattr(kind, "entities", None) is None:
            yield asked_cases(s, first, inputs)
            return
        for start in range(0, len(entities), size):
            chunk = entities[start : start + size]
            yield asked_cases(s, kind.build_cases(s, grid, chunk, attributes, inputs), inputs)

    memo_key = replaymemo.key(request, kind, grid, entities, built)
    looked = memo_key.value() if memo_key is not None and memo_key.now else None
    if looked is not None:
        hit = replaymemo.served(looked, request, kind, lambda: (all_cases(kind, request), inputs))
        if hit is not None:
            _advance(request.live, hit.sent)
            return Streamed(entities, grid, replaymemo.KeptScores(hit.scorer, looked), hit.sent)
    out = Streamed(entities, grid, kind.scorer(s, [e.id for e in entities], first, inputs), Sent())
    selected = shard_share(entities, request.shard)
    kept = None if memo_key is None else replaymemo.Recorder(memo_key)
    for start in range(0, len(selected), size):
        chunk = selected[start : start + size]
        cases = asked_cases(s, kind.build_cases(s, grid, chunk, attributes, inputs), inputs)
        cases, outcome = follow_up(request, kind, cases, send(request, cases))
        out.scorer.add(cases, outcome)
        out.sent.add(cases, outcome)
        if kept is not None:
            kept.chunk(request, [e.id for e in chunk], outcome)
        if request.cassettes is not None:
            request.cassettes.release(request.test_id, [e.id for e in chunk])
    saved = None if kept is None else kept.save(request, out.scorer, out.sent)
    if saved is not None:
        out.scorer = replaymemo.KeptScores(out.scorer, saved)
    return out


def _advance(live: Any, sent: Sent) -> None:
    """The pytest progress line, for prompts served from the replay cache at once."""
    advance = getattr(live, "advance_many", None)
    if advance is not None:
        tokens = sent.prompt_tokens + sent.completion_tokens
        advance(len(sent.failed), sent.prompts - len(sent.failed), tokens, sent.cost)


def send(request: AuditRequest, cases: Sequence[Any]) -> RunOutcome:
    """Send ``cases`` (those already known to have failed are not sent, they stay failed)."""
    from pytest_recfair.providers.runner import run_cases

    failed = request.failed
    known = {c.id: failed[c.id] for c in cases if c.id in failed} if failed else {}
    outcome = run_cases(
        request.recommender,
        [c for c in cases if c.id not in known] if known else list(cases),
        run_options(request.settings, request.live),
        cassettes=request.cassettes,
        test_id=request.test_id,
        progress=False if request.live is not None else request.progress,
        allowance=request.allowance,
    )
    if known:
        outcome = dataclasses.replace(outcome, errors={**outcome.errors, **known})
    return outcome


def follow_up(
    request: AuditRequest, kind: AuditKind, cases: list[Any], outcome: RunOutcome
) -> tuple[list[Any], RunOutcome]:
    """The chunk's cases and replies, with those of the judge calls a kind asks of
    ``inputs.judge`` (:class:`~.base.FollowUp`); unchanged without a judge."""
    ask = getattr(kind, "follow_up", None)
    judge = request.inputs.judge
    more = [] if ask is None or judge is None else ask(request.settings, cases, outcome)
    if not more:
        return cases, outcome
    got = send(dataclasses.replace(request, recommender=judge), more)
    costs = [c for c in (outcome.cost, got.cost) if c is not None]
    joined = dataclasses.replace(
        outcome,
        completions={**outcome.completions, **got.completions},
        errors={**outcome.errors, **got.errors},
        usage=outcome.usage + got.usage,
        cost=sum(costs) if costs else None,
        requests=outcome.requests + got.requests,
        retries=outcome.retries + got.retries,
    )
    return [*cases, *more], joined


def all_cases(kind: AuditKind, request: AuditRequest) -> list[Any]:
    """Every prompt the whole audit asks (its shard's share, with a shard), at once."""
    s = request.settings
    entities = entities_of(s, request.seeds, request.test_id, kind, request.inputs)
    entities = shard_share(entities, request.shard)
    grid, attributes = attributes_of(s, request.grid, kind)
    built = kind.build_cases(s, grid, entities, attributes, request.inputs)
    return asked_cases(s, built, request.inputs)


def entities_of(
    settings: AuditSettings,
    seeds: Sequence[Entity],
    test_id: str,
    kind: AuditKind | None = None,
    inputs: AuditInputs | None = None,
) -> list[Entity]:
    """The audit's entities: the seeds, or a kind's own (:class:`~.base.OwnEntities`),
    subsampled to ``entities=N``."""
    own = getattr(kind, "entities", None)
    if own is not None:
        seeds = own(settings, seeds, inputs or AuditInputs())
    entities = subsample(list(seeds), settings.entities, seed=settings.seed)
    if not entities:
        raise DataError(
            f"{test_id}: the seed set is empty; give @fairness(seeds=...) a file or fixture "
            "with at least one entity."
        )
    return entities


def asked_cases(settings: AuditSettings, cases: Sequence[Any], inputs: AuditInputs) -> list[Any]:
    """The cases to send: those a published run never answered are left out (their
    entity then leaves that value's mean, as the FaiRLLM notebook does); the ``system``
    setting replaces the templates' system message."""
    if settings.system is not None:
        cases = [dataclasses.replace(c, system=settings.system) for c in cases]
    if settings.role is not None:  # a persona (docs/roleplay.md): "You are a {role}." first
        role = settings.role
        cases = [dataclasses.replace(c, system=persona_system(role, c.system)) for c in cases]
    if not inputs.absent:
        return list(cases)
    return [
        c
        for c in cases
        if c.attribute is None or (c.attribute, c.value, c.entity_id) not in inputs.absent
    ]


def attributes_of(
    settings: AuditSettings, grid: Grid, kind: AuditKind | None = None
) -> tuple[Grid, list[str] | None]:
    """Which attributes to ask about; "personality" comes from its own bundled grid. A
    kind with its own entities selects by ``attr`` itself: the grid is not asked."""
    if settings.attr is None:
        return grid, None
    if getattr(kind, "entities", None) is not None:
        return grid, [settings.attr]
    try:
        grid.attribute(settings.attr)
    except (KeyError, RecfairError) as exc:
        if not settings.personality:
            names = ", ".join(a.name for a in grid.attributes)
            raise DataError(
                f"@fairness(attr={settings.attr!r}): grid {grid.name!r} has no such attribute "
                f"({exc}). Allowed: {names}, an intersectional pair such as "
                "'race x gender', or 'personality'."
            ) from None
        grid = load_grid("personality")
    return grid, [settings.attr]


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
    entities = entities_of(s, request.seeds, request.test_id, kind, inputs)
    grid, attributes = attributes_of(s, request.grid, kind)
    first = kind.build_cases(s, grid, entities[:1], attributes, inputs)
    selected = shard_share(entities, request.shard)
    size = chunk_entities(s, len(first))
    for start in range(0, len(selected), size):
        chunk = selected[start : start + size]
        built = kind.build_cases(s, grid, chunk, attributes, inputs)
        yield [e.id for e in chunk], asked_cases(s, built, inputs)
