"""metrics/exposure.py: exposure shares, IFairLRS MGU/DGU, Gini, popularity lift, drift."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_recfair.metrics import exposure as ex
from pytest_recfair.metrics.common import holm


def test_gini_is_zero_for_equal_and_near_one_for_one_item_taking_all() -> None:
    assert ex.gini([3, 3, 3, 3]) == pytest.approx(0.0)
    assert ex.gini([0, 0, 0, 10]) == pytest.approx(0.75)  # (n - 1) / n
    assert np.isnan(ex.gini([0, 0]))


def test_popularity_quantiles_share_ties_and_order_items() -> None:
    q = ex.popularity_quantiles([10, 1, 5, 5])
    assert q[1] < q[2] == q[3] < q[0]
    assert q.min() > 0
    assert q.max() < 1


def test_bins_quantiles_and_declared_edges() -> None:
    codes, labels = ex.bin_codes(np.arange(100.0), 5)
    assert labels == ("Q1", "Q2", "Q3", "Q4", "Q5")
    assert np.bincount(codes).tolist() == [20] * 5
    codes, labels = ex.bin_codes(np.array([1.0, 50.0, 500.0, np.nan]), [10, 100])
    assert labels == ("<10", "10-100", ">=100")
    assert codes.tolist() == [0, 1, 2, -1]


def test_holm_adjusts_step_down() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    # a measure not tested (NaN) stays NaN, outside the family
    assert holm(np.array([0.01, np.nan, 0.03])) == pytest.approx([0.02, np.nan, 0.03], nan_ok=True)


def _lists(
    rng: np.random.Generator, E: int, move: float, lift_value: str | None = None
) -> tuple[list[tuple[str, str | None, list[int | None]]], ex.IntArray, ex.FloatArray]:
    """100 items, quintile groups by popularity; each entity asks neutral + 2 values,
    K = 10, items drawn in proportion to the catalogue except ``move`` of the tail
    quintile's share goes to the head quintile (and ``lift_value`` sees the head more)."""
    pop = np.arange(100.0)
    groups = ex.bin_codes(pop, 5)[0]
    out: list[tuple[str, str | None, list[int | None]]] = []
    for e in range(E):
        for value in (None, "a", "b"):
            w = np.full(5, 0.2)
            w[0] -= move
            w[4] += move
            if value is not None and value == lift_value:
                w = np.array([0.05, 0.1, 0.15, 0.3, 0.4])
            g = rng.choice(5, size=10, p=w)
            items: list[int | None] = [int(rng.choice(np.flatnonzero(groups == x))) for x in g]
            out.append((f"e{e}", value, items))
    return out, groups, ex.popularity_quantiles(pop)


def test_fair_lists_match_the_catalogue_and_a_moved_share_is_found() -> None:
    rng = np.random.default_rng(1)
    lists, groups, q = _lists(rng, 100, 0.0)
    d = ex.exposure_data(lists, groups, ("Q1", "Q2", "Q3", "Q4", "Q5"), q)
    fair = ex.exposure(d, np.full(5, 0.2), max_gap=0.05, n_resamples=300)
    assert np.all(fair.p_gap > 0.05)
    assert fair.point["long_tail"] == pytest.approx(0.8, abs=0.03)
    assert np.all(fair.ci["share"][:, 0] < 0.2 + 0.03)
    lists, groups, q = _lists(rng, 100, 0.1)
    d = ex.exposure_data(lists, groups, ("Q1", "Q2", "Q3", "Q4", "Q5"), q)
    moved = ex.exposure(d, np.full(5, 0.2), max_gap=0.05, n_resamples=300)
    assert moved.point["gap"][0] == pytest.approx(-0.1, abs=0.02)
    assert moved.point["gap"][4] == pytest.approx(0.1, abs=0.02)
    assert moved.p_gap[0] < 0.05
    assert moved.p_gap[4] < 0.05
    assert moved.p_gap[2] > 0.05
    # IFairLRS: MGU the mean |gap|, DGU max gap - min gap
    assert moved.point["mgu"] == pytest.approx(np.mean(np.abs(moved.point["gap"])))
    assert moved.point["dgu"] == pytest.approx(np.ptp(moved.point["gap"]))
    assert moved.point["ratio"][4] == pytest.approx(moved.point["share"][4] / 0.2)
    low = ex.exposure(d, np.full(5, 0.2), min_tail=0.8, n_resamples=300)
    assert low.p_tail < 0.05  # 10 points moved out of the tail


def test_popularity_lift_names_the_value_shown_popular_items() -> None:
    lists, groups, q = _lists(np.random.default_rng(2), 100, 0.0, lift_value="a")
    d = ex.exposure_data(lists, groups, ("Q1", "Q2", "Q3", "Q4", "Q5"), q)
    res = ex.exposure(d, np.full(5, 0.2), max_lift=0.05, n_resamples=300)
    a, b = d.values.index("a"), d.values.index("b")
    assert res.point["lift"][a] > 0.15
    assert res.p_lift[a] < 0.05 < res.p_lift[b]


def test_weighted_exposure_favours_the_first_slots() -> None:
    d = ex.exposure_data([("e", None, [0, 1]), ("f", None, [0, 1])], np.array([0, 1]),
                         ("top", "second"), None)  # fmt: skip
    res = ex.exposure(d, [0.5, 0.5], n_resamples=50)
    assert res.point["share"].tolist() == [0.5, 0.5]
    assert res.point["weighted"][0] > res.point["weighted"][1]
    assert np.isnan(res.point["long_tail"])  # no popularity: no long tail
    assert np.isnan(res.p_tail)


def test_drift_catches_a_worse_run_on_shared_entities_only() -> None:
    rng = np.random.default_rng(3)
    names = ("Q1", "Q2", "Q3", "Q4", "Q5")
    lists, groups, q = _lists(rng, 120, 0.0)
    base = ex.exposure_data(lists, groups, names, q)
    lists, _, _ = _lists(rng, 120, 0.0)
    same = ex.exposure_data(lists, groups, names, q)
    lists, _, _ = _lists(rng, 120, 0.1)
    worse = ex.exposure_data(lists, groups, names, q)
    ref = np.full(5, 0.2)
    calm = ex.compare_exposure(base, same, ref, n_resamples=300, margin=0.01)
    assert calm is not None
    assert np.all(calm.p_value > 0.05)
    hit = ex.compare_exposure(base, worse, ref, n_resamples=300, margin=0.01)
    assert hit is not None
    assert hit.n_paired == 120
    mgu, tail = ex.DRIFT_MEASURES.index("mgu"), ex.DRIFT_MEASURES.index("long_tail_drop")
    assert hit.p_value[mgu] < 0.05
    assert hit.p_value[tail] < 0.05
    assert hit.candidate[tail] < hit.baseline[tail]
    assert ex.compare_exposure(base, worse.rows([0]), ref, n_resamples=10) is None
