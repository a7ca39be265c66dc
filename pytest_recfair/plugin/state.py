"""What the plugin keeps between hooks: one object per run, one per audited test.

pytest's stash is the only channel between the hooks and fixtures of one run (and it is
typed), so the plugin keeps exactly two keys: :data:`RUN` on the config holds the
:class:`RunState` (made at configure time; on an xdist worker too, where it serves the
worker's tests), :data:`AUDIT` on an item holds its :class:`AuditState` (made at
collection for every @fairness test). Nothing else is stashed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_recfair.settings import AuditSettings, RunSettings

if TYPE_CHECKING:
    # the engine loads numpy: never imported at pytest start-up
    from pytest_recfair import engine as audit
    from pytest_recfair.compare.models import ModelSlot
    from pytest_recfair.engine import budget as plan
    from pytest_recfair.engine.ledger import Ledger
    from pytest_recfair.plugin.session import Pruner

__all__ = ["AUDIT", "RUN", "AuditState", "RunState", "audit_state", "run_state"]


@dataclass
class RunState:
    """One pytest run, as the plugin's hooks and fixtures share it."""

    run: RunSettings  # the session-wide options (shard, merge, prune, history, reports)
    settings: AuditSettings  # the settings without a marker (header, notes, fallback)
    # node ids of the @fairness tests collected; None: this process collected none (an
    # xdist controller: its workers collect)
    audited: set[str] | None = None
    plans: list[plan.Plan] = field(default_factory=list)  # the run's plans, in order
    pruner: Pruner | None = None  # --fairness-prune's bookkeeping
    rewritten: set[Path] = field(default_factory=set)  # cassette files rewritten
    fixture_errors: set[int] = field(default_factory=set)  # ids of errors said already
    merge_source: audit.MergeSource | None = None  # --fairness-merge, made on first use
    # under xdist: the budget ledger every worker checks and appends to (one count for
    # the run); None in one process, where ``plans`` is the count
    ledger: Ledger | None = None

    def merged(self) -> audit.MergeSource | None:
        """The shard results of --fairness-merge (read on first use), or None."""
        if self.run.merge and self.merge_source is None:
            from pytest_recfair import engine as audit

            self.merge_source = audit.MergeSource(self.run.merge)
        return self.merge_source


@dataclass
class AuditState:
    """One @fairness test: its settings from collection on, then its audit."""

    settings: AuditSettings
    # a test run once per model of a parametrized recfair_recommender: its place in the
    # comparison (docs/reports.md, "Comparing models"); set at collection
    slot: tuple[str, str, int] | None = None
    comparison: audit.BaselineCheck | None = None  # set by fairness_result
    record: audit.TestRecord | None = None  # shipped to the controller

    def model_slot(self) -> ModelSlot | None:
        """The slot with the resampling settings the comparison of models uses."""
        if self.slot is None:
            return None
        from pytest_recfair.compare.models import ModelSlot

        s = self.settings
        group, label, index = self.slot
        return ModelSlot(group, label, index, s.alpha, s.n_resamples, s.resample_seed)


RUN = pytest.StashKey[RunState]()
AUDIT = pytest.StashKey[AuditState]()


def run_state(config: pytest.Config) -> RunState:
    return config.stash[RUN]


def audit_state(node: Any) -> AuditState | None:
    """The audit of a collected item, or None when it is not a @fairness test."""
    found: AuditState | None = node.stash.get(AUDIT, None)
    return found
