"""The fixtures' work: where each input fixture looks for its file or fixture and how it
reads it; one audited test, from ``fairness_result`` to the call-phase verdict (the engine
is imported on use: a light start-up)."""

from __future__ import annotations

import dataclasses
import keyword
import traceback
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_recfair.errors import ConfigError, RecfairError
from pytest_recfair.plugin import session
from pytest_recfair.plugin.session import AUDIT, AuditState, RunState, audit_state, run_state
from pytest_recfair.settings import AuditSettings

if TYPE_CHECKING:
    from pytest_recfair.compare.models import ModelSlot
    from pytest_recfair.engine.base import AuditInputs
    from pytest_recfair.engine.verdict import BaselineCheck, BaselineState, TestRecord, Verdict
    from pytest_recfair.results import AuditResult
    from pytest_recfair.settings.values import Shard

#: what resolves a relative input path: a fixture's request, or the test item at
#: collection (both have the test file's ``path`` and the ``config``)
Node = pytest.FixtureRequest | pytest.Item


def default_provider(config: pytest.Config, judge: bool = False) -> Any:
    """The provider the ini keys name; with ``judge`` the recfair_judge_* keys, each
    falling back to the recommender's (None without recfair_judge_model)."""
    from pytest_recfair.providers.http import from_config

    def ini(key: str) -> str | None:
        value = (judge and config.getini(f"recfair_judge_{key}")) or config.getini(f"recfair_{key}")
        return str(value or "").strip() or None

    model = str(config.getini("recfair_judge_model" if judge else "recfair_model") or "").strip()
    if not model and judge:
        return None
    if not model:
        raise ConfigError(
            "no recommender configured: set the ini key recfair_model (and recfair_provider, "
            "recfair_base_url, recfair_api_key_env), or override the recfair_recommender "
            "fixture in conftest.py. See docs/quickstart.md."
        )
    where = {key: ini(key) for key in ("base_url", "api_key_env")}
    return from_config(ini("provider") or "openai", model=model, **where)


def seeds(request: pytest.FixtureRequest, s: AuditSettings) -> Any:
    """The seed entities (marker seeds=: fixture name, bundled set or file)."""
    from pytest_recfair.api import bundled_seeds, seed_entities
    from pytest_recfair.prompts.seeds import load_seeds

    source = s.seeds
    if source is None:
        return load_seeds(bundled_seeds(s.domain, "@fairness"))
    found = locate(request, "seeds", source)
    if isinstance(found, str) and source.isidentifier() and not keyword.iskeyword(source):
        try:
            value = request.getfixturevalue(source)
        except pytest.FixtureLookupError:
            pass
        else:
            return seed_entities(value, s.domain, f"seeds fixture {source!r}")
    return load_seeds(found, domain=s.domain)


def input_file(request: Node, key: str, source: str | None) -> Path | None:
    """The file of the ``key`` setting (catalogue, absent), or None when it is not set."""
    path = None if source is None else find_file(request, source)
    if path is None and source is not None:
        raise not_found(request, key, source)
    return path


def candidates(request: pytest.FixtureRequest, s: AuditSettings) -> Any:
    """The candidate titles of a candidate-position audit: a file or a fixture's value."""
    source = s.candidates
    if source is None:
        return None
    path = find_file(request, source)
    if path is not None:
        return path
    if source.isidentifier() and not keyword.iskeyword(source):
        return request.getfixturevalue(source)
    raise not_found(request, "candidates", source, "or fixture")


def inputs(request: pytest.FixtureRequest, s: AuditSettings) -> AuditInputs:
    """What the kind of audit needs beyond seeds and grid (catalogue, candidates, absent)."""
    from pytest_recfair.engine.base import AuditInputs
    from pytest_recfair.replies import catalogue as read

    items = request.getfixturevalue("recfair_catalogue")
    judge = request.getfixturevalue("recfair_judge")
    titles = request.getfixturevalue("recfair_candidates")
    absent = input_file(request, "absent", s.absent)
    return AuditInputs(
        catalogue=None if items is None else read.as_catalogue(items, "recfair_catalogue"),
        candidates=None if titles is None else read.read_candidates(titles, "candidates"),
        absent=frozenset() if absent is None else read.read_absent(absent),
        where=(request.path.parent, request.config.rootpath),
        judge=None if judge is None else recommender_for(judge, s),
    )


