"""The verdict of one audited test: its baseline, the gate, pass/fail, the baseline writer.
Pure but :func:`load_baseline` and :func:`write_baseline`; each outcome is composed once
from its parts, worded by ``report.failures`` (this module never imports ``report``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from pytest_recfair.engine import registry, stream
from pytest_recfair.engine.base import AuditRequest
from pytest_recfair.errors import ConfigError, RecfairError
from pytest_recfair.gate import baselines
from pytest_recfair.gate import thresholds as gate
from pytest_recfair.gate.limits import Thresholds
from pytest_recfair.results import AuditResult, GateFailure, GateOutcome
from pytest_recfair.settings import AuditSettings
from pytest_recfair.vocab import accept_command


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
        with stream.fewer_collections():  # a paper-scale baseline is ~1M JSON values
            return BaselineState(path, result=baselines.load(source), legacy=legacy)
    except RecfairError as exc:
        return BaselineState(path, problem=str(exc), legacy=legacy)


@dataclass(frozen=True, slots=True)
class BaselineCheck:
    """One test's stored baseline and whether this run is compared with it (decided once)."""

    state: BaselineState
    baseline: AuditResult | None  # compared against: usable, compatible, not updating
    problem: str | None = None  # why the stored baseline is not compared (incompatible)


def check_baseline(
    settings: AuditSettings, result: AuditResult, state: BaselineState
) -> BaselineCheck:
    """Whether this run is compared with the stored baseline: not under --fairness-update,
    not without a usable file, not when it is incompatible (a run on a subset of the
    baseline's entities is compatible: it is compared on the shared entities)."""
    stored = state.result
    if settings.update or stored is None:
        return BaselineCheck(state, None)
    problem = baselines.result_incompatibility(stored, result)
    return BaselineCheck(state, None if problem else stored, problem)


def gate_outcome(
    settings: AuditSettings,
    result: AuditResult,
    baseline: AuditResult | None,
    problem: str | None = None,
) -> GateOutcome:
    """The gate before the test body runs; an incompatible baseline (``problem``) fails."""
    measured = gate.evaluate(
        result,
        baseline,
        Thresholds(**settings.thresholds()),
        tolerance=settings.tolerance,
        alpha=settings.alpha,
        seed=settings.resample_seed,
        n_resamples=settings.n_resamples,
        gated=settings.gated,
        floor_factor=settings.baseline_floor,
        noise_limit=settings.baseline_noise_limit,
    )
    own = registry.kind_for(settings).failures(settings, result, baseline)
    incompatible = (GateFailure("incompatible", detail=problem),) if problem else ()
    return GateOutcome.of((*measured.failures, *own, *incompatible), measured.notes, measured.drift)


def gate_against(
    settings: AuditSettings, result: AuditResult, baseline: AuditResult | None
) -> GateOutcome:
    """:func:`gate_outcome` against ``baseline`` when it is compatible with ``result``."""
    problem = None if baseline is None else baselines.result_incompatibility(baseline, result)
    return gate_outcome(settings, result, None if problem else baseline, problem)


def run_audit(request: AuditRequest, baseline: AuditResult | None = None) -> AuditResult:
    """Audit and gate against ``baseline`` (the standalone API)."""
    result = stream.measure(request)
    return replace(result, gate=gate_against(request.settings, result, baseline))


def gate_result(
    settings: AuditSettings,
    result: AuditResult,
    baseline: AuditResult | None,
    problem: str | None = None,
) -> AuditResult:
    """``result`` with its :func:`gate_outcome`."""
    return replace(result, gate=gate_outcome(settings, result, baseline, problem))


#: The note of a run stored past its max_unusable by --fairness-update-force.
FORCED_NOTE = "stored although too many replies were unusable (--fairness-update-force)"


@dataclass(frozen=True, slots=True)
class Verdict:
    """Pass/fail of one audited test; ``result`` carries the gate outcome as judged (worded
    for pytest and every report by ``report.verdict_message``)."""

    passed: bool
    result: AuditResult
    write: Path | None = None  # where to write the baseline (--fairness-update, passed)
    moved_from: Path | None = None  # the old node-id file it replaces


def judge(
    settings: AuditSettings, result: AuditResult, check: BaselineCheck, test_id: str
) -> Verdict:
    """Pass/fail of one gated test (pure), its outcome composed once: under
    --fairness-update only absolute limits fail and the run becomes the baseline; under
    --fairness-explore each failure is a note, and an update writes only when it alone would."""
    state, checked = check.state, result.gate or GateOutcome(passed=True)
    failures, notes = checked.failures, checked.notes
    if settings.update and settings.update_force:  # a crossed max_unusable is only a note
        kept = tuple(f for f in failures if f.statistic != "unusable")
        if len(kept) != len(failures):
            failures, notes = kept, (*notes, FORCED_NOTE)
    problem = None if settings.update else _missing_baseline(state, test_id)
    if problem is not None:
        if not checked.passed:  # limits crossed too: both are said
            problem = (
                f"{problem.split(chr(10))[0]} It cannot be created from this run: "
                f"--fairness-update stores only a run that passes its absolute limits."
            )
        failures = (*failures, GateFailure("baseline", detail=problem))
    outcome = GateOutcome.of(failures, notes, checked.drift)
    writes = settings.update and outcome.passed
    if settings.explore:  # a failing test body still fails (body_failed adds it)
        said = [EXPLORE_NOTE]
        if outcome.failures:
            said.append("would fail on: " + "; ".join(_would_fail(f) for f in outcome.failures))
        if settings.update and not outcome.passed:
            said.append("baseline not written: the run crosses its absolute limits")
        outcome = GateOutcome.of((), (*outcome.notes, *said), outcome.drift)
    judged = replace(result, gate=outcome)
    if writes:
        return Verdict(True, judged, write=state.path, moved_from=state.legacy)
    return Verdict(outcome.passed, judged)


#: The note every result of an explore run carries (every channel shows the gate's notes).
EXPLORE_NOTE = "explore mode (--fairness-explore): nothing gated"


def _would_fail(f: GateFailure) -> str:
    """A gate failure explore mode did not apply, in a few words (never imports report)."""
    what = f.statistic or ("no usable baseline" if f.kind == "baseline" else None)
    return " ".join(x for x in (f.attribute, what, f"({f.kind})") if x)


def body_failed(verdict: Verdict, error: str) -> Verdict:
    """The verdict when the test's own code failed: a "test" failure whatever the gate
    said, and no baseline written (a run whose test failed is not one to accept)."""
    gate = verdict.result.gate or GateOutcome(passed=True)
    failures = (*gate.failures, GateFailure("test", detail=error))
    outcome = GateOutcome.of(failures, gate.notes, gate.drift)
    return Verdict(False, replace(verdict.result, gate=outcome))


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
