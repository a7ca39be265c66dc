"""Memory of scoring a large audit stays bounded (issue 12): resample matrices of one byte
per cell multiplied a block at a time, bounded title caches, no dict round trip of a
result in a one-process run.

The peaks are counted by tracemalloc (numpy reports its buffers to it), so the bounds
are exact counts of allocations, not RSS or timings: the same on a loaded machine. The
figures of whole pytest runs are in docs/performance.md (benchmarks/bench_scale.py).
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from pytest_recfair.metrics import _drift_core, common, inference, stats
from pytest_recfair.metrics.aggregate import SimilarityMatrix
from pytest_recfair.metrics.stats import intervals
from pytest_recfair.replies import matching, titles

E, B = 10_000, 2_000  # a 10,000-entity audit with the default 2,000 resamples
MB = 1 << 20


def _peak(fn: Callable[[], Any]) -> int:
    """Bytes allocated at the peak of ``fn()`` above what was live before it."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.fixture
def fresh_weights() -> Iterator[None]:
    stats.forget_weights()
    yield
    stats.forget_weights()


def test_interval_weights_are_one_byte_per_cell(fresh_weights: None) -> None:
    # a (2000, 10000) float64 matrix was 160 MB, drawn through int64 arrays as large
    W = stats.seeded_weights(0, B, E)
    assert W.nbytes <= B * E
    assert int(W.sum()) == B * E  # every resample draws E entities


def test_intervals_of_a_large_table_peak_far_below_a_float_matrix(fresh_weights: None) -> None:
    sims = np.random.default_rng(0).random((E, 4))
    names = tuple(f"e{i}" for i in range(E))
    matrix = SimilarityMatrix(names, ("a", "b", "c", "d"), sims, np.zeros(sims.shape, dtype=bool))
    peak = _peak(lambda: intervals(matrix, n_resamples=B, seed=0))
    assert peak < 80 * MB, f"peak {peak / MB:.0f} MB; a float64 (B, E) matrix is 160 MB"


def test_drift_test_of_large_runs_peaks_far_below_a_float_matrix() -> None:
    rng = np.random.default_rng(1)
    names = [f"e{i}" for i in range(E)]
    base, cand = rng.random((E, 4)), rng.random((E, 4))
    member = inference.DriftMember(("a", "snsr"), "snsr", names, base, names, cand)
    peak = _peak(lambda: inference.drift_test([member], n_resamples=B, seed=0))
    assert peak < 80 * MB, f"peak {peak / MB:.0f} MB; a float64 (B, E) matrix is 160 MB"


def test_paper_scale_weights_are_drawn_in_small_blocks() -> None:
    # 1,000 entities x 2,000 resamples: 2 MB of counts, drawn through 2 MB index blocks
    peak = _peak(lambda: common.resample_weights(np.random.default_rng(0), B, 1_000))
    assert peak < 8 * MB, f"peak {peak / MB:.1f} MB for 2 MB of weights"


def test_step_down_copies_a_block_of_draws_not_the_reference() -> None:
    # a paper-scale drift test's reference: 50,000 draws x 48 members, float32 (9.6 MB)
    rng = np.random.default_rng(4)
    Tp = rng.standard_normal((50_000, 48), dtype=np.float32)
    T = rng.standard_normal(48)
    peak = _peak(lambda: _drift_core.step_down(T, Tp, False, T < -1))
    assert peak < Tp.nbytes / 4, f"peak {peak / MB:.1f} MB; the reference: {Tp.nbytes / MB:.1f}"


def test_one_block_products_are_the_float_products() -> None:
    rng = np.random.default_rng(2)
    W = rng.integers(0, 4, size=(300, 500)).astype(np.uint8)
    X = rng.random((500, 3))
    (got,) = common.products(W, X)
    np.testing.assert_array_equal(got, W.astype(np.float64) @ X)


def test_blocked_products_match_the_whole_product(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    W = rng.integers(0, 4, size=(300, 500)).astype(np.uint8)
    X, v = rng.random((500, 3)), rng.random(500)
    monkeypatch.setattr(common, "BLOCK_CELLS", 500 * 7)  # blocks of 7 rows, one short
    got_x, got_v = common.products(W, X, v)
    np.testing.assert_allclose(got_x, W.astype(np.float64) @ X, rtol=1e-12)
    np.testing.assert_allclose(got_v, W.astype(np.float64) @ v, rtol=1e-12)


def test_counts_too_large_for_a_byte_widen_the_matrix() -> None:
    W = np.zeros((2, 3), dtype=np.uint8)
    counts = np.array([[0, 300, 1]], dtype=np.int64)
    W = common.compact_counts(W, counts)
    W[0:1] = counts
    assert W.dtype == np.uint16
    assert int(W[0, 1]) == 300


@pytest.mark.parametrize(
    "cached",
    [matching.normalize, titles.clean_title],
    ids=["matching.normalize", "titles.clean_title"],
)
def test_title_caches_are_bounded(cached: Any) -> None:
    cached.cache_clear()
    size = cached.cache_info().maxsize
    assert size is not None
    assert size <= 1 << 14
    for i in range(size + 1000):
        cached(f"Distinct Title {i}")
    assert cached.cache_info().currsize == size
    cached.cache_clear()
