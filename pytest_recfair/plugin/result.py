"""The ``fairness_result`` fixture's work: measure (or merge, or write a shard), compare,
gate and record one audit; and judge it after the test body. The steps themselves are
in :mod:`pytest_recfair.plugin.flow`; here pytest fixtures are fetched and tests are
skipped or failed."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_recfair.errors import ConfigError, RecfairError
from pytest_recfair.plugin import fixtures, flow, terminal
from pytest_recfair.plugin.state import AUDIT, AuditState, RunState, audit_state, run_state
from pytest_recfair.settings import AuditSettings

if TYPE_CHECKING:
    from pytest_recfair import engine as audit
    from pytest_recfair.results import AuditResult

__all__ = ["fairness_result", "judge_item", "judged_call"]


def fairness_result(request: pytest.FixtureRequest, s: AuditSettings) -> AuditResult:
    """The gated AuditResult of this @fairness test, recorded for the controller."""

    node = request.node
    if node.get_closest_marker("fairness") is None:
        raise ConfigError(
            f"{node.nodeid} requests fairness_result but has no @fairness marker; "
            "mark it with @pytest.mark.fairness(...)."
        )
    state = run_state(request.config)
    used = None if state.pruner is None else state.pruner.baselines
    baseline = flow.baseline_of(s, request.config.rootpath, node.nodeid, used)
    problem: RecfairError | None = None
    try:
        result = _measure_or_merge(request, s, state)
    except RecfairError as exc:
        problem = exc
    if problem is not None:
        # a problem the user fixes (cassette miss, bad seeds file, ...): said once, outside
        # the except block, so no traceback and no "during handling ..." chain
        pytest.fail(f"{type(problem).__name__}: {problem}", pytrace=False)
    its = audit_state(node) or node.stash.setdefault(AUDIT, AuditState(s))
    its.settings = s  # the fixture's value: a conftest may override recfair_settings
    its.comparison, result, its.record = flow.conclude(s, result, baseline, its.model_slot())
    reference = state.run.reference
    if reference is not None:  # --fairness-compare: gated against that run too
        from pytest_recfair.compare.reference import apply_reference

        result = its.record.result = apply_reference(result, reference, state.run.compare_fail)
    from pytest_recfair.report.junit import properties

    node.user_properties.extend(properties(result))
    return result


def _measure_or_merge(
    request: pytest.FixtureRequest, s: AuditSettings, state: RunState
) -> AuditResult:
    """Merged: nothing is sent or replayed, the shard results hold the scores."""
    merge = state.merged()
    if merge is None:
        return _measure(request, s, state)

    def kind_inputs() -> Any:  # seeds, grid and inputs, for a kind the merge rebuilds
        seeds = request.getfixturevalue("recfair_seeds")
        return seeds, request.getfixturevalue("recfair_grid"), fixtures.inputs(request, s)

    return merge.result(s, request.node.nodeid, kind_inputs)


def _measure(request: pytest.FixtureRequest, s: AuditSettings, state: RunState) -> AuditResult:
    """Run this test's audit (after a batch recording with --fairness-batch); a shard run
    writes its share's result and skips instead."""
    from pytest_recfair import engine as audit

    config, node = request.config, request.node
    recommender = flow.recommender_for(fixtures.user_fixture(request, "recfair_recommender"), s)
    seeds = request.getfixturevalue("recfair_seeds")
    grid = request.getfixturevalue("recfair_grid")
    shard = state.run.shard
    inputs = fixtures.inputs(request, s)
    # before anything is sent: print the plan, refuse beyond the budget (--fairness-plan: skip)
    planned = _plan(request, s, recommender, (seeds, grid, inputs))
    job = audit.AuditRequest(s, recommender, seeds, grid, node.nodeid, inputs=inputs, shard=shard)
    failed: dict[str, str] = {}
    if s.batch:
        failed = audit.record_batch(
            job, config.rootpath / s.cassette_dir, terminal.terminal_line(config)
        )
    # the runner flushes recorded cassettes itself, also when the run fails half-way
    cassettes = request.getfixturevalue("recfair_cassettes")
    job = dataclasses.replace(job, cassettes=cassettes, failed=failed)
    if shard is None:
        live = terminal.live_line(config, planned)
        try:
            return audit.measure(dataclasses.replace(job, live=live, progress=False))
        finally:
            if live is not None:
                live.close()
    out = audit.run_shard(job, config.rootpath / s.shard_dir)
    pytest.skip(flow.shard_note(shard, out))


def _plan(request: pytest.FixtureRequest, s: AuditSettings, recommender: Any, cases: Any) -> Any:
    """This audit's plan, printed when it will send requests (or with --fairness-plan,
    which then skips the test); a plan past the run's budget fails the test unsent."""
    config = request.config
    state = run_state(config)
    planned = flow.plan_of(
        s,
        recommender,
        cases,
        test_id=request.node.nodeid,
        root=config.rootpath,
        shard=state.run.shard,
    )
    if planned is None:
        return None
    if s.plan or planned.to_ask:
        terminal.terminal_line(config)(f"recfair plan: {planned.line()}")
    if state.ledger is not None:  # an xdist worker: one count for every worker
        state.ledger.reserve(None if s.plan else flow.budget_of(s, planned), planned)
    elif s.plan:
        state.plans.append(planned)
    else:
        flow.within_budget(s, planned, state.plans)
    if s.plan:
        pytest.skip("fairness plan only (--fairness-plan): nothing was sent")
    return planned


def judged_call(item: pytest.Item) -> Generator[None, None, None]:
    """The body of the ``pytest_runtest_call`` wrapper: run the test, then judge its
    audit; a gate failure fails the test, a body failure is recorded as the audit's."""
    try:
        outcome = yield
    except (pytest.skip.Exception, KeyboardInterrupt, pytest.exit.Exception):
        raise  # a skipped or interrupted test is not judged
    except BaseException as exc:
        # the test's own code failed: the report says FAIL with this, not the gate's PASS
        judge_item(item, exc)
        raise
    verdict = judge_item(item, None)
    if verdict is not None and not verdict.passed:
        from pytest_recfair.report.failures import verdict_message

        pytest.fail(verdict_message(verdict.result), pytrace=False)
    return outcome


def judge_item(item: pytest.Item, exc: BaseException | None) -> audit.Verdict | None:
    """Judge an audited test (None if it has no audit; ``exc``: its body's failure);
    record the outcome for the reports."""
    its = audit_state(item)
    if its is None or its.comparison is None or its.record is None:
        return None
    failed = None if exc is None else flow.body_error(exc)
    verdict, unwritable = flow.judge(its.settings, its.record, its.comparison, item.nodeid, failed)
    if unwritable is not None:  # no "during handling" chain printed
        pytest.fail(unwritable, pytrace=False)
    item.user_properties[:] = flow.gate_property(list(item.user_properties), verdict.passed)
    return verdict
