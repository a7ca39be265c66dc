"""The steps of one audited test, without pytest: so each can be unit-tested, and the
fixtures (:mod:`pytest_recfair.plugin.result`) only fetch fixtures, skip and fail.

baseline -> (plan, batch) -> measure, merge or shard -> compare + gate -> record, then
judge at the call phase. The engine is imported on use: pytest start-up stays light.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_recfair.settings import AuditSettings

if TYPE_CHECKING:
    from pytest_recfair import engine as audit
    from pytest_recfair.compare.models import ModelSlot
    from pytest_recfair.engine import budget as plan
    from pytest_recfair.engine.base import AuditInputs, Shard
    from pytest_recfair.results import AuditResult

__all__ = [
    "baseline_of",
    "body_error",
    "budget_of",
    "conclude",
    "gate_property",
    "judge",
    "plan_of",
    "recommender_for",
    "shard_note",
    "within_budget",
]


def recommender_for(recommender: Any, s: AuditSettings) -> Any:
    """The recommender with this test's provider settings, under a readable model id."""
    return _named(_configured(recommender, s), s)


def _configured(recommender: Any, s: AuditSettings) -> Any:
    """The recommender with this test's provider settings (ini and marker) applied."""
    from pytest_recfair import providers

    return providers.configure(
        recommender,
        temperature=s.temperature,
        max_tokens=s.max_tokens,
        seed=s.sampling_seed,
        header_envs=dict(s.extra_headers) if s.extra_headers else None,
    )


def _named(recommender: Any, s: AuditSettings) -> Any:
    """A plain callable reported under a readable model id: the marker's ``model=``, else
    its own ``model`` attribute, else its name, else (a lambda or a closure, whose name
    says nothing) the fixture's name."""
    from pytest_recfair import providers

    if isinstance(recommender, providers.CallableProvider) or callable(
        getattr(recommender, "build_request", None)
    ):
        return recommender
    own = getattr(recommender, "model", None)
    if s.model is None and isinstance(own, str) and own:
        return recommender
    label = s.model or providers.callable_label(recommender)
    if "<" in label:  # <lambda>, <locals>: the fixture's name says more
        label = "recfair_recommender"
    return providers.CallableProvider(recommender, model=label)


def baseline_of(
    s: AuditSettings, root: Path, test_id: str, used: set[Path] | None
) -> audit.BaselineState:
    """The stored baseline of ``test_id``; its files are marked used (``used``: the
    --fairness-prune bookkeeping, None without it)."""
    from pytest_recfair import engine as audit
    from pytest_recfair.cassettes import cache
    from pytest_recfair.cassettes.policy import MODE_POLICIES

    policy = MODE_POLICIES[s.record_mode]
    cache.open_for(root / s.cassette_dir, policy.replays and not policy.records)
    state = audit.load_baseline(root / s.baseline_dir, test_id, s.baseline)
    if used is not None:
        used.update(p for p in (state.path, state.legacy) if p is not None)
    return state


def plan_of(
    s: AuditSettings,
    recommender: Any,
    cases: tuple[Any, Any, AuditInputs],
    *,
    test_id: str,
    root: Path,
    shard: Shard | None,
) -> plan.Plan | None:
    """The plan of an audit that will send requests (or of any under --fairness-plan);
    None for one that only replays. ``cases``: seeds, grid and inputs."""
    from pytest_recfair.engine import planning

    # --fairness-batch sends (through the batch API) whatever the record mode says
    if not (s.plan or s.batch or planning.is_live(s, recommender)):
        return None
    seeds, grid, inputs = cases
    return planning.audit_plan(
        s,
        recommender,
        seeds=seeds,
        grid=grid,
        test_id=test_id,
        cassette_root=root / s.cassette_dir,
        inputs=inputs,
        shard=shard,
    )


def budget_of(s: AuditSettings, planned: plan.Plan | None = None) -> plan.Budget:
    """The run's limits (recfair_max_requests, recfair_max_cost, else the default budget)."""
    from pytest_recfair.engine import planning

    return planning.budget_of(s, planned)


def within_budget(s: AuditSettings, planned: plan.Plan, plans: list[plan.Plan]) -> None:
    """Add ``planned`` to the run's plans, or raise BudgetExceeded (nothing sent)."""
    from pytest_recfair.engine import budget as plan
    from pytest_recfair.engine import planning

    plan.check_budget(planning.budget_of(s, planned), plans, planned)
    plans.append(planned)


def shard_note(shard: Shard, out: Any) -> str:
    """Why a shard run's test is skipped: its share was written for the merge."""
    return (
        f"fairness shard {shard}: {out.scored} of {out.total} entities scored, written to "
        f"{out.path}; gate the merged audit with --fairness-merge"
    )


def conclude(
    s: AuditSettings,
    result: AuditResult,
    state: audit.BaselineState,
    slot: ModelSlot | None,
) -> tuple[audit.BaselineCheck, AuditResult, audit.TestRecord]:
    """Compare with the baseline and gate: the comparison, the gated result, and the
    record shipped to the controller (even if the test body fails before judging)."""
    from pytest_recfair import engine as audit

    comparison = audit.compare(s, result, state)
    result = audit.gate_result(s, result, comparison.baseline, comparison.problem)
    record = audit.TestRecord(result, comparison.baseline, model_slot=slot)
    return comparison, result, record


def body_error(exc: BaseException) -> str:
    """The first line of the test body's own failure, as the report shows it."""
    return f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]


def judge(
    s: AuditSettings,
    record: audit.TestRecord,
    comparison: audit.BaselineCheck,
    test_id: str,
    failed: str | None,
) -> tuple[audit.Verdict, str | None]:
    """The verdict of an audited test (``failed``: its body's error, None if it passed),
    with the baseline written under --fairness-update; and the reason the baseline could
    not be written, or None."""
    from pytest_recfair import engine as audit
    from pytest_recfair.errors import RecfairError

    verdict = audit.judge(s, record.result, comparison, test_id)
    if failed is not None:
        verdict = audit.body_failed(verdict, failed)
        if s.update:
            record.not_written = f"the test failed ({failed})"
    record.result = verdict.result
    try:
        record.wrote = audit.write_baseline(verdict)
    except RecfairError as exc:
        return verdict, str(exc)
    if record.wrote is not None:
        record.changes = audit.baseline_changes(comparison.state.result, verdict.result)
    return verdict, None


def gate_property(props: list[tuple[str, object]], passed: bool) -> list[tuple[str, object]]:
    """The JUnit properties with ``recfair.gate`` set to the verdict (once)."""
    out = [p for p in props if p[0] != "recfair.gate"]
    out.append(("recfair.gate", "pass" if passed else "fail"))
    return out
