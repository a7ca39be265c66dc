"""The plan of one audit before anything is sent: which prompts, how many already
recorded, tokens, cost and duration (:mod:`pytest_recfair.engine.budget` does the arithmetic).

No pytest here: the plugin prints the plan, checks the budget and starts the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_recfair.engine import budget as plan
from pytest_recfair.engine import registry, stream
from pytest_recfair.engine.base import AuditInputs, AuditRequest, Shard
from pytest_recfair.prompts.grids import Grid
from pytest_recfair.prompts.seeds import Entity
from pytest_recfair.providers.pacing import known_limits
from pytest_recfair.providers.probe import is_in_process, recorded_ids
from pytest_recfair.settings import AuditSettings, spend

__all__ = ["audit_plan", "budget_of", "is_live"]


def is_live(settings: AuditSettings, recommender: Any) -> bool:
    """Can this audit send requests? A callable always runs live; an HTTP provider only
    in a record mode that records."""
    return is_in_process(recommender) or settings.record_mode != "none"


def budget_of(settings: AuditSettings, planned: plan.Plan | None = None) -> plan.Budget:
    """The run's limits; the default budget (:mod:`~pytest_recfair.settings.spend`) when
    ``planned`` sends over the network (its duration is estimated, an in-process one's not)."""
    network = planned is not None and planned.seconds is not None
    requests, cost = spend.limits(settings, network=network)
    return plan.Budget(max_requests=requests, max_cost=cost)


def audit_plan(
    settings: AuditSettings,
    recommender: Any,
    *,
    seeds: Sequence[Entity],
    grid: Grid,
    test_id: str,
    cassette_root: Path,
    inputs: AuditInputs | None = None,
    shard: Shard | None = None,
    failed: Mapping[str, str] | None = None,
) -> plan.Plan:
    """The plan of this audit's run (of shard ``shard``'s share, when given)."""
    request = AuditRequest(
        settings, recommender, seeds, grid, test_id, inputs=inputs or AuditInputs(), shard=shard
    )
    asked = stream.all_cases(registry.select(settings), request)
    cases = [c for c in asked if c.id not in (failed or {})]
    found = recorded_ids(recommender, cases, cassette_root, settings.record_mode, test_id)
    to_ask = [c for c in cases if c.id not in found]
    # The limit paces the run: the configured one, else what this process's replies said.
    seen_rpm, seen_tpm = known_limits(recommender)
    main = plan.estimate(
        test_id,
        to_ask,
        recorded=len(found),
        concurrency=settings.concurrency,
        max_tokens=settings.max_tokens or getattr(recommender, "max_tokens", None),
        prices=settings.prices,
        seconds_per_request=None if is_in_process(recommender) else plan.SECONDS_PER_REQUEST,
        rpm=settings.rpm or seen_rpm,
        tpm=settings.tpm or seen_tpm,
    )
    return _with_judge(main, settings, request, to_ask)


def _with_judge(
    main: plan.Plan, settings: AuditSettings, request: AuditRequest, to_ask: Sequence[Any]
) -> plan.Plan:
    """The judge calls the cases to ask will bring (a kind with a :class:`~.base.
    PlannedFollowUp`, e.g. role-play Why answers), at the judge's prices."""
    judge = request.inputs.judge
    more = getattr(registry.select(settings), "planned_follow_up", None)
    if more is None or judge is None:
        return main
    calls = more(settings, to_ask)
    estimate = plan.estimate(
        request.test_id,
        calls,
        recorded=0,
        concurrency=settings.concurrency,
        max_tokens=getattr(judge, "max_tokens", None),
        prices=settings.judge_prices,
        seconds_per_request=None if is_in_process(judge) else plan.SECONDS_PER_REQUEST,
    )
    return plan.with_judge(main, estimate)
