"""What a kind of audit is, the request every run mode hands the engine, and a shard's
data; run modes ask the :class:`AuditKind` for each kind-specific step, never naming one."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from pytest_recfair.errors import DataError
from pytest_recfair.gate import unanswered
from pytest_recfair.prompts.grids import Grid
from pytest_recfair.prompts.seeds import Entity
from pytest_recfair.replies.catalogue import Catalogue
from pytest_recfair.results import AttributeResult, AuditResult, GateFailure
from pytest_recfair.settings import AuditSettings
from pytest_recfair.settings.values import Shard, parse_shard

if TYPE_CHECKING:
    from pytest_recfair.cassettes.store import CassetteStore
    from pytest_recfair.engine.overlap.tally import Tally
    from pytest_recfair.providers.base import Completion
    from pytest_recfair.providers.runstate import RunOutcome
    from pytest_recfair.report.sections import KindSections
from pytest_recfair import secrets

T = TypeVar("T")


def shard_share(items: Sequence[T], shard: Shard | None) -> list[T]:
    """The items (entities) shard I/N audits: every N-th, starting at position I-1."""
    return list(items if shard is None else items[shard.index - 1 :: shard.count])


@dataclass(frozen=True, slots=True)
class AuditInputs:
    """What some kinds need beyond seeds and grid, resolved by the caller."""

    catalogue: Catalogue | None = None
    candidates: Mapping[str, Sequence[str]] | None = None
    absent: frozenset[tuple[str, str, str]] = frozenset()
    where: tuple[Path, ...] = ()
    judge: Any = None


@dataclass(frozen=True)
class AuditRequest:
    """One audit to run, built once by the caller (plugin, ``pytest_recfair.audit``)."""

    settings: AuditSettings
    recommender: Any
    seeds: Sequence[Entity]
    grid: Grid
    test_id: str
    cassettes: CassetteStore | None = None
    inputs: AuditInputs = AuditInputs()
    shard: Shard | None = None
    failed: Mapping[str, str] = field(default_factory=dict)  # case id -> error: not sent
    progress: bool | None = None
    live: Any = None
    allowance: Any = None  # what a Python pipeline's live model calls may still spend


@dataclass(frozen=True, slots=True)
class Scored:
    """What a kind of audit makes of the replies."""

    attributes: tuple[AttributeResult, ...]
    merges: int = 0  # fuzzy title merges applied
    extras: Mapping[str, Any] = field(default_factory=dict)  # kind name -> its JSON results
    #: attribute label -> its entities, lists and replies (report/evidence.py's shape)
    evidence: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Sent:
    """What sending an audit's prompts cost and lost, whatever the kind."""

    prompts: int = 0
    failed: list[unanswered.FailedPrompt] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    models: set[str] = field(default_factory=set)

    def add(self, cases: Sequence[Any], outcome: RunOutcome) -> None:
        lost = [c for c in cases if c.id in outcome.errors] if outcome.errors else []
        failed = list(unanswered.summarize(lost, outcome.errors).failed) if lost else []
        u, models = outcome.usage, {c.model for c in outcome.completions.values() if c.model}
        self.absorb(
            Sent(len(cases), failed, u.prompt_tokens, u.completion_tokens, outcome.cost, models)
        )

    def absorb(self, other: Sent) -> Sent:
        """``other``'s counts added (a chunk's, or another process's chunk's: the same bits;
        the cost is the runner's figure, None without prices)."""
        self.prompts += other.prompts
        self.failed += other.failed
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        if other.cost is not None:
            self.cost = (self.cost or 0.0) + other.cost
        self.models |= other.models
        return self


class Scorer(Protocol):
    """A kind's running scores over one audit's entities, fed a chunk at a time."""

    # a chunk of entities; a failed request (``outcome.errors``) is never scored
    def add(self, cases: Sequence[Any], outcome: RunOutcome) -> None: ...

    def scored(self) -> Scored: ...

    def payload(self, sent: Sent) -> dict[str, Any]: ...  # ``shard_doc`` keywords

    # its state (a second process's half, pickled); such a part added as ``add`` adds chunks
    def part(self) -> Any: ...

    def absorb(self, part: Any) -> None: ...