def cassettes(config: pytest.Config, s: AuditSettings) -> Any:
    """The cassette store of this run (ini recfair_cassette_dir, mode --fairness-record)."""
    from pytest_recfair.cassettes import failures
    from pytest_recfair.cassettes.store import CassetteStore

    base = config.rootpath
    state = run_state(config)
    shard = state.run.shard
    # shard jobs note their failed prompts in files of their own (merged on read)
    failures.set_shard(base / s.cassette_dir, f"{shard.index}of{shard.count}" if shard else None)
    return CassetteStore(
        base / s.cassette_dir,
        s.record_mode,
        imports=[base / p for p in s.vcr_cassettes or ()],
        usage=None if state.pruner is None else state.pruner.use(s),
        rewritten=state.rewritten,
    )


def http_clients(config: pytest.Config, generation: str, sync: bool) -> Iterator[Any]:
    """The recfair_http_client fixtures' client: ``generation`` httpx2 or httpx (0.x)."""
    from pytest_recfair.providers import pipeline

    limit = run_state(config).settings.max_reply_chars
    client = pipeline.http_client(generation, limit, sync)
    yield client
    if sync:
        client.close()  # an async client's pools close with the loop each audit ran on


def user_fixture(request: pytest.FixtureRequest, name: str) -> Any:
    """A user's fixture's value, or its error said once with its own frames (later: a line)."""
    try:
        return request.getfixturevalue(name)
    except (pytest.FixtureLookupError, pytest.fail.Exception, pytest.skip.Exception):
        raise
    except Exception as exc:
        error = exc
    # failed outside the except block: no "during handling ..." chain in the report
    seen = run_state(request.config).fixture_errors
    what = f"{type(error).__name__}: {error}"
    if id(error) in seen:  # a session fixture re-raises the same error for every test
        pytest.fail(f"{name} failed earlier in this run ({what}); see the first error.", False)
    seen.add(id(error))
    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if not {"_pytest", "pluggy", "pytest_recfair"} & set(Path(f.filename).parts)
    ]
    where = "".join(traceback.format_list(frames)).rstrip()
    pytest.fail(f"the {name} fixture raised {what}\n{where}", pytrace=False)


def not_found(request: Node, key: str, source: str, other: str = "") -> ConfigError:
    """The error for an input file that is not next to the test file nor in rootdir."""
    from pytest_recfair.prompts.seeds import EXAMPLE_FILES, EXAMPLES_COMMAND

    where = (
        f"looked for {request.path.parent / source} (next to the test file) and "
        f"{request.config.rootpath / source} (rootdir): relative paths resolve from "
        "there, not from the current directory"
    )
    if Path(source).is_absolute():
        where = "it does not exist"
    hint = "fix the path"
    if Path(source).as_posix() in EXAMPLE_FILES:
        hint = f"it is a file of the docs' examples: `{EXAMPLES_COMMAND}` in rootdir writes it"
    what = f"no such file {other}".rstrip()
    return ConfigError(f"@fairness({key}={source!r}): {what}; {where}; {hint}.")


def locate(node: Node, key: str, source: str) -> Path | str:
    """The file ``source`` names, else ``source`` itself (a bundled set or a fixture's name);
    a value that names a file (a folder or a suffix) but is not found is an error."""
    path = find_file(node, source)
    if path is None and ("/" in source or "\\" in source or Path(source).suffix):
        raise not_found(node, key, source)
    return source if path is None else path


def find_file(request: Node, source: str) -> Path | None:
    """A seeds/grid file, relative to the test file first, then to rootdir."""
    found = (request.path.parent / source, request.config.rootpath / source)  # absolute: as is
    return next((c for c in found if c.is_file()), None)


