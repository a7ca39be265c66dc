"""Item-side statistics: shares, TVD shift, LMRec association, permutation test, bootstrap."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pytest_recfair.engine.items import field_codes
from pytest_recfair.errors import DataError
from pytest_recfair.metrics import itemshift
from pytest_recfair.metrics.itemshift import (
    NEUTRAL,
    ItemCounts,
    compare_shift,
    group_tests,
    shift,
)
from pytest_recfair.replies.catalogue import Catalogue, catalogue_from_records


def item_counts(neutral, by_value, catalogue: Catalogue, fields, **kw) -> ItemCounts:  # type: ignore[no-untyped-def]
    """The metrics take plain arrays; the engine turns the catalogue's fields into them."""
    return itemshift.item_counts(neutral, by_value, field_codes(catalogue, fields), **kw)


PRICES = ["$", "$", "$$", "$$$"]


def _cat() -> Catalogue:
    return catalogue_from_records(
        [
            {"title": f"item {i}", "price": p, "kind": "x" if i % 2 else "y"}
            for i, p in enumerate(PRICES)
        ]
    )


def _hand_counts():  # type: ignore[no-untyped-def]
    neutral = {"e1": [0, 2], "e2": [0, 3]}
    by_value = {"A": {"e1": [0, 1], "e2": [1, None]}, "B": {"e1": [2, 3], "e2": [3, 3]}}
    return item_counts(neutral, by_value, _cat(), ["price"])


def test_counts_shares_and_tvd_by_hand() -> None:
    counts = _hand_counts()
    assert counts.groups == (NEUTRAL, "A", "B")
    assert counts.categories == (("$", "$$", "$$$"),)
    res = shift(counts, n_permutations=50, n_resamples=50)
    # neutral: $ 2, $$ 1, $$$ 1; A: $ 3 (one title unmatched); B: $$ 1, $$$ 3
    np.testing.assert_allclose(res.shares, [[0.5, 0.25, 0.25], [1, 0, 0], [0, 0.25, 0.75]])
    np.testing.assert_allclose(res.n_items[:, 0], [4, 3, 4])
    # TVD: A 0.5 (0.5 + 0.25 + 0.25)/2, B (0.5 + 0 + 0.5)/2
    np.testing.assert_allclose(res.shift[:, 0], [0.5, 0.5])
    np.testing.assert_allclose(res.max_shift, [0.5])


def test_association_score_is_lmrecs_formula() -> None:
    res = shift(_hand_counts(), n_permutations=10, n_resamples=10)
    # A: f(c|A) = (1, 0, 0); other values (B) = (0, 1/4, 3/4); all values = (3/7, 1/7, 3/7)
    np.testing.assert_allclose(res.association[0], [7 / 3, -1.75, -1.75])
    np.testing.assert_allclose(res.association[1], [-7 / 3, 1.75, 1.75])


def test_several_fields_share_one_count_cube() -> None:
    counts = item_counts({"e": [0, 1, 2, 3]}, {"A": {"e": [1, 1]}}, _cat(), ["price", "kind"])
    assert counts.counts.shape == (1, 2, 5)
    assert counts.counts[0, 1, counts.field_slice("kind")].tolist() == [2, 0]  # item 1 is "x"


def _simulate(rng: np.random.Generator, E: int, V: int, planted: float) -> tuple[dict, dict]:  # type: ignore[type-arg]
    """Items 0-99 cheap ($), 100-199 dear ($$$); value 0 gets `planted` more cheap items."""

    def draw(p_cheap: float) -> list[int]:
        cheap = rng.random(10) < p_cheap
        return list(np.where(cheap, rng.integers(0, 100, 10), rng.integers(100, 200, 10)))

    base = rng.uniform(0.3, 0.7, E)  # entities differ: the unit of resampling
    neutral = {f"e{e}": draw(base[e]) for e in range(E)}
    by_value = {
        f"v{v}": {f"e{e}": draw(min(1.0, base[e] + (planted if v == 0 else 0.0))) for e in range(E)}
        for v in range(V)
    }
    return neutral, by_value


def _two_level() -> Catalogue:
    return catalogue_from_records(
        [{"title": f"t{i}", "price": "$" if i < 100 else "$$$"} for i in range(200)]
    )


def test_permutation_test_holds_its_level_and_detects_a_planted_shift() -> None:
    rng = np.random.default_rng(7)
    cat = _two_level()
    null_p = []
    for _ in range(40):
        counts = item_counts(*_simulate(rng, 30, 4, 0.0), cat, ["price"])
        null_p.append(group_tests(counts, 199, rng)[2].min())
    # family-wise: the smallest adjusted p over 4 values is below 0.05 rarely (5% +- noise)
    assert np.mean(np.array(null_p) < 0.05) <= 0.15
    counts = item_counts(*_simulate(rng, 60, 4, 0.25), cat, ["price"])
    _, raw, adj, *_ = group_tests(counts, 199, rng)
    assert adj[0, 0] < 0.05  # the planted value
    assert (adj >= raw).all()


def test_bootstrap_interval_covers_the_point_and_same_seed_same_numbers() -> None:
    rng = np.random.default_rng(3)
    counts = item_counts(*_simulate(rng, 50, 3, 0.2), _two_level(), ["price"])
    a = shift(counts, n_permutations=99, n_resamples=200, seed=11)
    b = shift(counts, n_permutations=99, n_resamples=200, seed=11)
    np.testing.assert_array_equal(a.shift_ci, b.shift_ci)
    lo, hi = a.max_shift_ci[0]
    assert lo <= a.max_shift[0] <= hi
    assert a.share_ci.shape == (4, 2, 2)