@dataclass(frozen=True)
class Merged:
    """The shards of one audit, put together: metadata, scores and what was sent."""

    meta: dict[str, Any]
    scorer: Scorer
    sent: Sent


#: The whole audit's prompts and the kind's inputs, rebuilt for a merge that replays replies.
Rebuild = Callable[[], tuple[list[Any], AuditInputs]]


class AuditKind(Protocol):
    """One kind of audit. Optional methods, looked up by name: ``entities`` (its own
    entities instead of the seeds), ``check`` (its input files, at collection), ``follow_up``
    (judge cases for the replies; a failed one is a failed prompt), ``planned_follow_up``."""

    name: str  # the key of its results in ``AuditResult.extras`` and of its sections

    @property
    def sections(self) -> KindSections: ...

    def build_cases(
        self, settings: AuditSettings, grid: Grid, entities: Sequence[Entity], inputs: AuditInputs
    ) -> Sequence[Any]: ...  # the prompts of ``entities``; ids unique (they key cassettes)

    def scorer(
        self,
        settings: AuditSettings,
        entities: Sequence[str],
        first: Sequence[Any],
        inputs: AuditInputs,
    ) -> Scorer: ...  # an empty one; ``first``: the first entity's prompts (what is asked)

    def merge(
        self, settings: AuditSettings, parts: Sequence[ShardResult], rebuild: Rebuild
    ) -> Merged: ...  # the shards as the unsharded run scored them; DataError if they misfit

    def failures(
        self, settings: AuditSettings, result: AuditResult, baseline: AuditResult | None
    ) -> tuple[GateFailure, ...]: ...  # of the kind's own results (``result.extras``)


SHARD_FORMAT: Final = "pytest-recfair-shard"
SHARD_VERSION: Final = 1


# metadata shards may differ in: the model (checked apart), the run's, or names of inputs
# compared by content
_PER_SHARD_META: Final = frozenset({"model", "record_mode", "plugin_version", "grid", "templates"})


@dataclass(frozen=True)
class ShardResult:
    """One shard's output: its audit, metadata and tally (list overlap) or replies."""

    path: Path
    test_id: str
    shard: Shard
    meta: dict[str, Any]
    tally: Tally | None
    replies: dict[str, dict[str, Any]] | None = None
    failures: dict[str, Any] | None = None  # list overlap: {"cases": n, "failed": [...]}
    cost: float | None = None  # None: unpriced
    #: the whole audit's inputs, name -> digest (None: a file of an older version)
    inputs: dict[str, str] | None = None


def shard_doc(
    *,
    test_id: str,
    shard: Shard,
    meta: Mapping[str, Any],
    tally: Tally | None = None,
    replies: Mapping[str, Mapping[str, Any]] | None = None,
    failures: Mapping[str, Any] | None = None,
    cost: float | None = None,
    inputs: Mapping[str, str] | None = None,
    packed: bool = False,
) -> dict[str, Any]:
    """A shard file's JSON document (``packed``: tally rows as bytes, for the replay cache)."""
    doc = {
        "format": SHARD_FORMAT,
        "version": SHARD_VERSION,
        "test_id": test_id,
        "shard": {"index": shard.index, "count": shard.count},
        "meta": dict(meta),
        "cost": cost,
        "inputs": None if inputs is None else dict(inputs),
        "tally": None if tally is None else tally.to_dict(packed=packed),
        "failures": None if tally is None or failures is None else dict(failures),
        "replies": None if tally is not None else {k: dict(v) for k, v in (replies or {}).items()},
    }
    return {k: v for k, v in doc.items() if v is not None}


