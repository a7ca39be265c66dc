"""The drift test's mechanics added by issue 23: seed-stable p-values, exact flip
variances, the bias-corrected margin, screening, the minimum detectable rise, subset runs
and the distinct family count. Rates (sizes, power) are measured by
benchmarks/drift_test_validity.py, not here."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from pytest_recfair.gate import drift
from pytest_recfair.metrics import _drift_core as core
from pytest_recfair.metrics import inference as inf
from pytest_recfair.results import AuditResult
from tests.support import synth_results as synth


def _names(n: int) -> list[str]:
    return [f"e{i}" for i in range(n)]


def _family(seed: int, E: int = 60) -> list[inf.DriftMember]:
    rng = np.random.default_rng(seed)
    out = []
    for key, V in (("a", 4), ("b", 3), ("c", 2)):
        ent = rng.uniform(0.4, 0.7, size=(E, 1))
        base = ent + rng.normal(0, 0.05, size=(E, V))
        cand = ent + rng.normal(0, 0.05, size=(E, V))
        cand[:, 0] += 0.02
        out.append(inf.DriftMember((key, "j", "snsr"), "snsr", _names(E), base, _names(E), cand))
    return out


@pytest.mark.parametrize("tolerance", [0.0, 0.02])
def test_the_same_data_give_the_same_p_values_for_any_seed(tolerance: float) -> None:
    members = _family(1)
    runs = [inf.drift_test(members, tolerance=tolerance, seed=s) for s in (0, 1, 7)]
    assert not runs[0].exact  # random flips: only the reference is drawn
    for other in runs[1:]:
        for x, y in zip(runs[0].members, other.members, strict=True):
            assert x.se == y.se  # the studentisation does not depend on the draw
            assert x.mde == pytest.approx(y.mde, abs=0.002)
            assert abs(x.p_adjusted - y.p_adjusted) < 0.02
            assert x.failed == y.failed


def test_a_margin_0_member_is_scaled_by_its_exact_flip_variance() -> None:
    """The unusable share is linear: its contributions are the entities' paired
    differences, and its SE is sqrt(sum d_i**2), the sign-flip variance in closed form."""
    rng = np.random.default_rng(2)
    base = (rng.uniform(size=(50, 3)) < 0.1).astype(float)
    cand = (rng.uniform(size=(50, 3)) < 0.2).astype(float)
    m = inf.DriftMember(("a", "j", "unusable"), "unusable", _names(50), base, _names(50), cand)
    (v,) = inf.drift_test([m]).members
    d = (cand - base).mean(axis=1) / 50
    assert v.se == pytest.approx(math.sqrt(np.sum(d**2)))
    assert v.worsening == pytest.approx(cand.mean() - base.mean())


def test_every_member_carries_its_minimum_detectable_rise() -> None:
    res = inf.drift_test(_family(3), tolerance=0.02)
    for v in res.members:
        assert v.se > 0
        assert v.margin == 0.02
        assert v.mde > v.se  # at least (z_0.95 + z_0.9) standard errors
        assert v.detectable == pytest.approx(0.02 + v.mde)


def test_more_entities_detect_smaller_rises() -> None:
    small = inf.drift_test(_family(4, E=40), tolerance=0.02).members[0]
    large = inf.drift_test(_family(4, E=400), tolerance=0.02).members[0]
    assert large.mde < small.mde / 2


def test_the_bias_of_two_tied_values_is_the_folded_normal_mean() -> None:
    cov = np.diag([0.01**2, 0.01**2])
    got = core.bias(np.array([0.5, 0.5]), cov, "snsr")
    assert got == pytest.approx(0.01 * math.sqrt(2) * math.sqrt(2 / math.pi), rel=0.05)
    assert core.bias(np.array([0.5, 0.9]), cov, "snsr") == pytest.approx(0.0, abs=1e-4)


def test_near_ties_are_closed_and_clear_gaps_kept() -> None:
    cov = np.diag([0.01**2] * 4)  # a gap's SE is 0.0141
    m = np.array([0.90, 0.89, 0.50, 0.20])
    closed = core.close_ties(m, cov)
    assert closed[0] == closed[1] == 0.90  # 0.01 apart: within TIE_GAP SE, a tie
    assert closed[1] - closed[2] == pytest.approx(0.39 - core.TIE_GAP * 0.01 * math.sqrt(2))


def test_a_candidate_whose_values_come_to_tie_is_corrected_downward() -> None:
    rng = np.random.default_rng(5)
    ent = rng.uniform(0.4, 0.7, size=(100, 1))
    base = ent + np.array([0.0, 0.02, 0.05, 0.07]) + rng.normal(0, 0.05, size=(100, 4))
    cand = ent + np.array([0.0, 0.0, 0.09, 0.09]) + rng.normal(0, 0.05, size=(100, 4))
    m = inf.DriftMember(("a",), "snsr", _names(100), base, _names(100), cand)
    (v,) = inf.drift_test([m], tolerance=0.02).members
    assert v.bias > 0.003  # ties at both ends: the candidate's range is biased up


def test_members_far_inside_the_null_leave_the_critical_value() -> None:
    fam = _family(6, E=200)
    far = fam[2]  # its rows made identical: worsening 0, far below a 0.05 margin
    fam[2] = replace(far, candidate=np.asarray(far.baseline) + 1e-3)
    res = inf.drift_test(fam, tolerance=0.05)
    assert res.members[2].screened
    alone = inf.drift_test(fam[:2], tolerance=0.05)
    assert res.members[0].mde == pytest.approx(alone.members[0].mde, rel=0.02)


def test_the_gate_notes_say_what_each_test_can_detect() -> None:
    base = synth.audit(seed=1, n_entities=40)
    now = synth.audit(seed=3, n_entities=40)
    loose = drift.evaluate_drift(now, base, tolerance=0.5)
    text = " ".join(loose.notes)
    assert "religion (jaccard): this test can detect an SNSR rise of" in text
    assert "too noisy" not in text
    tight = drift.evaluate_drift(now, base, tolerance=0.001)
    assert "religion (jaccard): warning: this test is too noisy for tolerance 0.001" in " ".join(
        tight.notes
    )


def _matrix_snsr(sims: np.ndarray) -> float:
    means = sims.mean(axis=0)
    return float(means.max() - means.min())


def test_a_subset_run_reports_the_drift_it_tested() -> None:
    base = synth.audit(seed=1, n_entities=100)
    small = synth.audit(seed=2, n_entities=30, bias={"Islamic": -0.2})
    d = drift.evaluate_drift(small, base, tolerance=0.02)
    b, a = base.attributes[0], small.attributes[0]
    shared = np.asarray(b.matrix.sims)[:30]
    tested = _matrix_snsr(np.asarray(a.matrix.sims)) - _matrix_snsr(shared)
    assert d.deltas["religion"]["snsr"] == pytest.approx(tested)
    assert d.deltas["religion"]["snsr"] != pytest.approx(a.snsr.value - b.snsr.value)
    (f,) = [f for f in d.failures if f.statistic == "snsr"]
    assert f.baseline == pytest.approx(_matrix_snsr(shared))
    assert f.baseline_ci is None  # the full baseline's interval is not the tested value's


def test_a_full_run_keeps_the_full_statistics() -> None:
    base = synth.audit(seed=1, n_entities=40)
    now = synth.audit(seed=2, n_entities=40)
    d = drift.evaluate_drift(now, base)
    b, a = base.attributes[0], now.attributes[0]
    assert d.deltas["religion"]["snsr"] == a.snsr.value - b.snsr.value


def test_the_family_count_is_the_number_of_distinct_members() -> None:
    """metric="all": one SNSR member per metric, ONE unusable member per attribute."""
    one = synth.audit(seed=1, n_entities=40, bias={"Islamic": -0.2})
    base1 = synth.audit(seed=2, n_entities=40)

    def every_metric(r: AuditResult) -> AuditResult:
        attrs = tuple(replace(r.attributes[0], metric=m) for m in ("jaccard", "serp", "prag"))
        return replace(r, attributes=attrs)

    now, base = every_metric(one), every_metric(base1)
    d = drift.evaluate_drift(now, base, gated=("snsr", "snsv", "snsr"))
    assert d.test is not None
    assert len(d.test.members) == 3 * 2 + 1
    assert drift.family_size(drift._members(drift.paired(now, base)[0], ("snsr",))) == 4
    assert all(f.detail and "7 comparisons" in f.detail for f in d.failures)
    # one power line per attribute and statistic, its metrics side by side
    lines = [n for n in d.notes if "this test can detect an SNSR rise" in n]
    assert len(lines) == 1
    assert lines[0].startswith("religion (jaccard / serp / prag): this test can detect")


def _rows(seed: int, effects: tuple[float, ...], E: int = 100, sd: float = 0.05) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ent = rng.uniform(0.4, 0.6, size=(E, 1))
    return np.asarray(ent + np.asarray(effects) + rng.normal(0, sd, size=(E, len(effects))))


def test_the_detectable_rise_includes_the_range_bias_a_rise_loses() -> None:
    """A baseline whose top two values nearly tie has a range biased up; a rise of its
    top value separates it and loses that bias, so the calibrated MDE is larger than
    (c + z_0.9) SE by about that bias, and grows with the noise that makes it."""
    near, clear = (0.0, 0.05, 0.06), (0.0, 0.25, 0.5)
    gaps = []
    for effects in (near, clear):
        base, cand = _rows(1, effects, sd=0.08), _rows(2, effects, sd=0.08)
        plain = core.mde(0.01, 1.7)
        got = core.calibrated_mde(0.01, 1.7, base, cand, 0.02)
        lost = core.snsr_shortfall(base, cand)(0.02 + got)
        assert got == pytest.approx(plain + max(0.0, lost), rel=0.05)
        gaps.append(got - plain)
    assert gaps[0] > 0.003  # near-tie at the top: a real shortfall
    assert gaps[1] == pytest.approx(0.0, abs=5e-4)  # clear gaps: (c + z_0.9) SE alone


def test_a_margin_snsr_member_reports_the_calibrated_rise() -> None:
    base, cand = _rows(3, (0.0, 0.05, 0.06), sd=0.08), _rows(4, (0.0, 0.05, 0.06), sd=0.08)
    m = inf.DriftMember(("a", "j", "snsr"), "snsr", _names(100), base, _names(100), cand)
    runs = [inf.drift_test([m], tolerance=0.02, seed=s).members[0] for s in (0, 1)]
    # one member: its critical value is the one-sided 5% point (~1.66 with the t factor)
    plain = core.mde(runs[0].se, 1.7)
    assert runs[0].mde > plain + 0.001  # the near-tie's shortfall is added
    assert runs[0].mde == pytest.approx(runs[1].mde, abs=0.002)  # no seed in it
    # margin 0: the exact test has no bias to make up, the plain formula
    (v0,) = inf.drift_test([m], tolerance=0.0).members
    assert v0.bias == 0.0


def test_the_calibrated_rise_survives_missing_cells_and_empty_values() -> None:
    base, cand = _rows(5, (0.0, 0.05, 0.06)), _rows(6, (0.0, 0.05, 0.06))
    base[::7, 1] = np.nan  # unusable cells: left out of the means, as the test does
    assert math.isfinite(core.calibrated_mde(0.01, 1.7, base, cand, 0.02))
    cand[:, 2] = np.nan  # a value nobody scored: no alternative to evaluate, no shortfall
    assert core.snsr_shortfall(base, cand)(0.02 + 0.03) == 0.0
    assert core.calibrated_mde(0.01, 1.7, base, cand, 0.02) == core.mde(0.01, 1.7)
    assert math.isnan(core.calibrated_mde(0.0, 1.7, base, cand, 0.02))  # no noise at all
