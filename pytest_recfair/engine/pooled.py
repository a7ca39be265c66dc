"""The scorer of kinds whose statistics need every entity at once (item side, candidate
position: permutation tests over entities): it keeps each chunk's prompts and replies
and scores them all once the audit is complete. Its shards write their replies, and the
merge replays the united replies through a fresh scorer (``base.replay``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_recfair import secrets
from pytest_recfair.engine.base import (
    AuditInputs,
    Merged,
    Rebuild,
    Scored,
    Sent,
    ShardResult,
    replay,
)
from pytest_recfair.settings import AuditSettings

if TYPE_CHECKING:
    from pytest_recfair.providers.base import Completion
    from pytest_recfair.providers.runstate import RunOutcome

__all__ = ["PooledKind", "PooledScorer", "Score"]

#: The kind's scoring of a whole audit: prompts and completions by case id -> Scored.
Score = Callable[[Sequence[Any], Mapping[str, Any]], Scored]


class PooledScorer:
    """Replies kept chunk after chunk, scored by ``score`` when asked."""

    def __init__(self, score: Score) -> None:
        self._score = score
        self.cases: list[Any] = []
        self.completions: dict[str, Completion] = {}
        self.errors: dict[str, str] = {}

    def add(self, cases: Sequence[Any], outcome: RunOutcome) -> None:
        self.cases.extend(cases)
        self.completions.update(outcome.completions)
        self.errors.update(outcome.errors)

    def scored(self) -> Scored:
        return self._score(self.cases, self.completions)

    def payload(self, sent: Sent) -> dict[str, Any]:
        """The replies, scrubbed like a cassette (a reply or an error may quote what was
        sent); the merge rebuilds the prompts and counts the failures again."""
        replies: dict[str, dict[str, Any]] = secrets.scrub_json(
            {
                "completions": {k: _reply_dict(c) for k, c in self.completions.items()},
                "errors": dict(self.errors),
            }
        )
        return {"replies": replies}


def _reply_dict(c: Completion) -> dict[str, Any]:
    usage = None if c.usage is None else [c.usage.prompt_tokens, c.usage.completion_tokens]
    return {"text": c.text, "finish_reason": c.finish_reason, "model": c.model, "usage": usage}


class PooledKind:
    """The merge of a kind scored by a :class:`PooledScorer`: the shards' replies united
    and replayed through a fresh scorer of the kind (one place for every such kind)."""

    def scorer(
        self,
        settings: AuditSettings,
        entities: Sequence[str],
        first: Sequence[Any],
        inputs: AuditInputs,
    ) -> PooledScorer:
        raise NotImplementedError  # each kind gives its own

    def merge(
        self, settings: AuditSettings, parts: Sequence[ShardResult], rebuild: Rebuild
    ) -> Merged:
        return replay(
            settings,
            parts,
            rebuild,
            lambda e, first, inputs: self.scorer(settings, e, first, inputs),
        )
