"""Run one audit, a chunk of entities at a time, so memory is bounded by a chunk:
grid -> prompts -> recommender (live or cassette) -> the kind's scorer. Failed prompts
are counted, never scored."""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.engine import registry, replaymemo
from pytest_recfair.engine.base import AuditKind, AuditRequest, Scorer, Sent, shard_share
from pytest_recfair.errors import ConfigError, DataError, ProviderError, RecfairError
from pytest_recfair.fileio import Child, bulk_work
from pytest_recfair.gate import unanswered
from pytest_recfair.prompts.grids import Grid, load_grid
from pytest_recfair.prompts.seeds import Entity, seeds_digest, subsample
from pytest_recfair.prompts.templates import persona_system, templates_digest
from pytest_recfair.results import META_TYPES, AuditMeta, AuditResult
from pytest_recfair.settings import AuditSettings
from pytest_recfair.vocab import PLUGIN_VERSION

if TYPE_CHECKING:
    from pytest_recfair.providers.runstate import RunOutcome

# Prompts per chunk: enough to keep every connection busy, few enough for a few MB a chunk.
CHUNK_PROMPTS = 2048

#: A chunk's prompts as sent (``asked=False``: as the kind built them).
Build = Callable[..., list[Any]]


def measure(request: AuditRequest) -> AuditResult:
    """Audit the request's recommender as its settings say; the result is not gated."""
    with bulk_work():
        done = run(request)
        return finish(request.settings, done.meta, done.scorer, done.sent, done.memo)


@dataclass(frozen=True)
class Run:
    """One run's (or shard's) scorer, what was sent, and the audit's metadata."""

    entities: list[Entity]  # of the whole audit (a shard scores its share)
    meta: AuditMeta
    scorer: Scorer
    sent: Sent
    memo: bytes | None = None  # the replay cache's key of its scores


def run(request: AuditRequest) -> Run:
    """Send and score the prompts (a shard's share); replays may hit :mod:`.replaymemo`."""
    s, inputs = request.settings, request.inputs
    kind = registry.kind_for(s)
    with bulk_work():
        entities, grid, build = _setup(request, kind)

        def built() -> Iterator[list[Any]]:  # what replaymemo.prompts_digest digests
            if getattr(kind, "entities", None) is None:
                yield build(entities[:1])  # the entities' names are in the key
            else:  # each entity a question of its own
                yield from map(build, _chunks(request, entities, build))

        memo = replaymemo.key(request, kind, grid, entities, built)
        looked = memo.value() if memo is not None and memo.now else None
        hit = None
        if looked is not None:
            hit = replaymemo.served(looked, request, kind, lambda: (build(entities), inputs))
        if hit is not None:
            sent, scorer, saved = hit.sent, hit.scorer, looked
            _progress(request, sent)
        else:
            scorer = kind.scorer(s, [e.id for e in entities], build(entities[:1], False), inputs)
            kept = None if memo is None else replaymemo.Recorder(memo)
            scorer, sent = _stream(request, kind, entities, build, scorer, kept)
            saved = None if kept is None else kept.save(request, scorer, sent)
        meta = meta_of(request, kind, grid, entities, sent.models)
        return Run(entities, meta, scorer, sent, saved)


def finish(
    settings: AuditSettings, meta: AuditMeta, scorer: Scorer, sent: Sent, memo: bytes | None = None
) -> AuditResult:
    """The ungated result of a complete scorer; too many failed prompts: a ProviderError."""
    summary = check_failures(settings, meta.test_id, sent)
    scored = replaymemo.scored(scorer, memo)
    return AuditResult(
        meta=meta,
        attributes=scored.attributes,
        prompt_tokens=sent.prompt_tokens,
        completion_tokens=sent.completion_tokens,
        cost=sent.cost,
        merges=scored.merges,
        extras=dict(scored.extras),
        evidence=dict(scored.evidence),
        failed=summary.by_group(),
        prompts=summary.total if summary.count else 0,
    )


def check_failures(settings: AuditSettings, test_id: str, sent: Sent) -> unanswered.FailureSummary:
    """The failed prompts; a ProviderError listing them when above ``max_failed``."""
    summary = unanswered.FailureSummary(sent.prompts, tuple(sent.failed))
    if not summary.within(settings.max_failed):
        raise ProviderError(summary.message(test_id, settings.max_failed))
    return summary


