"""What a kind of audit is, and the one request every run mode hands the engine.

The engine's run modes (:mod:`.pipeline` one run, :mod:`.sharding` shards and their
merge, :mod:`.batch` a batch recording, :mod:`.planning` the plan) do the shared part —
seeds, grid, chunks of entities, sending prompts, failures, cost, metadata — and ask the
:class:`AuditKind` that :func:`pytest_recfair.engine.registry.select` picks for every
kind-specific step: its prompts, a :class:`Scorer` fed one chunk of entities at a time,
its shard payload and merge, its gate failures and its report sections. None of them
names a kind: a new kind is one module plus one line in :mod:`.registry`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pytest_recfair.gate import unanswered
from pytest_recfair.prompts.grids import Grid
from pytest_recfair.prompts.seeds import Entity
from pytest_recfair.replies.catalogue import Catalogue
from pytest_recfair.results import AttributeResult, AuditResult, GateFailure
from pytest_recfair.settings import AuditSettings

if TYPE_CHECKING:
    from pytest_recfair.cassettes.store import CassetteStore
    from pytest_recfair.engine.sharding import ShardResult
    from pytest_recfair.providers import RunOutcome
    from pytest_recfair.report.sections import KindSections

__all__ = [
    "AuditInputs",
    "AuditKind",
    "AuditRequest",
    "FollowUp",
    "Merged",
    "OwnEntities",
    "PlannedFollowUp",
    "Scored",
    "Scorer",
    "Sent",
    "Shard",
    "select",
    "shard_positions",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard ``index`` (1-based) of ``count`` (``--fairness-shard=I/N``)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def shard_positions(n: int, shard: Shard | None) -> range:
    """Positions (0-based) of the entities that ``shard`` audits out of ``n``."""
    return range(n) if shard is None else range(shard.index - 1, n, shard.count)


def select(items: Sequence[T], shard: Shard | None) -> list[T]:
    """The items (entities) shard I/N audits: every N-th, starting at position I-1."""
    return [items[i] for i in shard_positions(len(items), shard)]


@dataclass(frozen=True, slots=True)
class AuditInputs:
    """What some kinds need beyond seeds and grid, resolved by the caller (plugin).

    ``catalogue``: item metadata (item-side audits); ``candidates``: entity id or name ->
    candidate titles (candidate-position audits); ``absent``: (attribute, value label,
    entity id) cases a published run never answered, which are not asked; ``where``: the
    directories a kind resolves its own relative file settings from (the test file's, then
    the rootdir), as the plugin resolves seeds and catalogue files; ``judge``: the second
    model a kind asks about its replies (:class:`FollowUp`), None when none is configured.
    """

    catalogue: Catalogue | None = None
    candidates: Mapping[str, Sequence[str]] | None = None
    absent: frozenset[tuple[str, str, str]] = frozenset()
    where: tuple[Path, ...] = ()
    judge: Any = None


@dataclass(frozen=True)
class AuditRequest:
    """One audit to run, built once by the caller (plugin, ``pytest_recfair.audit``).

    ``failed``: case id -> error of prompts already known to have failed (batch lines the
    service did not answer): not sent, counted as failed prompts. ``shard``: only this
    share of the entities is sent. ``live``: the pytest progress line advanced per prompt
    (providers.progress.LiveLine); ``progress``: the runner's own line otherwise.
    """

    settings: AuditSettings
    recommender: Any
    seeds: Sequence[Entity]
    grid: Grid
    test_id: str
    cassettes: CassetteStore | None = None
    inputs: AuditInputs = AuditInputs()
    shard: Shard | None = None
    failed: Mapping[str, str] = field(default_factory=dict)
    progress: bool | None = None
    live: Any = None


@dataclass(frozen=True, slots=True)
class Scored:
    """What a kind of audit makes of the replies."""

    attributes: tuple[AttributeResult, ...]
    merges: int = 0  # fuzzy title merges applied (0 when the kind does not merge)
    #: kind name -> its own results as plain JSON data (item-side, candidate position)
    extras: Mapping[str, Any] = field(default_factory=dict)
    #: attribute label -> the entities behind its statistic, with their lists and replies
    #: (plain JSON data in the one shape of report/evidence.py; bounded by the kind)
    evidence: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Sent:
    """What sending an audit's prompts cost and lost, whatever the kind: prompts sent or
    replayed, the failed ones, tokens, the runner's cost and the models that answered."""

    prompts: int = 0
    failed: list[unanswered.FailedPrompt] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    models: set[str] = field(default_factory=set)

    def add(self, cases: Sequence[Any], outcome: RunOutcome) -> None:
        """Count one chunk; its cost is the runner's figure (None without prices)."""
        self.prompts += len(cases)
        if outcome.errors:
            lost = [c for c in cases if c.id in outcome.errors]
            self.failed += unanswered.summarize(lost, outcome.errors).failed
        self.prompt_tokens += outcome.usage.prompt_tokens
        self.completion_tokens += outcome.usage.completion_tokens
        if outcome.cost is not None:  # priced: the runner's figure, summed over chunks
            self.cost = (self.cost or 0.0) + outcome.cost
        self.models.update(c.model for c in outcome.completions.values() if c.model)

    def summary(self) -> unanswered.FailureSummary:
        return unanswered.FailureSummary(self.prompts, tuple(self.failed))


