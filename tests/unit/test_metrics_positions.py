"""Candidate-position statistics: curves, bias, missed rate, consistency and their tests."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_recfair.errors import DataError
from pytest_recfair.metrics.positions import (
    DRIFT_MEASURES,
    MEASURES,
    compare_positions,
    position_bias,
    random_orders,
)


def test_measures_by_hand() -> None:
    positions = np.array([[[0, 0, -1], [0, 1, 2]]])  # 1 entity, neutral + A, 3 orders
    chosen = np.array([[[1, 1, -1], [0, 0, 0]]])
    res = position_bias(positions, chosen, 3, groups=("neutral", "A"), n_permutations=9)
    np.testing.assert_allclose(res.curve, [[1, 0, 0], [1 / 3, 1 / 3, 1 / 3]])
    # bias = TVD from uniform: neutral (2/3 + 1/3 + 1/3) / 2; A is uniform
    np.testing.assert_allclose(res.measures[:, MEASURES.index("bias")], [2 / 3, 0])
    np.testing.assert_allclose(res.measures[:, MEASURES.index("missed")], [1 / 3, 0])
    # consistency: of 3 pairs of orders, neutral has one agreeing pair, A all three
    np.testing.assert_allclose(res.measures[:, MEASURES.index("consistency")], [1 / 3, 1])
    assert res.n_picks.tolist() == [3, 3]
    assert MEASURES == ("bias", "missed", "consistency")


def test_random_orders_start_with_the_given_order_and_are_seeded() -> None:
    a = random_orders(5, 4, np.random.default_rng(1))
    b = random_orders(5, 4, np.random.default_rng(1))
    np.testing.assert_array_equal(a, b)
    assert a[0].tolist() == [0, 1, 2, 3, 4]
    assert all(sorted(row) == [0, 1, 2, 3, 4] for row in a.tolist())


def _simulate(
    rng: np.random.Generator,
    E: int,
    G: int,
    P: int,
    K: int,
    first: float,
    group_first: float | None = None,
):  # type: ignore[no-untyped-def]
    """Each entity has a favourite candidate; with probability `first` the model takes
    whatever stands first instead (group 1 may use `group_first`)."""
    orders = np.stack([random_orders(K, P, rng) for _ in range(E)])
    fav = rng.integers(0, K, E)
    chosen = np.empty((E, G, P), dtype=np.int64)
    for g in range(G):
        s = group_first if (g == 1 and group_first is not None) else first
        take_first = rng.random((E, P)) < s
        chosen[:, g, :] = np.where(take_first, orders[:, :, 0], fav[:, None])
    return orders, chosen


def test_uniformity_test_holds_its_level_when_groups_share_orders() -> None:
    rng = np.random.default_rng(2)
    ps = []
    for _ in range(40):
        orders, chosen = _simulate(rng, 30, 4, 4, 6, 0.0)
        res = position_bias(
            None, chosen, 6, orders=orders, n_permutations=199, n_resamples=20, seed=rng
        )
        ps.append(res.p_uniform)
    # groups share orders and favourites: the picks are dependent, the test must not care
    assert np.mean(np.array(ps) < 0.05) <= 0.15


def test_planted_position_bias_is_detected_and_measured() -> None:
    rng = np.random.default_rng(4)
    orders, chosen = _simulate(rng, 100, 3, 5, 8, 0.3)
    res = position_bias(None, chosen, 8, orders=orders, n_permutations=199, n_resamples=200)
    assert res.p_uniform < 0.01
    assert (res.curve[:, 0] > 0.3).all()  # 0.3 + 0.7/8 expected
    lo, hi = res.pooled_bias_ci
    assert lo <= res.pooled_bias <= hi


def test_a_group_with_more_position_bias_differs_from_neutral() -> None:
    rng = np.random.default_rng(6)
    orders, chosen = _simulate(rng, 100, 4, 5, 8, 0.0, group_first=0.5)
    res = position_bias(None, chosen, 8, orders=orders, n_permutations=299, n_resamples=50)
    bias_row = MEASURES.index("bias")
    assert res.p_adjusted[0, bias_row] < 0.05  # group 1
    assert (res.p_adjusted[1:, bias_row] > 0.05).all()


def test_bad_shapes_and_ranges() -> None:
    with pytest.raises(DataError, match="entities, groups, orders"):
        position_bias(np.zeros((2, 2)), np.zeros((2, 2)), 3)
    with pytest.raises(DataError, match=r"must be in -2\.\.2"):
        position_bias(np.full((1, 1, 1), 3), np.full((1, 1, 1), 0), 3)
    with pytest.raises(DataError, match="give positions, or orders"):
        position_bias(None, np.zeros((1, 1, 1), dtype=int), 3)


def test_a_failed_request_is_left_out_not_counted_as_missed() -> None:
    positions = np.array([[[0, -2, -1, 1]]])
    chosen = np.array([[[2, -2, -1, 2]]])
    res = position_bias(positions, chosen, 3, n_permutations=9)
    assert res.n_picks.tolist() == [3]  # the failed request is not a pick
    np.testing.assert_allclose(res.measures[:, MEASURES.index("missed")], [1 / 3])
    # of the 3 pairs among the 3 replies, one agrees (candidate 2 twice)
    np.testing.assert_allclose(res.measures[:, MEASURES.index("consistency")], [1 / 3])


def test_a_failed_request_in_chosen_alone_is_left_out_when_positions_are_derived() -> None:
    orders = np.array([[[0, 1, 2], [2, 1, 0], [1, 2, 0], [0, 2, 1]]])
    chosen = np.array([[[2, -2, -1, 2]]])  # -2: a failed request (engine's sentinel)
    derived = position_bias(None, chosen, 3, orders=orders, n_permutations=9, n_resamples=9)
    given = position_bias(
        np.array([[[2, -2, -1, 1]]]), chosen, 3, orders=orders, n_permutations=9, n_resamples=9
    )
    assert derived.n_picks.tolist() == [3]
    np.testing.assert_allclose(derived.measures[:, MEASURES.index("missed")], [1 / 3])
    np.testing.assert_array_equal(derived.measures, given.measures)
    assert derived.p_uniform == given.p_uniform


def _entity_counts(rng: np.random.Generator, first: float, E: int = 60, k: int = 6) -> np.ndarray:
    """(E, k+1) counts of 20 picks per entity: position 0 with prob ``first``, else uniform."""
    p = np.full(k + 1, (1.0 - first) / k)
    p[0] += first
    p[k] = 0.0
    return np.stack([rng.multinomial(20, p / p.sum()) for _ in range(E)]).astype(float)


def test_compare_positions_sees_a_grown_bias_and_not_an_unchanged_one() -> None:
    rng = np.random.default_rng(3)
    before = _entity_counts(rng, 0.1)
    grown = compare_positions(before, _entity_counts(rng, 0.4), n_resamples=499, margin=0.05)
    same = compare_positions(before, _entity_counts(rng, 0.1), n_resamples=499, margin=0.05)
    bias = DRIFT_MEASURES.index("bias")
    # first-position share 0.1 -> 0.4 moves the TVD from uniform by (0.4 - 0.1) * 5/6 = 0.25
    assert abs(grown.delta[bias] - 0.25) < 0.06
    assert grown.p_value[bias] < 0.01
    assert same.p_value[bias] > 0.05
    assert grown.n_paired == 60


def test_compare_positions_counts_missed_picks_and_refuses_other_shapes() -> None:
    before = np.array([[5, 5, 0], [5, 5, 0]], dtype=float)
    after = np.array([[3, 3, 4], [3, 3, 4]], dtype=float)
    cmp = compare_positions(before, after, n_resamples=99)
    np.testing.assert_allclose(cmp.delta[DRIFT_MEASURES.index("missed")], 0.4)
    with pytest.raises(DataError, match="same non-empty"):
        compare_positions(before, after[:1], n_resamples=9)