def meta_of(
    request: AuditRequest, kind: AuditKind, grid: Grid, entities: Sequence[Entity], models: set[str]
) -> AuditMeta:
    """The fields of the kind's meta type: settings of the same name, or worked out here."""
    settings, recommender = request.settings, request.recommender
    name = getattr(recommender, "name", None)
    own = getattr(recommender, "model", None)
    if len(models) == 1:
        model = next(iter(models))
    elif isinstance(own, str) and own:
        model = own
    else:  # a plain callable: its name
        qual = getattr(recommender, "__qualname__", None) or type(recommender).__qualname__
        model = ",".join(sorted(models)) if models else str(qual)
    worked_out: dict[str, Callable[[], Any]] = {
        "test_id": lambda: request.test_id,
        "provider": lambda: name if isinstance(name, str) and name else "callable",
        "model": lambda: model,
        "plugin_version": lambda: PLUGIN_VERSION,
        "grid": lambda: grid.name,
        "grid_hash": lambda: grid.digest,
        "templates_hash": lambda: templates_digest(
            settings.templates, settings.domain, settings.language
        ),
        "seeds_hash": lambda: seeds_digest(list(entities)),
        "n_entities": lambda: len(entities),
        "parse": lambda: settings.parse_style,
    }
    cls = META_TYPES.get(kind.name, AuditMeta)
    return cls(
        kind=kind.name,
        **{
            f.name: worked_out[f.name]() if f.name in worked_out else getattr(settings, f.name)
            for f in fields(cls)
            if f.name != "kind"
        },
    )


