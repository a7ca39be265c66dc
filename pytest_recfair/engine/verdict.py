"""The verdict of one audited test (baseline, gate, pass/fail, baseline writer) and the run's
bookkeeping (:class:`RunCollector`, ``--fairness-prune``). Each outcome is composed once from
its parts, worded by ``report.failures`` (this module never imports ``report``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from pytest_recfair.cassettes import compact
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.cassettes.vcrfile import Key, read_interactions, serialize, stored_key
from pytest_recfair.compare.models import ModelComparison, ModelSlot, compare_models
from pytest_recfair.engine import registry, stream
from pytest_recfair.engine.base import AuditRequest
from pytest_recfair.errors import ConfigError, RecfairError
from pytest_recfair.fileio import bulk_work
from pytest_recfair.gate import baselines
from pytest_recfair.gate import thresholds as gate
from pytest_recfair.gate.limits import Thresholds
from pytest_recfair.results import AuditResult, GateFailure, GateOutcome
from pytest_recfair.settings import AuditSettings
from pytest_recfair.vocab import STATISTICS, accept_command


@dataclass(frozen=True, slots=True)
class BaselineState:
    """What is on disk for one test: a loaded baseline, nothing, or an unusable file."""

    path: Path
    result: AuditResult | None = None
    problem: str | None = None  # unreadable / schema-invalid / truncated, with the reason
    legacy: Path | None = None  # read from the old node-id file name; moved on update


def load_baseline(root: Path, test_id: str, name: str | None = None) -> BaselineState:
    """The baseline by the test's stable name (``name``), else its old node-id file."""
    path = baselines.named_path(root, baselines.stable_name(test_id, name))
    source, legacy = path, None
    if not path.exists():
        old = baselines.baseline_path(root, test_id)
        if not old.exists():
            return BaselineState(path)
        source = legacy = old
    try:
        with bulk_work():  # a paper-scale baseline is ~1M JSON values
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
    """The stored baseline this run is compared with (a subset of its entities is compatible)."""
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
    """The gate before the test body runs; an incompatible baseline (or ``problem``) fails."""
    if baseline is not None and problem is None:
        problem = baselines.result_incompatibility(baseline, result)
    baseline = None if problem else baseline
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


def run_audit(request: AuditRequest, baseline: AuditResult | None = None) -> AuditResult:
    """Audit and gate against ``baseline`` (the standalone API)."""
    result = stream.measure(request)
    return replace(result, gate=gate_outcome(request.settings, result, baseline))


#: The note of a run stored past its max_unusable by --fairness-update-force.
FORCED_NOTE = "stored although too many replies were unusable (--fairness-update-force)"


@dataclass(frozen=True, slots=True)
class Verdict:
    """Pass/fail of one test; ``result`` carries the gate outcome as judged."""

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
    accept, problem = accept_command(test_id), None  # no baseline to compare with
    if not settings.update and state.problem is not None:
        problem = (
            f"fairness baseline {state.path} is unusable: {state.problem}\n"
            f"Re-create it from this run with: {accept}"
        )
    elif not settings.update and state.result is None:
        problem = (
            f"no fairness baseline for {test_id} (expected {state.path}).\n"
            f"Create it from this run with: {accept}\nthen commit the baseline file."
        )
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
        said = ["explore mode (--fairness-explore): nothing gated"]
        if outcome.failures:
            said.append("would fail on: " + "; ".join(_would_fail(f) for f in outcome.failures))
        if settings.update and not outcome.passed:
            said.append("baseline not written: the run crosses its absolute limits")
        outcome = GateOutcome.of((), (*outcome.notes, *said), outcome.drift)
    where = (state.path, state.legacy) if writes else (None, None)
    return Verdict(writes or outcome.passed, replace(result, gate=outcome), *where)


def _would_fail(f: GateFailure) -> str:
    """A gate failure explore mode did not apply, in a few words (never imports report)."""
    what = f.statistic or ("no usable baseline" if f.kind == "baseline" else None)
    return " ".join(x for x in (f.attribute, what, f"({f.kind})") if x)


def body_failed(verdict: Verdict, error: str) -> Verdict:
    """A "test" failure whatever the gate said; no baseline (a failed test is no run to keep)."""
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


@dataclass
class TestRecord:
    """One audited test as the controller will see it; updated when the gate is judged."""

    __test__ = False

    result: AuditResult
    baseline: AuditResult | None  # the one the result was compared against
    wrote: Path | None = None  # baseline written by --fairness-update
    not_written: str | None = None  # why --fairness-update wrote no baseline for this test
    changes: list[str] = field(default_factory=list)  # old -> new of the written baseline
    model_slot: ModelSlot | None = None  # the test's place in a comparison of models

    def payload(self) -> dict[str, Any]:
        """What a worker ships with the call-phase report (JSON-able; ``RunCollector.add``)."""
        return {
            k: None if (v := getattr(self, k)) is None else to(v) for k, (to, _) in _SHIP.items()
        }


#: How each TestRecord field travels from a worker: (to JSON, back); None stays None.
_SHIP: Final[dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]]] = {
    "result": (AuditResult.to_dict, lambda d: AuditResult.from_dict(dict(d))),
    "baseline": (AuditResult.to_dict, lambda d: AuditResult.from_dict(dict(d))),
    "wrote": (str, Path),
    "not_written": (str, str),
    "changes": (list, lambda c: [str(x) for x in c]),
    "model_slot": (ModelSlot.to_dict, ModelSlot.from_dict),
}