def shard_of_doc(doc: dict[str, Any], path: Path) -> ShardResult:
    """The ShardResult of a shard document (DataError naming ``path`` when malformed)."""
    try:
        info = doc["shard"]
        shard = parse_shard(f"{info['index']}/{info['count']}", source=str(path))
        from pytest_recfair.engine.overlap.tally import Tally  # the list-overlap payload

        part, failed = doc.get("replies"), doc.get("failures")  # shapes: the shard schema's
        return ShardResult(
            path, str(doc["test_id"]), shard, dict(doc["meta"]),
            Tally.from_dict(doc["tally"]) if part is None else None,
            None if part is None else {n: dict(part[n]) for n in ("completions", "errors")},
            None if failed is None else {"cases": int(failed["cases"]),
                                         "failed": list(failed["failed"])},
            None if doc.get("cost") is None else float(doc["cost"]),
            doc.get("inputs"),
        )  # fmt: skip
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise DataError(
            f"shard result {path}: malformed ({type(exc).__name__}: {exc}); re-run that shard."
        ) from None


def merge_replies(results: Sequence[ShardResult]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The metadata and united replies of reply shards (disjoint entities: no id repeats)."""
    meta = merged_meta(results)  # one model: shards of several are refused there
    parts = [r.replies for r in results if r.replies is not None]
    if len(parts) != len(results):
        raise DataError(mixed_error(results))
    united = {
        n: {k: v for part in parts for k, v in part[n].items()} for n in ("completions", "errors")
    }
    return meta, united


def mixed_error(results: Sequence[ShardResult]) -> str:
    where = ", ".join(str(r.path) for r in results)
    return (
        f"--fairness-merge: the shards of {results[0].test_id} hold different kinds of "
        f"result (files {where}); re-run all shards with the same plugin version and options."
    )


def merged_meta(results: Sequence[ShardResult]) -> dict[str, Any]:
    """The audit's metadata once shards 1..N are each there once with the same settings."""
    first = results[0]
    test_id, count = first.test_id, first.shard.count
    where = ", ".join(str(r.path) for r in results)
    if any(r.shard.count != count for r in results):
        raise DataError(
            f"--fairness-merge: the shards of {test_id} were split different ways "
            f"({sorted({str(r.shard) for r in results})}; files {where}); merge one run's shards."
        )
    seen = sorted(r.shard.index for r in results)
    if seen != list(range(1, count + 1)):
        missing = sorted(set(range(1, count + 1)) - set(seen))
        twice = sorted({i for i in seen if seen.count(i) > 1})
        said = [f"{what} {', '.join(f'{i}/{count}' for i in ids)}"
                for what, ids in (("missing", missing), ("given twice", twice)) if ids]  # fmt: skip
        raise DataError(
            f"--fairness-merge: {test_id} needs shards 1..{count} once each; "
            f"{'; '.join(said)} (files {where})."
        )
    models = sorted({str(r.meta.get("model")) for r in results})
    if len(models) > 1:
        raise DataError(
            f"--fairness-merge: the shards of {test_id} audited different models "
            f"({', '.join(models)}; files {where}); merge the shards of one model's run."
        )
    for r in results[1:]:  # a key only one shard has differs
        keys = (first.meta.keys() | r.meta.keys()) - _PER_SHARD_META
        diff = sorted(k for k in keys if first.meta.get(k, ...) != r.meta.get(k, ...))
        if diff:
            raise DataError(
                f"--fairness-merge: shard {r.shard} of {test_id} ({r.path}) audited with other "
                f"settings than shard {first.shard} ({', '.join(diff)} differ); re-run all shards "
                "with the same options."
            )
    return dict(first.meta)


def merged_cost(parts: Sequence[ShardResult]) -> float | None:
    """The shards' runner costs added up (None when the shards were not priced)."""
    costs = [p.cost for p in parts if p.cost is not None]
    return sum(costs) if costs else None


class PooledScorer:
    """Replies kept chunk after chunk, scored by ``score`` when asked."""

    def __init__(self, score: Callable[[Sequence[Any], Mapping[str, Any]], Scored]) -> None:
        self._score = score
        self.cases: list[Any] = []
        self.completions: dict[str, Completion] = {}
        self.errors: dict[str, str] = {}

    def add(self, cases: Sequence[Any], outcome: RunOutcome) -> None:
        self.absorb((cases, outcome.completions, outcome.errors))

    def part(self) -> tuple[list[Any], dict[str, Completion], dict[str, str]]:
        return self.cases, self.completions, self.errors

    def absorb(
        self, part: tuple[Sequence[Any], Mapping[str, Completion], Mapping[str, str]]
    ) -> None:
        cases, completions, errors = part  # (unpacked first: a bad part changes nothing)
        self.cases.extend(cases)
        self.completions.update(completions)
        self.errors.update(errors)

    def scored(self) -> Scored:
        return self._score(self.cases, self.completions)

    def payload(self, sent: Sent) -> dict[str, Any]:
        """The replies, scrubbed like a cassette (a reply or error may quote the prompt)."""
        completions = {
            k: {"text": c.text, "finish_reason": c.finish_reason, "model": c.model,
                "usage": None if (u := c.usage) is None else [u.prompt_tokens, u.completion_tokens]}
            for k, c in self.completions.items()
        }  # fmt: skip
        return {"replies": secrets.scrub_json({"completions": completions, "errors": self.errors})}


class PooledKind:
    """A kind scored over all entities at once; merged by replaying the shards' replies."""

    score: Callable[[AuditSettings, AuditInputs, Sequence[Any], Mapping[str, Any]], Scored]

    def scorer(
        self,
        settings: AuditSettings,
        entities: Sequence[str],
        first: Sequence[Any],
        inputs: AuditInputs,
    ) -> PooledScorer:
        return PooledScorer(lambda cases, replies: self.score(settings, inputs, cases, replies))

    def merge(
        self, settings: AuditSettings, parts: Sequence[ShardResult], rebuild: Rebuild
    ) -> Merged:
        from pytest_recfair.providers.base import Completion, Usage
        from pytest_recfair.providers.runstate import RunOutcome

        meta, replies = merge_replies(parts)
        cases, inputs = rebuild()
        completions = {
            k: Completion(str(v["text"]), v.get("finish_reason"),
                          None if (u := v.get("usage")) is None else Usage(int(u[0]), int(u[1])),
                          v.get("model"))
            for k, v in replies["completions"].items()
        }  # fmt: skip
        errors = {k: str(v) for k, v in replies["errors"].items()}
        missing = [c.id for c in cases if c.id not in completions and c.id not in errors]
        if missing:
            where = ", ".join(str(p.path) for p in parts)
            raise DataError(
                f"--fairness-merge: the shards of {parts[0].test_id} ({where}) hold no reply "
                f"for {len(missing)} of its {len(cases)} prompts; the merge run must use the "
                "seeds, grid and inputs the shards used (re-run the shards after a change)."
            )
        usage = sum((c.usage for c in completions.values() if c.usage), Usage())
        outcome = RunOutcome(completions, errors, usage, merged_cost(parts))
        scorer = self.scorer(settings, (), (), inputs)  # a pooled one reads neither
        scorer.add(cases, outcome)
        sent = Sent()
        sent.add(cases, outcome)
        return Merged(meta, scorer, sent)


def attributes_of(cases: Sequence[Any]) -> list[str]:
    """The attributes ``cases`` ask about, in prompt order."""
    return list(dict.fromkeys(c.attribute for c in cases if c.attribute is not None))


def prop_key(*names: Any) -> str:
    """A JUnit property name: ``recfair.`` and each name lower-cased, spaces as ``_``."""
    return ".".join(["recfair", *(str(n).casefold().replace(" ", "_") for n in names)])


def drifts(cmp: Any, names: Sequence[str]) -> list[tuple[str, float, float, float]]:
    """(measure, baseline, candidate, p) of each measure of a paired drift test."""
    return [
        (n, float(cmp.baseline[i]), float(cmp.candidate[i]), float(cmp.p_value[i]))
        for i, n in enumerate(names)
    ]
