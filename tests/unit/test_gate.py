"""The fairness gate: thresholds, significant vs non-significant drift, structured failures
and the messages report.failures renders from them."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from pytest_recfair import vocab
from pytest_recfair.errors import ConfigError
from pytest_recfair.gate import drift
from pytest_recfair.gate import thresholds as gate
from pytest_recfair.report.failures import failure_message, failure_text, format_outcome
from pytest_recfair.report.fmt import fmt_p
from pytest_recfair.results import AuditResult, GateFailure, GateOutcome
from tests.support.synth_results import RELIGION, attribute, audit

NO_LIMITS = gate.Thresholds()


def _stats(outcome: GateOutcome) -> set[tuple[str | None, str | None]]:
    return {(f.attribute, f.statistic) for f in outcome.failures}


# --- thresholds ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"max_snsr": "0.1"}, "max_snsr must be a number"),
        ({"max_snsv": True}, "max_snsv must be a number"),
        ({"min_pafs": 1.5}, "min_pafs must be between 0 and 1"),
        ({"max_refusal_gap": -0.1}, "max_refusal_gap must be between 0 and 1"),
        ({"max_entropy": -1.0}, "max_entropy must be >= 0"),
    ],
)
def test_thresholds_reject_bad_values(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        gate.Thresholds(**kwargs)  # type: ignore[arg-type]


def test_thresholds_keep_only_the_limits_set() -> None:
    limits = asdict(gate.Thresholds(max_snsr=0.1, min_pafs=0.9))
    assert {k: v for k, v in limits.items() if v is not None} == {"max_snsr": 0.1, "min_pafs": 0.9}


@pytest.mark.parametrize(
    ("tolerance", "alpha", "needle"),
    [
        (-0.01, 0.05, "tolerance must be a finite number >= 0"),
        (math.inf, 0.05, "tolerance must be a finite number >= 0"),
        ("0.1", 0.05, "tolerance must be a finite number >= 0"),
        (0.0, 0.0, "alpha"),
        (0.0, 1.0, "alpha"),
    ],
)
def test_bad_tolerance_or_alpha(tolerance: object, alpha: object, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        gate.evaluate(audit(), None, NO_LIMITS, tolerance=tolerance, alpha=alpha)  # type: ignore[arg-type]


def test_thresholds_must_be_thresholds() -> None:
    with pytest.raises(TypeError, match=r"gate\.Thresholds"):
        gate.evaluate(audit(), None, {"max_snsr": 0.1}, tolerance=0.0)  # type: ignore[arg-type]


def test_threshold_crossing_is_exact_at_the_limit() -> None:
    r = audit(bias={"Islamic": -0.1})
    a = r.attributes[0]
    at = gate.evaluate(r, None, gate.Thresholds(max_snsr=a.snsr.value), tolerance=0.0)
    assert at.passed  # "crossed" means strictly above
    below = gate.evaluate(r, None, gate.Thresholds(max_snsr=a.snsr.value - 1e-9), tolerance=0.0)
    assert not below.passed
    assert _stats(below) == {("religion", "snsr")}
    assert "above the maximum" in failure_text(below.failures[0], r)
    assert "least Islamic" in failure_text(below.failures[0], r)


def test_each_threshold_fails_its_statistic() -> None:
    r = audit(bias={"Islamic": -0.1}, refusals={"Islamic": 10}, entropy=2.5)
    a = r.attributes[0]
    limits = gate.Thresholds(
        max_snsr=a.snsr.value / 2,
        max_snsv=a.snsv.value / 2,
        min_pafs=min(1.0, a.pafs.value + 0.01),
        max_entropy=2.0,
        max_refusal_gap=a.refusal_gap / 2,
    )
    outcome = gate.evaluate(r, None, limits, tolerance=0.0)
    assert not outcome.passed
    assert _stats(outcome) == {
        ("religion", s) for s in ("snsr", "snsv", "pafs", "entropy", "refusal_gap")
    }
    pafs = next(f for f in outcome.failures if f.statistic == "pafs")
    assert "below the minimum" in failure_text(pafs, r)


def test_entropy_threshold_without_repeats_fails_with_advice() -> None:
    outcome = gate.evaluate(audit(), None, gate.Thresholds(max_entropy=3.0), tolerance=0.0)
    assert not outcome.passed
    assert "repeats" in failure_text(outcome.failures[0])


def test_undefined_statistic_cannot_pass_a_threshold() -> None:
    sims = np.full((10, len(RELIGION)), 0.5)
    sims[:, 2] = np.nan  # every entity skipped for one value
    r = AuditResult(meta=audit().meta, attributes=(attribute("religion", sims, RELIGION),))
    assert math.isnan(r.attributes[0].snsr.value)
    outcome = gate.evaluate(r, None, gate.Thresholds(max_snsr=0.5), tolerance=0.0)
    assert not outcome.passed
    assert "could not be computed" in failure_text(outcome.failures[0])


# --- drift against a baseline -------------------------------------------------------------


def test_planted_regression_fails() -> None:
    baseline = audit(seed=0)
    regressed = audit(seed=7, bias={"Islamic": -0.12})
    outcome = gate.evaluate(regressed, baseline, NO_LIMITS, tolerance=0.02)
    assert not outcome.passed
    assert ("religion", "snsr") in _stats(outcome)
    snsr = next(f for f in outcome.failures if f.statistic == "snsr")
    assert "p < 0.001" in failure_text(snsr, regressed)
    assert "least Islamic" in failure_text(snsr, regressed)
    drift = outcome.drift["religion"]
    assert drift["snsr"] == pytest.approx(
        regressed.attributes[0].snsr.value - baseline.attributes[0].snsr.value
    )
    assert drift["snsr"] > 0.02
    assert drift["pafs"] < 0


@pytest.mark.parametrize("seed", range(1, 6))
def test_resampled_unchanged_run_passes(seed: int) -> None:
    baseline = audit(seed=0)
    rerun = audit(seed=seed)  # same entities and model, fresh reply noise
    outcome = gate.evaluate(rerun, baseline, NO_LIMITS, tolerance=0.02)
    assert outcome.passed, outcome.failures
    assert set(outcome.drift["religion"]) >= {"snsr", "snsv", "pafs", "refusal_gap"}


def test_rise_within_tolerance_passes() -> None:
    baseline = audit(seed=0)
    regressed = audit(seed=7, bias={"Islamic": -0.12})
    outcome = gate.evaluate(regressed, baseline, NO_LIMITS, tolerance=0.5)
    assert outcome.passed
    assert outcome.drift["religion"]["snsr"] > 0.02


def test_rises_that_are_noise_are_noted_not_failed() -> None:
    """With tolerance 0 every rise is tested; on unchanged data few may be significant."""
    noted = failed = 0
    for pair in range(20):
        baseline = audit(seed=2 * pair, n_entities=12, noise=0.15)
        rerun = audit(seed=2 * pair + 1, n_entities=12, noise=0.15)
        outcome = gate.evaluate(rerun, baseline, NO_LIMITS, tolerance=0.0, seed=pair)
        rose = outcome.drift["religion"]["snsr"] > 0
        snsr_failed = ("religion", "snsr") in _stats(outcome)
        snsr_noted = any("SNSR" in n and "not significantly" in n for n in outcome.notes)
        if rose:
            assert snsr_failed != snsr_noted  # exactly one verdict per rise
        else:
            assert not snsr_failed
            assert not snsr_noted
        noted += snsr_noted
        failed += snsr_failed
    assert noted >= 3
    # alpha = 0.05 over 20 null pairs: P(5 or more false alarms) < 0.3%; the rate itself is
    # measured over hundreds of runs by benchmarks/gate_validity.py
    assert failed <= 4


def test_pafs_rise_is_an_improvement() -> None:
    baseline = audit(seed=0, bias={"Islamic": -0.12})
    fixed = audit(seed=3)
    outcome = gate.evaluate(fixed, baseline, NO_LIMITS, tolerance=0.0)
    assert outcome.passed
    assert outcome.drift["religion"]["pafs"] > 0
    assert outcome.drift["religion"]["snsr"] < 0


def test_alpha_decides_significance() -> None:
    baseline = audit(seed=0, n_entities=20, noise=0.1)
    # -0.01, not -0.06: the drift test (exact flip variances, screening) is more powerful,
    # and -0.06 is now clearly significant (p 0.011) where the test needs an uncertain rise
    rerun = audit(seed=2, n_entities=20, noise=0.1, bias={"Islamic": -0.01})
    test = drift.evaluate_drift(rerun, baseline).test
    assert test is not None
    p = test.members[0].p_adjusted  # religion SNSR (the unusable-share member never moves)
    assert test.members[0].worsening > 0
    assert 0.02 < p < 0.9  # a rise of uncertain significance
    above = gate.evaluate(rerun, baseline, NO_LIMITS, tolerance=0.0, alpha=p + 0.01)
    assert ("religion", "snsr") in _stats(above)
    below = gate.evaluate(rerun, baseline, NO_LIMITS, tolerance=0.0, alpha=p - 0.01)
    assert ("religion", "snsr") not in _stats(below)
    assert any(n.startswith("religion (jaccard): SNSR") for n in below.notes)


def test_same_seed_same_outcome() -> None:
    baseline = audit(seed=0, n_entities=12, noise=0.15)
    rerun = audit(seed=4, n_entities=12, noise=0.15, bias={"Islamic": -0.03})
    first = gate.evaluate(rerun, baseline, NO_LIMITS, tolerance=0.0, seed=11)
    assert gate.evaluate(rerun, baseline, NO_LIMITS, tolerance=0.0, seed=11) == first


def test_changed_model_is_a_note() -> None:
    outcome = gate.evaluate(audit(seed=1, model="sim-v2"), audit(), NO_LIMITS, tolerance=0.02)
    assert outcome.passed
    assert "model changed: sim-v1 -> sim-v2" in outcome.notes


def test_attribute_only_on_one_side_is_noted() -> None:
    with_gender = audit(seed=1, gender=True)
    outcome = gate.evaluate(with_gender, audit(), NO_LIMITS, tolerance=0.0)
    assert set(outcome.drift) == {"religion"}
    assert any(n.startswith("gender (jaccard) has no baseline entry") for n in outcome.notes)
    back = gate.evaluate(audit(seed=1), with_gender, NO_LIMITS, tolerance=0.0)
    assert any("gender (jaccard) is in the baseline but was not audited" in n for n in back.notes)


def test_no_baseline_no_drift() -> None:
    outcome = gate.evaluate(audit(), None, NO_LIMITS, tolerance=0.0)
    assert outcome == GateOutcome(passed=True)


def test_baseline_with_other_values_fails_with_advice() -> None:
    other = ("Buddhist", "Christian", "Hindu", "Jewish")
    sims = np.asarray(audit().attributes[0].matrix.sims)
    baseline = AuditResult(meta=audit().meta, attributes=(attribute("religion", sims, other),))
    regressed = audit(seed=7, bias={"Islamic": -0.12})
    outcome = gate.evaluate(regressed, baseline, NO_LIMITS, tolerance=0.0)
    assert not outcome.passed
    failure = outcome.failures[0]
    assert {f.kind for f in outcome.failures} == {"incomparable"}
    assert failure.attribute == "religion"
    assert "Hindu" in failure_text(failure, regressed)


# --- the failure message --------------------------------------------------------------------


def test_failure_message_is_a_table_that_names_the_crossed_limit() -> None:
    baseline = audit(seed=0)
    regressed = audit(seed=7, bias={"Islamic": -0.12}, model="sim-v2")
    limits = gate.Thresholds(max_snsr=0.05)
    outcome = gate.evaluate(regressed, baseline, limits, tolerance=0.02)
    text = failure_message(outcome, regressed)
    lines = text.splitlines()
    assert lines[0] == "fairness gate failed for tests/test_audit.py::test_religion (sim-v2):"
    a, b = regressed.attributes[0], baseline.attributes[0]
    # one headline for the failing statistic, its drift and its crossed limit together
    p = next(f.p_value for f in outcome.failures if f.kind == "drift")
    assert p is not None
    assert lines[1] == (
        f"  religion SNSR {b.snsr.value:.3f} → {a.snsr.value:.3f} "
        f"({a.snsr.value - b.snsr.value:+.3f}, tolerance 0.02, p "
        f"{fmt_p(p)}, above the maximum 0.05): "
        f"Islamic least favoured"
    )
    header = lines[2].split()
    assert header[:3] == ["attribute", "statistic", "baseline"]
    assert "threshold" in header
    drift_row = next(ln for ln in lines if ln.split()[:2] == ["religion", "snsr"] and "->" in ln)
    assert f"{b.snsr.value:.3f}" in drift_row
    assert f"{a.snsr.value:.3f}" in drift_row
    assert "Christian" in drift_row or "Buddhist" in drift_row or "Jewish" in drift_row
    assert "Islamic" in drift_row  # least favoured
    assert "max 0.05" in text
    assert "note: model changed: sim-v1 -> sim-v2" in text
    # past an absolute limit accepting would be refused: the limit is named, not the command
    assert lines[-1].startswith("Absolute limits crossed (max_snsr)")
    assert "--fairness-update" not in text
    drift_only = gate.evaluate(regressed, baseline, gate.Thresholds(), tolerance=0.02)
    assert (
        failure_message(drift_only, regressed)
        .splitlines()[-1]
        .endswith("pytest --fairness --fairness-update 'tests/test_audit.py::test_religion'")
    )


def test_format_outcome_recovers_limits_and_baseline_without_extras() -> None:
    baseline = audit(seed=0)
    regressed = audit(seed=7, bias={"Islamic": -0.12})
    outcome = gate.evaluate(regressed, baseline, gate.Thresholds(max_snsr=0.05), tolerance=0.02)
    lines = format_outcome(outcome, regressed)
    rows = [ln for ln in lines[1:] if not ln.lstrip().startswith("-")]
    assert len(rows) == len(outcome.failures)
    assert any("max 0.05" in r for r in rows)
    assert any("tol 0.02" in r for r in rows)
    base_snsr = f"{baseline.attributes[0].snsr.value:.3f} ->"
    assert any(base_snsr in r for r in rows)


def test_format_outcome_of_a_pass_is_empty() -> None:
    outcome = gate.evaluate(audit(), None, NO_LIMITS, tolerance=0.0)
    assert format_outcome(outcome, audit()) == []


def test_evaluate_keeps_the_result_untouched() -> None:
    r = audit(seed=2)
    before = replace(r)
    gate.evaluate(r, audit(), gate.Thresholds(max_snsr=0.0), tolerance=0.0)
    assert r == before


def test_undefined_statistics_record_no_drift() -> None:
    sims = np.full((10, len(RELIGION)), 0.5)
    sims[:, 2] = np.nan
    broken = AuditResult(meta=audit().meta, attributes=(attribute("religion", sims, RELIGION),))
    outcome = gate.evaluate(broken, audit(n_entities=10), NO_LIMITS, tolerance=0.0)
    assert outcome.passed
    assert set(outcome.drift["religion"]) == {"refusal_gap", "unusable"}


# --- structured failures ----------------------------------------------------------------------


def test_failures_are_structured_data() -> None:
    baseline = audit(seed=0)
    regressed = audit(seed=7, bias={"Islamic": -0.12})
    a, b = regressed.attributes[0], baseline.attributes[0]
    outcome = gate.evaluate(regressed, baseline, gate.Thresholds(max_snsr=0.05), tolerance=0.02)
    by_kind = {(f.kind, f.statistic): f for f in outcome.failures}
    threshold = by_kind["threshold", "snsr"]
    assert (threshold.attribute, threshold.value, threshold.limit) == (
        "religion",
        a.snsr.value,
        0.05,
    )
    assert threshold.value_ci == a.snsr.ci
    drift = by_kind["drift", "snsr"]
    assert (drift.value, drift.baseline, drift.limit, drift.alpha) == (
        a.snsr.value,
        b.snsr.value,
        0.02,
        0.05,
    )
    assert drift.p_value is not None
    assert drift.p_value < 0.05
    assert drift.n_paired == len(a.matrix.entities)
    assert all(f.kind in vocab.FAILURE_KINDS for f in outcome.failures)


def test_structured_failures_round_trip_through_dicts() -> None:
    baseline = audit(seed=0)
    regressed = audit(seed=7, bias={"Islamic": -0.12})
    outcome = gate.evaluate(regressed, baseline, gate.Thresholds(max_snsr=0.05), tolerance=0.02)
    outcome = replace(
        outcome, failures=(*outcome.failures, GateFailure("incompatible", detail="k differs"))
    )
    back = GateOutcome.from_dict(json.loads(json.dumps(outcome.to_dict())))
    assert back == outcome


def test_no_sentinels_and_no_parsing_of_own_messages() -> None:
    source = Path(gate.__file__).read_text(encoding="utf-8")
    assert "import re" not in source
    assert '"*"' not in source
    for f in gate.evaluate(
        audit(seed=7), audit(), gate.Thresholds(max_snsr=0.0), tolerance=0.0
    ).failures:
        assert f.attribute != "*"
