"""What a kind of audit is: how it builds its prompts and how it scores the replies.

The pipeline (:mod:`.pipeline`) does the shared part — seeds, grid, sending prompts,
metadata, gate — and hands prompt building and scoring to the :class:`AuditKind` that
:func:`pytest_recfair.engine.registry.select` picks for the settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pytest_recfair.prompts import Entity, Grid
from pytest_recfair.replies.catalogue import Catalogue
from pytest_recfair.results import AttributeResult, AuditResult, GateFailure
from pytest_recfair.settings import AuditSettings

__all__ = ["AuditInputs", "AuditKind", "Scored"]


@dataclass(frozen=True, slots=True)
class Scored:
    """What a kind of audit makes of the replies."""

    attributes: tuple[AttributeResult, ...]
    merges: int = 0  # fuzzy title merges applied (0 when the kind does not merge)
    #: kind name -> its own results as plain JSON data (item-side, candidate position)
    extras: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AuditInputs:
    """What some kinds need beyond seeds and grid, resolved by the caller (plugin).

    ``catalogue``: item metadata (item-side audits); ``candidates``: entity id or name ->
    candidate titles (candidate-position audits); ``absent``: (attribute, value label,
    entity id) cases a published run never answered, which are not asked.
    """

    catalogue: Catalogue | None = None
    candidates: Mapping[str, Sequence[str]] | None = None
    absent: frozenset[tuple[str, str, str]] = frozenset()


class AuditKind(Protocol):
    """One kind of audit (list overlap, item attributes, candidate position, ...)."""

    #: short name, shown in errors and docs
    name: str

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
        """The prompts to send (ids unique; cassettes are keyed by them)."""

    def score(
        self,
        settings: AuditSettings,
        cases: Sequence[Any],
        completions: Mapping[str, Any],
        inputs: AuditInputs,
    ) -> Scored:
        """Scores per attribute from the replies (``completions`` by case id; a failed
        request has no entry and is never scored as a reply)."""

    def failures(
        self, settings: AuditSettings, result: AuditResult, baseline: AuditResult | None
    ) -> tuple[GateFailure, ...]:
        """Gate failures of this kind's own results (``result.extras``), beyond the
        list-overlap gate; ``baseline`` is None when there is none to compare with."""
