"""engine.verdict composes one outcome from its parts; report.failures words it.

The parts: the gate's structured failures (thresholds, drift), the kind's own, an
incompatible baseline, --fairness-update-force, a missing baseline, the test body's error.
"""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest

from pytest_recfair import settings, vocab
from pytest_recfair.engine import verdict
from pytest_recfair.errors import ConfigError
from pytest_recfair.gate import thresholds as gate
from pytest_recfair.gate.limits import THRESHOLD_NAMES
from pytest_recfair.report.failures import failure_message, verdict_message
from pytest_recfair.results import AuditResult, GateFailure, GateOutcome
from pytest_recfair.settings import AuditSettings, resolve
from tests.support.synth_results import audit

TEST_ID = "tests/test_audit.py::test_religion"


def _settings(**marker: object) -> AuditSettings:
    return resolve(marker={"attr": "religion", **marker}, ini={"recfair_n_resamples": "200"})


def _gated(s: AuditSettings, result: AuditResult, baseline: AuditResult | None) -> AuditResult:
    return replace(result, gate=verdict.gate_outcome(s, result, baseline))


def _missing(tmp_path: Path) -> verdict.BaselineCheck:
    state = verdict.load_baseline(tmp_path, TEST_ID)
    return verdict.BaselineCheck(state, None)


def test_outcome_of_passes_exactly_without_failures() -> None:
    assert GateOutcome.of() == GateOutcome(passed=True)
    failure = GateFailure("test", detail="boom")
    outcome = GateOutcome.of([failure], ["n"], {"religion": {"snsr": 0.1}})
    assert outcome == GateOutcome(False, (failure,), ("n",), {"religion": {"snsr": 0.1}})


def test_gate_outcome_joins_thresholds_and_incompatibility() -> None:
    s = _settings(max_snsr=0.0001)
    result = audit(bias={"Islamic": 0.4})
    outcome = verdict.gate_outcome(s, result, None, "other grid")
    assert [f.kind for f in outcome.failures] == ["threshold", "incompatible"]
    assert not outcome.passed


def test_gate_outcome_checks_compatibility_itself() -> None:
    s = _settings()
    result = audit()
    other = audit(k=10)
    (failure,) = verdict.gate_outcome(s, result, other).failures
    assert failure.kind == "incompatible"
    assert verdict.gate_outcome(s, result, None) == GateOutcome(passed=True)


def test_missing_baseline_with_crossed_limits_says_both(tmp_path: Path) -> None:
    s = _settings(max_snsr=0.0001)
    gated = _gated(s, audit(bias={"Islamic": 0.4}), None)
    assert gated.gate is not None
    v = verdict.judge(s, gated, _missing(tmp_path), TEST_ID)
    assert not v.passed
    assert v.result.gate is not None
    assert [f.kind for f in v.result.gate.failures] == ["threshold", "baseline"]
    missing = v.result.gate.failures[-1].detail
    assert missing is not None
    assert missing.endswith("stores only a run that passes its absolute limits.")
    # the gate's table, then why the baseline cannot be created from this run
    assert verdict_message(v.result) == f"{failure_message(gated.gate, gated)}\n{missing}"


def test_body_failure_is_composed_with_the_other_parts(tmp_path: Path) -> None:
    s = _settings()
    gated = _gated(s, audit(), None)
    v = verdict.judge(s, gated, _missing(tmp_path), TEST_ID)
    failed = verdict.body_failed(v, "AssertionError: no")
    assert failed.result.gate is not None
    assert [f.kind for f in failed.result.gate.failures] == ["baseline", "test"]
    assert failed.write is None
    # the missing baseline is what pytest would say; the body's error is pytest's own
    assert verdict_message(failed.result) == verdict_message(v.result)
    assert verdict_message(v.result).startswith(f"no fairness baseline for {TEST_ID}")


def test_body_failure_alone_is_its_error() -> None:
    s = resolve(marker={"attr": "religion"}, cli={"fairness_update": True})
    gated = _gated(s, audit(), None)
    state = verdict.BaselineState(Path("b.json"))
    v = verdict.judge(s, gated, verdict.BaselineCheck(state, None), TEST_ID)
    assert v.passed
    assert v.write == Path("b.json")
    failed = verdict.body_failed(v, "AssertionError: no")
    assert not failed.passed
    assert failed.write is None
    assert verdict_message(failed.result) == "AssertionError: no"
    assert verdict_message(v.result) == ""


def _unusable() -> AuditResult:
    """An audit whose Islamic replies had no usable list for a quarter of the entities."""
    base = audit()
    a = base.attributes[0]
    missing = np.zeros(a.matrix.sims.shape, dtype=bool)
    missing[:10, a.matrix.values.index("Islamic")] = True
    attr = replace(a, matrix=replace(a.matrix, missing=missing))
    return replace(base, attributes=(attr,))


def test_forced_update_turns_max_unusable_into_one_note() -> None:
    s = resolve(
        marker={"attr": "religion", "max_unusable": 0.01},
        cli={"fairness_update": True, "fairness_update_force": True},
    )
    gated = _gated(s, _unusable(), None)
    assert gated.gate is not None
    assert [f.statistic for f in gated.gate.failures] == ["unusable"]
    state = verdict.BaselineState(Path("b.json"))
    v = verdict.judge(s, gated, verdict.BaselineCheck(state, None), TEST_ID)
    assert v.passed
    assert v.result.gate == GateOutcome(True, (), (verdict.FORCED_NOTE,), gated.gate.drift)
    failed = verdict.body_failed(v, "boom")
    assert failed.result.gate is not None
    assert failed.result.gate.notes == (verdict.FORCED_NOTE,)  # composed once, not twice


def test_threshold_names_are_the_gates() -> None:
    assert tuple(f.name for f in fields(gate.Thresholds)) == THRESHOLD_NAMES
    # the one list: no other module spells the threshold names out
    assert not hasattr(vocab, "THRESHOLDS")
    assert set(THRESHOLD_NAMES) <= set(settings.MARKER_KEYS)


@pytest.mark.parametrize("bad", [-0.1, float("inf"), "0.1", True])
def test_tolerance_is_checked_by_the_gate(bad: object) -> None:
    with pytest.raises(ConfigError, match="tolerance must be a"):
        gate.check_tolerance(bad)
    assert gate.check_tolerance(0) == 0.0