@dataclass
class RunCollector:
    """The results of one pytest run, gathered on the controller (or the only process)."""

    results: dict[str, AuditResult] = field(default_factory=dict)
    # the baseline each test was compared against, by test id (for the report's markers)
    baselines: dict[str, AuditResult] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    changes: dict[Path, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # e.g. "fairness report written: PATH"
    slots: dict[str, ModelSlot] = field(default_factory=dict)  # compared models, by test id
    _models: list[ModelComparison] | None = None  # computed once, when first asked

    def add(self, payload: Mapping[str, Any]) -> None:
        """Add a test's payload as a worker shipped it (``TestRecord.payload``)."""
        got: dict[str, Any] = {
            k: None if (v := payload.get(k)) is None else back(v) for k, (_, back) in _SHIP.items()
        }
        self.add_record(TestRecord(**got))

    def add_record(self, record: TestRecord) -> None:
        """A test judged in this process: no dict round trip (millions of floats)."""
        test_id = record.result.meta.test_id
        self.results[test_id] = record.result
        if record.baseline is not None:
            self.baselines[test_id] = record.baseline
        else:  # a re-run of the same test id without a comparison drops the stale one
            self.baselines.pop(test_id, None)
        if record.model_slot:
            self.slots[test_id] = record.model_slot
        else:
            self.slots.pop(test_id, None)
        self._models = None
        if record.wrote is not None:
            self.written.append(record.wrote)
            self.changes[record.wrote] = list(record.changes)
        if record.not_written:
            self.notes.append(f"fairness baseline NOT written for {test_id}: {record.not_written}")

    def ordered(self) -> list[AuditResult]:
        return [self.results[k] for k in sorted(self.results)]

    def models(self) -> list[ModelComparison]:
        """The side-by-side comparisons of the models audited by one test (docs/reports.md)."""
        if self._models is None:
            self._models = compare_models(self.results, self.slots)
        return self._models


def baseline_changes(old: AuditResult | None, new: AuditResult) -> list[str]:
    """One line per attribute whose stored numbers change (3 decimals, as reported)."""
    if old is None:
        return ["new baseline"]
    before = {(a.attribute, a.metric): a for a in old.attributes}
    lines = []
    for a in new.attributes:
        label = f"{a.attribute} ({a.metric})"
        prior = before.pop((a.attribute, a.metric), None)
        if prior is None:
            lines.append(f"{label}: new")
            continue
        pairs = [(s, getattr(prior, s).value, getattr(a, s).value) for s in STATISTICS]
        moved = [f"{s.upper()} {x:.3f} -> {y:.3f}" for s, x, y in pairs if f"{x:.3f}" != f"{y:.3f}"]
        if moved:
            lines.append(f"{label}: {', '.join(moved)}")
    lines += [f"{attr} ({metric}): dropped" for attr, metric in before]
    if old.meta.model != new.meta.model:
        lines.append(f"model: {old.meta.model} -> {new.meta.model}")
    return lines or ["unchanged (3 decimals)"]


def unused_baselines(root: Path, rootdir: Path, audited: Iterable[str]) -> list[tuple[Path, str]]:
    """Baselines under ``root`` of tests not audited in a collected module or a gone one."""
    audited = set(audited)
    modules = {test_id.split("::")[0] for test_id in audited}
    unused = []
    for path in sorted(root.rglob("*.json")) if root.is_dir() else []:
        try:
            test_id = str(json.loads(path.read_text(encoding="utf-8"))["meta"]["test_id"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a baseline of ours: not ours to judge
        module = test_id.split("::")[0]
        if test_id not in audited and (module in modules or not (rootdir / module).exists()):
            unused.append((path, test_id))
    return unused


@dataclass
class PrunePlan:
    """What no test used: per cassette file the unused interactions, whole baselines."""

    cassettes: dict[Path, tuple[int, int]] = field(default_factory=dict)  # unused, total
    baselines: list[Path] = field(default_factory=list)
    used: set[tuple[str, Key]] = field(default_factory=set)

    @property
    def empty(self) -> bool:
        return not self.cassettes and not self.baselines

    def lines(self, root: Path) -> list[str]:
        out = []
        for path, (unused, total) in sorted(self.cassettes.items()):
            what = "whole file" if unused == total else f"{unused} of {total} interactions"
            out.append(f"  cassette {_rel(path, root)}: {what} unused")
        out.extend(f"  baseline {_rel(path, root)}: unused" for path in self.baselines)
        return out


def prune_plan(
    cassette_root: Path,
    used: set[tuple[str, Key]],
    baseline_root: Path,
    used_baselines: Iterable[Path],
    *,
    migrate: bool = False,
) -> PrunePlan:
    """The unused entries; ``migrate``: old per-test cassettes are moved in first (else kept)."""
    if migrate and cassette_root.is_dir():
        CassetteStore(cassette_root).migrate_legacy()
    found = PrunePlan(used=used)
    for path in compact.cassette_files(cassette_root):
        items = read_interactions(path)
        unused = sum((path.name, stored_key(item)) not in used for item in items)
        if unused:
            found.cassettes[path] = (unused, len(items))
    keep = {p.resolve() for p in used_baselines}
    found.baselines = [p for p in sorted(baseline_root.glob("*.json")) if p.resolve() not in keep]
    return found


def prune(found: PrunePlan) -> None:
    """Delete what ``found`` lists (files rewritten atomically, emptied ones removed)."""
    for path, (unused, total) in found.cassettes.items():
        if unused == total:
            path.unlink(missing_ok=True)
            continue
        items = read_interactions(path)
        kept = [item for item in items if (path.name, stored_key(item)) in found.used]
        compact.write(path, serialize(kept))  # in the file's own format
    for path in found.baselines:
        path.unlink(missing_ok=True)


def _rel(path: Path, root: Path) -> str:
    return str(path.relative_to(root) if path.is_relative_to(root) else path)