def test_compare_shift_sees_a_grown_shift_and_not_an_unchanged_one() -> None:
    rng = np.random.default_rng(5)
    cat = _two_level()
    before = item_counts(*_simulate(rng, 80, 3, 0.0), cat, ["price"])
    after = item_counts(*_simulate(rng, 80, 3, 0.3), cat, ["price"])
    grown = compare_shift(before, after, n_resamples=300)
    assert grown.delta[0] > 0.1
    assert grown.p_value[0] < 0.05
    same = compare_shift(before, before, n_resamples=300)
    assert same.delta[0] == 0.0
    assert same.p_value[0] == 1.0  # delta* is exactly 0 in every resample: no evidence


def test_compare_refuses_changed_values() -> None:
    cat = _two_level()
    a = item_counts({"e": [1]}, {"A": {"e": [2]}}, cat, ["price"])
    b = item_counts({"e": [1]}, {"B": {"e": [2]}}, cat, ["price"])
    with pytest.raises(DataError, match="differ in values or fields"):
        compare_shift(a, b)


def test_item_counts_needs_a_field() -> None:
    with pytest.raises(DataError, match="at least one catalogue field"):
        item_counts({}, {}, _cat(), [])


def test_values_pool_into_the_groups_they_signal() -> None:
    cat = _cat()
    by_value = {"Emily": {"e": [0]}, "Lakisha": {"e": [2]}, "Anne": {"e": [1, 3]}}
    groups = {"Emily": "White female", "Anne": "White female", "Lakisha": "Black female"}
    counts = item_counts({"e": [0]}, by_value, cat, ["price"], group_of=groups)
    assert counts.groups == (NEUTRAL, "White female", "Black female")
    assert counts.counts[0].tolist() == [[1, 0, 0], [2, 0, 1], [0, 1, 0]]


def _pooled(rng: np.random.Generator, E: int, names: int, planted: float) -> ItemCounts:
    """The implicit grid's shape: ``names`` first names per group pooled (10 items each)
    against one neutral list of 10 items; group B gets ``planted`` more cheap items."""
    cat = _two_level()
    neutral, by_value = _simulate(rng, E, 2 * names, 0.0)
    base = {e: float(np.mean(np.asarray(idx) < 100)) for e, idx in neutral.items()}
    for v in range(names, 2 * names):  # group B
        by_value[f"v{v}"] = {
            e: list(np.where(rng.random(10) < min(1.0, 0.5 * base[e] + 0.25 + planted),
                             rng.integers(0, 100, 10), rng.integers(100, 200, 10)))
            for e in neutral
        }  # fmt: skip
    groups = {f"v{v}": "A" if v < names else "B" for v in range(2 * names)}
    return item_counts(neutral, by_value, cat, ["price"], group_of=groups)


def test_pooled_groups_against_one_neutral_list_hold_the_level() -> None:
    """220 pooled items per group against 10 neutral ones (issue 21): permuting the pooled
    rows rejected 47-73% of null runs at 5% when entities are alike (see
    benchmarks/itemside_validity.py); permuting lists holds the level."""
    rng = np.random.default_rng(21)
    cat = _two_level()
    rejected = 0
    runs = 60
    for _ in range(runs):
        neutral, by_value = _simulate(rng, 40, 2 * 22, 0.0)
        cat_groups = {f"v{v}": "A" if v < 22 else "B" for v in range(44)}
        counts = item_counts(neutral, by_value, cat, ["price"], group_of=cat_groups)
        assert counts.lists is not None
        assert counts.lists.shape == (40, 45, 2)
        _, _, adj, _, adj_between = group_tests(counts, 199, rng)
        rejected += bool((adj < 0.05).any() or (adj_between < 0.05).any())
    assert rejected / runs <= 0.15  # two families at 5% each, +- noise of 60 runs


def _coin(rng: np.random.Generator) -> list[int]:
    return list(
        np.where(rng.random(10) < 0.5, rng.integers(0, 100, 10), rng.integers(100, 200, 10))
    )


def test_lists_alike_pooled_rows_were_anti_conservative() -> None:
    """Entities alike: the pooled-row permutation (the old test) rejects far above 5%,
    the list permutation does not."""
    rng = np.random.default_rng(3)
    cat = _two_level()
    old = new = 0
    for _ in range(30):
        groups = {f"v{v}": "A" if v < 22 else "B" for v in range(44)}
        neutral = {f"e{e}": _coin(rng) for e in range(40)}
        by_value = {v: {e: _coin(rng) for e in neutral} for v in groups}
        counts = item_counts(neutral, by_value, cat, ["price"], group_of=groups)
        new += bool((group_tests(counts, 199, rng)[2] < 0.05).any())
        pooled_rows = replace(counts, lists=None, list_group=None)
        old += bool((group_tests(pooled_rows, 199, rng)[2] < 0.05).any())
    assert old >= 9  # >= 30% of 30 null runs
    assert new <= 5


def test_between_groups_detects_a_shift_the_neutral_list_is_too_noisy_for() -> None:
    rng = np.random.default_rng(5)
    counts = _pooled(rng, 60, 22, -0.1)
    res = shift(counts, n_permutations=199, n_resamples=50, seed=1)
    assert res.between.shape == (2, 1)
    assert (res.p_between < 0.05).all()  # A against B and B against A
    assert res.between[0, 0] == pytest.approx(res.between[1, 0])  # two groups: symmetric


def test_one_value_has_no_between_comparison() -> None:
    res = shift(_hand_counts(), n_permutations=20, n_resamples=10)
    if res.between.shape[0] == 1:
        assert np.isnan(res.between).all()
        assert (res.p_between == 1.0).all()
