"""The verdict of one audited test: its baseline, the gate, pass/fail, the baseline writer.

Pure except :func:`load_baseline` (reads) and :func:`write_baseline` (writes): the plugin
loads the state, :func:`compare` checks compatibility once, :func:`gate_result` gates,
:func:`judge` decides, and :func:`write_baseline` writes what the verdict says to write.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from pytest_recfair.engine import registry
from pytest_recfair.errors import ConfigError, RecfairError
from pytest_recfair.gate import baselines
from pytest_recfair.gate import thresholds as gate
from pytest_recfair.kinds import accept_command
from pytest_recfair.results import AuditResult, GateFailure, GateOutcome
from pytest_recfair.settings import AuditSettings

__all__ = [
    "BaselineState",
    "Comparison",
    "Verdict",
    "body_failed",
    "compare",
    "gate_result",
    "judge",
    "load_baseline",
    "write_baseline",
]


@dataclass(frozen=True, slots=True)
class BaselineState:
    """What is on disk for one test: a loaded baseline, nothing, or an unusable file."""

    path: Path
    result: AuditResult | None = None
    problem: str | None = None  # unreadable / schema-invalid / truncated, with the reason
    legacy: Path | None = None  # read from the old node-id file name; moved on update


def load_baseline(root: Path, test_id: str, name: str | None = None) -> BaselineState:
    """The baseline keyed by the test's stable name (``name``, default its test name);
    a file under the node-id name of earlier versions is read when that one is absent."""
    path = baselines.named_path(root, baselines.stable_name(test_id, name))
    source, legacy = path, None
    if not path.exists():
        old = baselines.baseline_path(root, test_id)
        if not old.exists():
            return BaselineState(path)
        source = legacy = old
    try:
        return BaselineState(path, result=baselines.load(source), legacy=legacy)
    except RecfairError as exc:
        return BaselineState(path, problem=str(exc), legacy=legacy)


@dataclass(frozen=True, slots=True)
class Comparison:
    """The baseline state of one test and what it means for this run (decided once)."""

    state: BaselineState
    baseline: AuditResult | None  # compared against: usable, compatible, not updating
    problem: str | None = None  # why the stored baseline is not compared (incompatible)


def compare(settings: AuditSettings, result: AuditResult, state: BaselineState) -> Comparison:
    """Whether this run is compared with the stored baseline: not under --fairness-update,
    not without a usable file, not when it is incompatible (a run on a subset of the
    baseline's entities is compatible: it is compared on the shared entities)."""
    stored = state.result
    if settings.update or stored is None:
        return Comparison(state, None)
    problem = baselines.result_incompatibility(stored, result)
    return Comparison(state, None if problem else stored, problem)


def gate_result(
    settings: AuditSettings,
    result: AuditResult,
    baseline: AuditResult | None,
    problem: str | None = None,
) -> AuditResult:
    """``result`` with its gate outcome; ``problem`` (an incompatible baseline) fails it."""
    outcome = gate.evaluate(
        result,
        baseline,
        _thresholds(settings),
        tolerance=settings.tolerance,
        alpha=settings.alpha,
        seed=settings.resample_seed,
        n_resamples=settings.n_resamples,
        gated=settings.gated,
    )
    own = registry.select(settings).failures(settings, result, baseline)
    if own:
        outcome = replace(outcome, passed=False, failures=(*outcome.failures, *own))
    if problem:
        failure = GateFailure("incompatible", detail=problem)
        outcome = replace(outcome, passed=False, failures=(*outcome.failures, failure))
    return replace(result, gate=outcome)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Pass/fail of one audited test; ``result`` carries the gate outcome as judged."""

    passed: bool
    result: AuditResult
    message: str = ""
    write: Path | None = None  # where to write the baseline (--fairness-update, passed)
    moved_from: Path | None = None  # the old node-id file it replaces


def judge(
    settings: AuditSettings, result: AuditResult, comparison: Comparison, test_id: str
) -> Verdict:
    """Decide pass/fail for one gated test. Pure: writing is :func:`write_baseline`'s job.

    With --fairness-update the result was gated without a baseline, so only absolute
    thresholds can fail and the new numbers are to become the baseline. Otherwise a
    missing, unusable or incompatible baseline fails and says how to (re)create it.
    """
    state = comparison.state
    outcome = result.gate or GateOutcome(passed=True)
    if settings.update:
        if settings.update_force:
            outcome = _forced(outcome)
            result = replace(result, gate=outcome)
        if not outcome.passed:
            return Verdict(False, result, _failure_message(result, outcome))
        return Verdict(True, result, write=state.path, moved_from=state.legacy)
    problem = _missing_baseline(state, test_id)
    if problem is not None:
        if not outcome.passed:
            # limits crossed too: both are said, and --fairness-update would refuse this run
            problem = (
                f"{problem.split(chr(10))[0]} It cannot be created from this run: "
                f"--fairness-update stores only a run that passes its absolute limits."
            )
        failure = GateFailure("baseline", detail=problem)
        judged = replace(
            result, gate=replace(outcome, passed=False, failures=(*outcome.failures, failure))
        )
        if outcome.passed:
            return Verdict(False, judged, problem)
        return Verdict(False, judged, f"{_failure_message(result, outcome)}\n{problem}")
    if outcome.passed:
        return Verdict(True, result)
    return Verdict(False, result, _failure_message(result, outcome))


def _forced(outcome: GateOutcome) -> GateOutcome:
    """--fairness-update-force: a crossed max_unusable becomes a note, not a refusal."""
    kept = tuple(f for f in outcome.failures if f.statistic != "unusable")
    if len(kept) == len(outcome.failures):
        return outcome
    note = "stored although too many replies were unusable (--fairness-update-force)"
    return replace(outcome, passed=not kept, failures=kept, notes=(*outcome.notes, note))


def body_failed(verdict: Verdict, error: str) -> Verdict:
    """The verdict when the test's own code failed (e.g. an assertion on fairness_result).

    The test failed, so its audit did: the outcome carries a "test" failure, whatever the
    gate said, and no baseline is written (a run whose test failed is not one to accept).
    """
    outcome = verdict.result.gate or GateOutcome(passed=True)
    failure = GateFailure("test", detail=error)
    judged = replace(outcome, passed=False, failures=(*outcome.failures, failure))
    return Verdict(False, replace(verdict.result, gate=judged), verdict.message or error)


def write_baseline(verdict: Verdict) -> Path | None:
    """Write the baseline the verdict asks for (atomically); the path written, or None."""
    if verdict.write is None:
        return None
    try:
        baselines.write(verdict.write, replace(verdict.result, gate=None))
    except OSError as exc:
        raise ConfigError(
            f"cannot write the baseline {str(verdict.write)!r}: {exc.strerror or exc}; set "
            "recfair_baseline_dir to a directory this process can create files in."
        ) from None
    if verdict.moved_from is not None and verdict.moved_from != verdict.write:
        verdict.moved_from.unlink(missing_ok=True)
    return verdict.write


def _missing_baseline(state: BaselineState, test_id: str) -> str | None:
    accept = accept_command(test_id)
    if state.problem is not None:
        return (
            f"fairness baseline {state.path} is unusable: {state.problem}\n"
            f"Re-create it from this run with: {accept}"
        )
    if state.result is None:
        return (
            f"no fairness baseline for {test_id} (expected {state.path}).\n"
            f"Create it from this run with: {accept}\nthen commit the baseline file."
        )
    return None


def _failure_message(result: AuditResult, outcome: GateOutcome) -> str:
    from pytest_recfair import report  # the words are the report's, the decision the gate's

    return report.failure_message(outcome, result)


def _thresholds(settings: AuditSettings) -> gate.Thresholds:
    return gate.Thresholds(**settings.thresholds())