def recommender_for(recommender: Any, s: AuditSettings) -> Any:
    """The recommender with this test's provider settings, under a readable model id:
    marker ``model=``, its ``model``, its name, else (a lambda) the fixture's name."""
    from pytest_recfair.providers.adapter import CallableProvider, callable_label
    from pytest_recfair.providers.http import configure

    recommender = configure(
        recommender,
        temperature=s.temperature,
        max_tokens=s.max_tokens,
        seed=s.sampling_seed,
        header_envs=dict(s.extra_headers) if s.extra_headers else None,
    )
    if isinstance(recommender, CallableProvider) or callable(
        getattr(recommender, "build_request", None)
    ):
        return recommender
    own = getattr(recommender, "model", None)
    if s.model is None and isinstance(own, str) and own:
        return recommender
    label = s.model or callable_label(recommender)
    if "<" in label:  # <lambda>, <locals>: the fixture's name says more
        label = "recfair_recommender"
    return CallableProvider(recommender, model=label)


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
    baseline = baseline_of(s, request.config.rootpath, node.nodeid, used)
    problem: RecfairError | None = None
    try:
        if state.run.merge and state.merge_source is None:  # read on first use
            from pytest_recfair.engine.sharding import MergeSource

            state.merge_source = MergeSource(state.run.merge)
        merge = state.merge_source
        if merge is None:
            result = _measure(request, s, state, baseline.result)
        else:  # nothing is sent or replayed: the shard results hold the scores

            def kind_inputs() -> Any:  # seeds, grid and inputs, compared with the shards'
                seeds = request.getfixturevalue("recfair_seeds")
                return seeds, request.getfixturevalue("recfair_grid"), inputs(request, s)

            result = merge.result(s, node.nodeid, kind_inputs)
    except RecfairError as exc:
        problem = exc
    if problem is not None:
        # a problem the user fixes (cassette miss, bad seeds file, ...): said once, outside
        # the except block, so no traceback and no "during handling ..." chain
        pytest.fail(f"{type(problem).__name__}: {problem}", pytrace=False)
    its = audit_state(node) or node.stash.setdefault(AUDIT, AuditState(s))
    its.settings = s  # the fixture's value: a conftest may override recfair_settings
    its.comparison, result, its.record = conclude(s, result, baseline, its.model_slot())
    reference = state.reference
    if reference is not None:  # --fairness-compare: gated against that run too
        from pytest_recfair.compare.runs import apply_reference

        result = its.record.result = apply_reference(result, reference, state.compare_fail)
    from pytest_recfair.report.sections import properties

    node.user_properties.extend(properties(result))
    return result


def baseline_of(
    s: AuditSettings, root: Path, test_id: str, used: set[Path] | None
) -> BaselineState:
    """The stored baseline of ``test_id``, its files marked used (``used``: --fairness-prune)."""
    from pytest_recfair.cassettes import cache
    from pytest_recfair.cassettes.miss import MODE_POLICIES
    from pytest_recfair.engine.verdict import load_baseline

    policy = MODE_POLICIES[s.record_mode]
    cache.open_for(root / s.cassette_dir, policy.replays and not policy.records)
    state = load_baseline(root / s.baseline_dir, test_id, s.baseline)
    if used is not None:
        used.update(p for p in (state.path, state.legacy) if p is not None)
    return state


def _measure(
    request: pytest.FixtureRequest, s: AuditSettings, state: RunState, base: AuditResult | None
) -> AuditResult:
    """Run the audit (a shard run writes its share and skips instead)."""
    from pytest_recfair.engine.base import AuditRequest
    from pytest_recfair.engine.stream import measure, record_batch

    config, node = request.config, request.node
    recommender = recommender_for(user_fixture(request, "recfair_recommender"), s)
    seeds = request.getfixturevalue("recfair_seeds")
    grid = request.getfixturevalue("recfair_grid")
    shard = state.run.shard
    more = inputs(request, s)
    # before anything is sent: print the plan, refuse beyond the budget (--fairness-plan: skip)
    planned, allowance = _plan(request, s, recommender, (seeds, grid, more), base)
    job = AuditRequest(
        s, recommender, seeds, grid, node.nodeid, inputs=more, shard=shard, allowance=allowance
    )
    failed: dict[str, str] = {}
    if s.batch:
        failed = record_batch(job, config.rootpath / s.cassette_dir, session.terminal_line(config))
    # the runner flushes recorded cassettes itself, also when the run fails half-way
    cassettes = request.getfixturevalue("recfair_cassettes")
    job = dataclasses.replace(job, cassettes=cassettes, failed=failed)
    if shard is None:
        live = session.live_line(config, planned)
        try:
            return measure(dataclasses.replace(job, live=live, progress=False))
        finally:
            if live is not None:
                live.close()
    from pytest_recfair.engine.sharding import run_shard  # loaded by a shard run only

    out = run_shard(job, config.rootpath / s.shard_dir)
    pytest.skip(shard_note(shard, out))


