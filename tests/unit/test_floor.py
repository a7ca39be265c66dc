"""The per-baseline floor (gate/floor.py): the baseline's own standard error, stored in the
file, raising each gated member's margin, said in a note and in the failure's limit."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from pytest_recfair.gate import baselines
from pytest_recfair.gate import thresholds as floor
from pytest_recfair.gate.thresholds import Thresholds, evaluate
from pytest_recfair.metrics import aggregate
from pytest_recfair.report.failures import failure_text
from pytest_recfair.results import AuditResult, GateFailure
from pytest_recfair.vocab import STATISTICS
from tests.support import synth_results as synth


def _with_sims(result: AuditResult, sims: np.ndarray) -> AuditResult:
    a = result.attributes[0]
    fresh = synth.attribute(a.attribute, sims, a.matrix.values)
    return replace(result, attributes=(fresh,))


def test_snsr_error_is_the_extreme_pair_difference_over_entities() -> None:
    x = synth.draw(60, seed=3, bias={"Islamic": -0.1})
    means = x.mean(axis=0)
    diff = x[:, int(np.argmax(means))] - x[:, int(np.argmin(means))]
    expected = float(np.std(diff, ddof=1) / math.sqrt(x.shape[0]))
    assert floor.statistic_se(x, "snsr") == pytest.approx(expected, rel=1e-12)


def test_every_statistic_has_a_finite_error_even_when_the_means_tie() -> None:
    rng = np.random.default_rng(0)
    tied = np.full((30, 4), 0.5) + rng.normal(0, 0.05, size=(30, 4))
    tied -= tied.mean(axis=0) - 0.5  # every column mean exactly 0.5
    for stat in ("snsr", "snsv", "pafs"):
        se = floor.statistic_se(tied, stat)
        assert math.isfinite(se)
        assert se > 0


def test_left_out_cells_and_too_few_entities() -> None:
    x = synth.draw(20, seed=1)
    x[3, 1] = np.nan
    assert math.isfinite(floor.statistic_se(x, "snsr"))
    assert math.isnan(floor.statistic_se(x[:1], "snsr"))


def test_the_error_shrinks_with_entities() -> None:
    small = floor.statistic_se(synth.draw(25, seed=2, entity_seed=9), "snsr")
    large = floor.statistic_se(synth.draw(400, seed=2, entity_seed=9), "snsr")
    assert large < small / 2


def test_floors_are_keyed_like_drift_members_and_zero_turns_them_off() -> None:
    base = synth.audit(seed=1)
    fl = floor.floors(base, 2.0)
    se = floor.standard_errors(base.attributes[0])
    assert fl[("religion", "jaccard", "snsr")] == pytest.approx(2.0 * se["snsr"])
    assert set(fl) == {("religion", "jaccard", s) for s in (*STATISTICS, "unusable")}
    assert floor.floors(base, 0.0) == {}


def test_a_subset_run_gets_the_floor_of_the_shared_entities() -> None:
    base = synth.audit(seed=1, n_entities=100)
    shared = base.attributes[0].matrix.entities[:30]
    full = floor.floors(base, 1.0)[("religion", "jaccard", "snsr")]
    part = floor.floors(base, 1.0, set(shared))[("religion", "jaccard", "snsr")]
    assert part > full


def test_the_file_stores_the_error_the_gate_recomputes_bit_for_bit(tmp_path) -> None:  # type: ignore[no-untyped-def]
    base = synth.audit(seed=4)
    path = tmp_path / "b.json"
    baselines.write(path, base)
    import json

    doc = json.loads(path.read_text(encoding="utf-8"))
    stored = doc["attributes"][0]["standard_error"]
    again = floor.standard_errors(baselines.load(path).attributes[0])
    assert set(stored) == {*STATISTICS, "unusable"}
    assert stored == again


def _lucky_low_pair(shift: float) -> tuple[AuditResult, AuditResult]:
    """A baseline and a run whose top value sits ``shift`` higher for every entity."""
    base = synth.audit(seed=1, n_entities=80, bias={"Islamic": -0.1})
    x = np.array(base.attributes[0].matrix.sims)
    top = int(np.argmax(x.mean(axis=0)))
    y = x.copy()
    y[:, top] += shift + np.random.default_rng(5).normal(0, 0.002, size=x.shape[0])
    return base, _with_sims(base, y)


def test_a_rise_within_the_floor_passes_and_beyond_it_fails_at_the_floor() -> None:
    base, _ = _lucky_low_pair(0.0)
    fl = floor.floors(base, 1.645)[("religion", "jaccard", "snsr")]
    within_base, within = _lucky_low_pair(0.5 * fl)
    off = evaluate(within, within_base, Thresholds(), tolerance=0.0)
    on = evaluate(within, within_base, Thresholds(), tolerance=0.0, floor_factor=1.645)
    assert not off.passed  # the gate before: any significant rise fails
    assert on.passed
    assert any(n.startswith("baseline noise floor: 1 gated") for n in on.notes)
    beyond_base, beyond = _lucky_low_pair(3 * fl)
    out = evaluate(beyond, beyond_base, Thresholds(), tolerance=0.0, floor_factor=1.645)
    (f,) = out.failures
    assert f.limit == pytest.approx(fl)  # the effective tolerance, in every channel
    assert f.tolerance == 0.0  # and the one set, which it raised
    said = failure_text(f)
    assert f"tolerance {fl:.3g} (noise floor of the baseline; 0 set)" in said
    assert GateFailure.from_dict(f.to_dict()) == f  # the JSON report keeps both


def test_a_tolerance_above_the_floor_is_kept() -> None:
    base, now = _lucky_low_pair(0.2)
    out = evaluate(now, base, Thresholds(), tolerance=0.1, floor_factor=1.645)
    (f,) = out.failures
    assert f.limit == pytest.approx(0.1)
    assert f.tolerance is None
    assert "noise floor" not in failure_text(f)
    assert any("the floor is above the tolerance for 0 of them" in n for n in out.notes)


def test_a_noisy_baseline_is_warned_about() -> None:
    base = synth.audit(seed=1, n_entities=8, noise=0.2)
    now = synth.audit(seed=2, n_entities=8, noise=0.2)
    out = evaluate(now, base, Thresholds(), tolerance=0.0, floor_factor=1.645, noise_limit=0.01)
    warn = [n for n in out.notes if n.startswith("warning: the baseline is too noisy")]
    assert len(warn) == 1
    assert "religion (jaccard) SNSR" in warn[0]


def test_matrix_helper_matches_metrics_summary() -> None:
    # the helper above re-scores a matrix exactly as the synthetic audits do
    base = synth.audit(seed=1)
    x = np.array(base.attributes[0].matrix.sims)
    again = _with_sims(base, x)
    m = aggregate.SimilarityMatrix(
        base.attributes[0].matrix.entities,
        base.attributes[0].matrix.values,
        x,
        np.zeros(x.shape, dtype=bool),
    )
    assert again.attributes[0].snsr.value == aggregate.summarize(m).snsr