class Scorer(Protocol):
    """A kind's running scores over one audit's entities, fed a chunk at a time."""

    def add(self, cases: Sequence[Any], outcome: RunOutcome) -> None:
        """Score one chunk of entities (every prompt of each) from its replies; a failed
        request (``outcome.errors``) is never scored as a reply."""

    def scored(self) -> Scored:
        """The results, once every entity of the audit has been added."""

    def payload(self, sent: Sent) -> dict[str, Any]:
        """What a shard writes (``sharding.write_shard`` keywords: a tally or replies);
        ``sent``: what sending the shard's prompts counted."""


@dataclass(frozen=True)
class Merged:
    """The shards of one audit, put together: metadata, scores and what was sent."""

    meta: dict[str, Any]
    scorer: Scorer
    sent: Sent


#: The whole audit's prompts and the kind's inputs, rebuilt for a merge (called only by
#: kinds whose merge replays replies).
Rebuild = Callable[[], tuple[list[Any], AuditInputs]]


class AuditKind(Protocol):
    """One kind of audit (list overlap, item attributes, candidate position, ...)."""

    #: short name, the key of its results in ``AuditResult.extras`` and of its sections
    name: str

    @property
    def sections(self) -> KindSections:
        """How every report format shows this kind's results (report/sections.py)."""

    def wants(self, settings: AuditSettings) -> bool:
        """Whether ``settings`` ask for this kind of audit."""

    def build_cases(
        self,
        settings: AuditSettings,
        grid: Grid,
        entities: Sequence[Entity],
        attributes: list[str] | None,
        inputs: AuditInputs,
    ) -> Sequence[Any]:
        """The prompts of ``entities`` (ids unique; cassettes are keyed by them); the
        prompts of a chunk are those the whole audit asks its entities."""

    def scorer(
        self,
        settings: AuditSettings,
        entities: Sequence[str],
        first: Sequence[Any],
        inputs: AuditInputs,
    ) -> Scorer:
        """An empty scorer for an audit of ``entities`` (ids; ``first``: the prompts of
        the first entity, which show the attributes and values asked)."""

    def merge(
        self,
        settings: AuditSettings,
        parts: Sequence[ShardResult],
        rebuild: Rebuild,
    ) -> Merged:
        """The shards 1..N of one audit as the unsharded run would have scored them;
        a DataError naming the files when they do not fit together."""

    def failures(
        self, settings: AuditSettings, result: AuditResult, baseline: AuditResult | None
    ) -> tuple[GateFailure, ...]:
        """Gate failures of this kind's own results (``result.extras``), beyond the
        list-overlap gate; ``baseline`` is None when there is none to compare with."""


class OwnEntities(Protocol):
    """Optional, for a kind whose entities are not the seed entities of a grid (role-play
    questions): :func:`~pytest_recfair.engine.stream.entities_of` asks it for them, and
    the grid's attributes are not checked (``attr`` then selects among its entities). Such
    a kind may also have ``check(settings, where)``, which the plugin calls at collection
    (``where``: the test file's directory and the rootdir) so a bad input file is a usage
    error before anything is sent."""

    def entities(
        self, settings: AuditSettings, seeds: Sequence[Entity], inputs: AuditInputs
    ) -> list[Entity]:
        """The entities the audit asks about (before any ``entities=N`` subsample)."""


class PlannedFollowUp(Protocol):
    """Optional, with :class:`FollowUp`: the judge calls that asking ``cases`` will bring,
    estimated before anything is sent (the replies are not known yet), so that
    ``--fairness-plan`` and the budget count them at the judge's prices."""

    def planned_follow_up(self, settings: AuditSettings, cases: Sequence[Any]) -> list[Any]:
        """Stand-ins for the judge cases of ``cases`` (same ids, estimated prompts)."""


class FollowUp(Protocol):
    """Optional, for a kind whose replies a second model judges (role-play Why answers):
    :func:`~pytest_recfair.engine.stream.follow_up` sends these cases to
    ``inputs.judge`` through the same runner and cassettes, and the scorer gets the
    chunk's cases and judge cases with both sets of replies. A judge call that fails is a
    failed prompt, like any other."""

    def follow_up(
        self, settings: AuditSettings, cases: Sequence[Any], outcome: RunOutcome
    ) -> list[Any]:
        """The judge cases for the replies of ``cases`` (ids unique)."""