def _plan(
    request: pytest.FixtureRequest,
    s: AuditSettings,
    recommender: Any,
    cases: Any,
    base: AuditResult | None,
) -> tuple[Any, Any]:
    """The plan and what a pipeline's live calls may still spend, or (a replay) None;
    --fairness-plan skips the test, past the budget it fails unsent."""
    from pytest_recfair.providers.adapter import is_in_process

    config = request.config
    state = run_state(config)
    # --fairness-batch sends (through the batch API) whatever the record mode says
    # a callable always runs live, an HTTP provider in a record mode that records
    if not (s.plan or s.batch or is_in_process(recommender) or s.record_mode != "none"):
        return None, None  # a replay: the plan's module is not loaded
    from pytest_recfair.engine import plan
    from pytest_recfair.engine.base import AuditRequest

    seeds, grid, inputs = cases
    job = AuditRequest(s, recommender, seeds, grid, request.node.nodeid, inputs=inputs,
                       shard=state.run.shard)  # fmt: skip
    planned = plan.audit_plan(job, config.rootpath / s.cassette_dir)
    if s.plan or planned.to_ask:
        say = session.terminal_line(config)
        say(f"recfair plan: {planned.line()}")
        for line in plan.resolution(s, base, [e.id for e in seeds]):
            say(f"recfair plan: {line}")
    before = list(state.ledger.plans() if state.ledger is not None else state.plans)
    if state.ledger is not None:  # an xdist worker: one count for every worker
        state.ledger.reserve(None if s.plan else plan.budget_of(s, planned), planned)
    elif s.plan:
        state.plans.append(planned)
    else:  # refused past the budget (BudgetExceeded): nothing sent
        plan.check_budget(plan.budget_of(s, planned), state.plans, planned)
        state.plans.append(planned)
    if s.plan:
        pytest.skip("fairness plan only (--fairness-plan): nothing was sent")
    return planned, plan.allowance(s, before, planned)


def shard_note(shard: Shard, out: Any) -> str:
    """Why a shard run's test is skipped: its share was written for the merge."""
    return (
        f"fairness shard {shard}: {out.scored} of {out.total} entities scored, written to "
        f"{out.path}; gate the merged audit with --fairness-merge"
    )


def conclude(
    s: AuditSettings, result: AuditResult, state: BaselineState, slot: ModelSlot | None
) -> tuple[BaselineCheck, AuditResult, TestRecord]:
    """Compare with the baseline and gate: the comparison, the gated result, and the
    record shipped to the controller (even if the test body fails before judging)."""
    from pytest_recfair.engine.verdict import TestRecord, check_baseline, gate_outcome

    comparison = check_baseline(s, result, state)
    gate = gate_outcome(s, result, comparison.baseline, comparison.problem)
    result = dataclasses.replace(result, gate=gate)
    record = TestRecord(result, comparison.baseline, model_slot=slot)
    return comparison, result, record


def judged_call(item: pytest.Item) -> Generator[None, None, None]:
    """The ``pytest_runtest_call`` wrapper: run the test, then judge its audit."""
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

        verbose = item.config.get_verbosity() > 0
        pytest.fail(verdict_message(verdict.result, verbose=verbose), pytrace=False)
    return outcome


def judge_item(item: pytest.Item, exc: BaseException | None) -> Verdict | None:
    """Judge an audited test (None if it has no audit; ``exc``: its body's failure)."""
    its = audit_state(item)
    if its is None or its.comparison is None or its.record is None:
        return None
    failed = None if exc is None else body_error(exc)
    verdict, unwritable = judge(its.settings, its.record, its.comparison, item.nodeid, failed)
    if unwritable is not None:  # no "during handling" chain printed
        pytest.fail(unwritable, pytrace=False)
    item.user_properties[:] = gate_property(list(item.user_properties), verdict.passed)
    return verdict


def body_error(exc: BaseException) -> str:
    """The first line of the test body's own failure, as the report shows it."""
    return f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]


def judge(
    s: AuditSettings,
    record: TestRecord,
    comparison: BaselineCheck,
    test_id: str,
    failed: str | None,
) -> tuple[Verdict, str | None]:
    """The verdict (``failed``: the body's error) with the baseline written under
    --fairness-update, and why the baseline could not be written, or None."""
    from pytest_recfair.engine import verdict as verdicts
    from pytest_recfair.engine.verdict import baseline_changes

    verdict = verdicts.judge(s, record.result, comparison, test_id)
    if failed is not None:
        verdict = verdicts.body_failed(verdict, failed)
        if s.update:
            record.not_written = f"the test failed ({failed})"
    record.result = verdict.result
    try:
        record.wrote = verdicts.write_baseline(verdict)
    except RecfairError as exc:
        return verdict, str(exc)
    if record.wrote is not None:
        record.changes = baseline_changes(comparison.state.result, verdict.result)
    return verdict, None


def gate_property(props: list[tuple[str, object]], passed: bool) -> list[tuple[str, object]]:
    """The JUnit properties with ``recfair.gate`` set to the verdict (once)."""
    out = [p for p in props if p[0] != "recfair.gate"]
    out.append(("recfair.gate", "pass" if passed else "fail"))
    return out