def chunk_entities(settings: AuditSettings, prompts_per_entity: int) -> int:
    """Entities per chunk: CHUNK_PROMPTS prompts, at least 8 per connection in flight."""
    count = max(CHUNK_PROMPTS, 8 * settings.concurrency * max(1, prompts_per_entity // 4))
    return max(1, count // max(1, prompts_per_entity))


def _setup(request: AuditRequest, kind: AuditKind) -> tuple[list[Entity], Grid, Build]:
    """The entities, grid and builder of a chunk's cases as sent: ``system`` and ``role``
    applied, prompts a published run never answered left out (as the FaiRLLM notebook)."""
    s, inputs = request.settings, request.inputs
    entities, grid = entities_of(request, kind), request.grid
    if s.attr is not None and getattr(kind, "entities", None) is None:
        try:
            grid.attribute(s.attr)
        except (KeyError, RecfairError) as exc:
            if not s.personality:
                names = ", ".join(a.name for a in grid.attributes)
                raise DataError(
                    f"@fairness(attr={s.attr!r}): grid {grid.name!r} has no such attribute "
                    f"({exc}). Allowed: {names}, an intersectional pair such as "
                    "'race x gender', or 'personality'."
                ) from None
            grid = load_grid("personality")

    def build(chunk: Sequence[Entity], asked: bool = True) -> list[Any]:
        cases = kind.build_cases(s, grid, chunk, inputs)
        if not asked:
            return list(cases)
        if s.system is not None:
            cases = [dataclasses.replace(c, system=s.system) for c in cases]
        if s.role is not None:  # a persona (docs/roleplay.md): "You are a {role}." first
            cases = [dataclasses.replace(c, system=persona_system(s.role, c.system)) for c in cases]
        gone = inputs.absent
        return [c for c in cases if not gone or (c.attribute, c.value, c.entity_id) not in gone]

    return entities, grid, build


def _chunks(request: AuditRequest, entities: list[Entity], build: Build) -> list[list[Entity]]:
    """This shard's entities in chunks (the cases of each built when it is sent)."""
    size = chunk_entities(request.settings, len(build(entities[:1], False)))
    selected = shard_share(entities, request.shard)
    return [selected[start : start + size] for start in range(0, len(selected), size)]


def _stream(
    request: AuditRequest,
    kind: AuditKind,
    entities: list[Entity],
    build: Build,
    scorer: Scorer,
    kept: replaymemo.Recorder | None,
) -> tuple[Scorer, Sent]:
    """Send and score the audit a chunk at a time; a long exact replay's second half in a
    forked process (``_in_two``), whose scores this scorer absorbs: the same result."""
    sent = Sent()

    def step(request: AuditRequest, sent: Sent, chunk: list[Entity]) -> None:
        ids = [e.id for e in chunk]
        cases = build(chunk)
        cases, outcome = follow_up(request, kind, cases, send(request, cases))
        scorer.add(cases, outcome)
        sent.add(cases, outcome)
        if kept is not None:
            kept.chunk(request, ids, outcome)
        if request.cassettes is not None:
            request.cassettes.release(request.test_id, ids)

    chunks = _chunks(request, entities, build)
    cut = len(chunks) - (len(chunks) // 2 if _in_two(request, entities, chunks) else 0)

    def half() -> Any:  # in the fork, on its copy of the empty scorer; no progress line
        quiet = dataclasses.replace(request, live=None, progress=False)
        sents = [Sent() for _ in chunks[cut:]]  # each chunk's: added as one process adds them
        for chunk, one in zip(chunks[cut:], sents, strict=True):
            step(quiet, one, chunk)
        return scorer.part(), sents, None if kept is None else (kept.played, kept.clean)

    twin = Child(half) if cut < len(chunks) else None
    started, got = time.monotonic(), None
    try:
        for chunk in chunks[:cut]:
            step(request, sent, chunk)
        if twin is not None:  # it does the same work: long past that, it is stuck
            got = twin.result(60 + 4 * (time.monotonic() - started))
    finally:
        if twin is not None:
            twin.stop()
    if twin is None or got is None:  # one process, or the second failed: its half done here
        for chunk in chunks[cut:]:
            step(request, sent, chunk)
        return scorer, sent
    part, sents, played = got
    scorer.absorb(part)  # contiguous halves: what one process adds, in its order
    functools.reduce(Sent.absorb, sents, sent)  # chunk by chunk: the same sums to the last bit
    _progress(request, functools.reduce(Sent.absorb, sents, Sent()))
    if kept is not None and played is not None and request.cassettes is not None:
        kept.played.update(played[0])
        kept.clean = kept.clean and played[1]
        request.cassettes.serve(played[0])
    return scorer, sent


#: Chunks from which a replay is shared with a second process (fewer: the fork costs more).
_TWO_FROM: Final = 4


def _in_two(request: AuditRequest, entities: Sequence[Entity], chunks: Sequence[Any]) -> bool:
    """Is the second half of this replay done in a second process? An exact replay (as the
    store's) of ``_TWO_FROM`` chunks or more, on Linux with two free cores, not in xdist
    (its cores are in use); ``RECFAIR_PROCESSES=1``: never."""
    if (want := os.environ.get("RECFAIR_PROCESSES", "")) not in ("", "1"):
        raise ConfigError(
            f"RECFAIR_PROCESSES={want!r}: expected 1 (every replay in one process), or unset "
            "(a long replay shares its second half with a second process where it pays)."
        )
    if want or len(chunks) < _TWO_FROM or "PYTEST_XDIST_WORKER" in os.environ:
        return False
    if sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2:
        return False
    return replaymemo.exact_replay(request, entities) is not None


def _progress(request: AuditRequest, sent: Sent) -> None:
    """Prompts counted at once on the pytest progress line (served, or another process's)."""
    advance = getattr(request.live, "advance_many", None)
    if advance is not None:
        tokens = sent.prompt_tokens + sent.completion_tokens
        advance(len(sent.failed), sent.prompts - len(sent.failed), tokens, sent.cost)


def all_cases(kind: AuditKind, request: AuditRequest) -> list[Any]:
    """Every prompt the whole audit asks (its shard's share, with a shard), at once."""
    entities, _, build = _setup(request, kind)
    return build(shard_share(entities, request.shard))


def entities_of(request: AuditRequest, kind: AuditKind) -> list[Entity]:
    """The seeds, or a kind's own (``AuditKind.entities``), subsampled to ``entities=N``."""
    s, seeds, own = request.settings, request.seeds, getattr(kind, "entities", None)
    if own is not None:
        seeds = own(s, seeds, request.inputs)
    entities = subsample(list(seeds), s.entities, seed=s.seed)
    if not entities:
        raise DataError(
            f"{request.test_id}: the seed set is empty; give @fairness(seeds=...) a file or "
            "fixture with at least one entity."
        )
    return entities


def send(request: AuditRequest, cases: Sequence[Any]) -> RunOutcome:
    """Send ``cases`` (those already known to have failed are not sent, they stay failed)."""
    from pytest_recfair.providers.runner import run_cases
    from pytest_recfair.providers.runstate import RunOptions  # the engine's way to httpx

    failed, s = request.failed, request.settings
    known = {c.id: failed[c.id] for c in cases if c.id in failed} if failed else {}
    same = ("intercept", "timeout", "max_retries", "max_retry_after", "max_reply_chars")
    options = RunOptions(
        # vcrpy patches process-wide: a prompt's calls are told apart only one at a time
        concurrency=1 if s.intercept == "vcr" else s.concurrency,
        prices=s.prices,
        live=request.live,
        **{name: getattr(s, name) for name in (*same, "rpm", "tpm")},
    )
    outcome = run_cases(
        request.recommender,
        [c for c in cases if c.id not in known] if known else list(cases),
        options,
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
    """The chunk's cases and replies plus the judge calls a kind asks (``follow_up``)."""
    ask = getattr(kind, "follow_up", None)
    judge = request.inputs.judge
    more = [] if ask is None or judge is None else ask(request.settings, cases, outcome)
    if not more:
        return cases, outcome
    got = send(dataclasses.replace(request, recommender=judge), more)
    costs = [c for c in (outcome.cost, got.cost) if c is not None]
    both: dict[str, Any] = {
        k: {**getattr(outcome, k), **getattr(got, k)} for k in ("completions", "errors")
    }
    both |= {k: getattr(outcome, k) + getattr(got, k) for k in ("usage", "requests", "retries")}
    joined = dataclasses.replace(outcome, **both, cost=sum(costs) if costs else None)
    return [*cases, *more], joined


def record_batch(
    request: AuditRequest, root: Path, progress: Callable[[str], None] | None = None
) -> dict[str, str]:
    """Record every unrecorded prompt (a shard's share) under ``root``; failed id -> error."""
    recommender, test_id = request.recommender, request.test_id
    if not hasattr(recommender, "build_request"):
        raise ConfigError(
            f"--fairness-batch: {test_id} audits a Python callable, which has no batch API; "
            "set recfair_provider = openai or anthropic (and recfair_model), or drop the option."
        )
    from pytest_recfair.providers.batch import cassette_recorder, run_batch
    from pytest_recfair.providers.replay import remember_failures

    store = CassetteStore(root, "new_episodes", secrets=getattr(recommender, "secrets", ()))
    # one journal per batch, named by its request set: shared by every test and shard
    journals = root / ".batches"
    todo: list[Any] = []  # what replay would not find, a chunk of entities at a time
    entities, _, build = _setup(request, registry.kind_for(request.settings))
    for chunk in _chunks(request, entities, build):
        for case in build(chunk):
            built = recommender.build_request(case.system, case.prompt)
            key = (built.method, str(built.url), built.content, case.repeat)
            if store.lookup(test_id, case.entity_id, *key, case_id=case.id) is None:
                todo.append(case)
        store.release(test_id, [e.id for e in chunk])
    # an interrupted batch's answered lines are taken in by any run, even one with no own
    if not todo and not (journals.is_dir() and any(journals.glob("rf*.json"))):
        return {}
    try:
        outcome = run_batch(
            recommender,
            todo,
            journals=journals,
            record=cassette_recorder(store, test_id),
            test_id=test_id,
            poll_interval=request.settings.batch_poll,
            progress=progress,
        )
    finally:
        store.flush()
    remember_failures(recommender, todo, outcome.errors, root, test_id)  # a replay fails them again
    if outcome.errors and progress is not None:
        first_id, first = next(iter(outcome.errors.items()))
        progress(
            f"batch: {len(outcome.errors)} of {len(todo)} prompts failed (never recorded; "
            f"they count as failed prompts); first [{first_id}] {first}"
        )
    return outcome.errors
