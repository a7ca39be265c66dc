"""Entity bootstrap, paired comparison of two runs, and the repeat noise floor."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_recfair.errors import DataError
from pytest_recfair.metrics.aggregate import SimilarityMatrix, summarize
from pytest_recfair.metrics.stats import bootstrap, noise_floor, paired_comparison


def matrix(sims: np.ndarray, entities: list[str] | None = None) -> SimilarityMatrix:
    E, V = sims.shape
    ents = tuple(entities or [f"e{i}" for i in range(E)])
    return SimilarityMatrix(ents, tuple(f"v{j}" for j in range(V)), sims, np.isnan(sims))


def noisy(seed: int, centres: list[float], E: int = 60, sd: float = 0.05) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(np.array(centres)[None, :] + rng.normal(0, sd, (E, len(centres))), 0, 1)


# --------------------------------------------------------------------------- bootstrap


@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=25, deadline=None)
def test_bootstrap_is_deterministic_under_a_seed(seed: int) -> None:
    m = matrix(noisy(1, [0.3, 0.5, 0.6], E=30))
    a = bootstrap(m, n_resamples=200, seed=seed)
    b = bootstrap(m, n_resamples=200, seed=seed)
    assert a == b
    c = bootstrap(m, n_resamples=200, seed=np.random.default_rng(seed))
    assert c == a  # an int seed means default_rng(seed)


def test_bootstrap_intervals_cover_the_point_estimates() -> None:
    m = matrix(noisy(2, [0.3, 0.5, 0.6]))
    t = summarize(m)
    r = bootstrap(m, n_resamples=500, seed=3)
    for v, (lo, hi) in r.value_ci.items():
        assert lo <= t.values[v].mean <= hi
    assert r.snsr_ci[0] <= t.snsr <= r.snsr_ci[1]
    assert r.pafs_ci[0] <= t.pafs <= r.pafs_ci[1]
    assert r.method == "percentile"
    assert r.n_undefined == 0
    # other seed, other draws
    assert bootstrap(m, n_resamples=500, seed=4).snsr_ci != r.snsr_ci


def test_bootstrap_keeps_entity_rows_together() -> None:
    # Every entity has the same similarity for both values, so whatever rows are drawn,
    # the two value means are equal and SNSR is exactly 0 in every resample.
    col = np.linspace(0.0, 1.0, 25)
    m = matrix(np.stack([col, col], axis=1))
    r = bootstrap(m, n_resamples=300, seed=0)
    assert r.snsr_ci == (0.0, 0.0)
    assert r.value_ci["v0"] == r.value_ci["v1"]
    assert r.value_ci["v0"][0] < 0.5 < r.value_ci["v0"][1]


def test_bootstrap_counts_resamples_with_an_unmeasured_value() -> None:
    sims = np.array([[0.5, np.nan], [0.4, 0.6], [0.3, np.nan]])
    r = bootstrap(matrix(sims), n_resamples=400, seed=0)
    # the value v1 is measured only when e1 is drawn: P(not drawn) = (2/3)^3
    assert 0 < r.n_undefined < 400
    assert r.value_ci["v1"] == (0.6, 0.6)


@pytest.mark.parametrize(
    ("kwargs", "exc", "needle"),
    [
        ({"n_resamples": 0}, ValueError, "n_resamples must be a positive int"),
        ({"confidence": 1.0}, ValueError, "confidence must be in"),
        ({"seed": 1.5}, TypeError, "seed must be an int"),
        ({"seed": True}, TypeError, "seed must be an int"),
    ],
)
def test_bootstrap_bad_arguments(kwargs: dict[str, object], exc: type, needle: str) -> None:
    with pytest.raises(exc, match=needle):
        bootstrap(matrix(np.ones((2, 2))), **kwargs)  # type: ignore[arg-type]


def test_bootstrap_needs_a_matrix() -> None:
    with pytest.raises(TypeError, match="SimilarityMatrix"):
        bootstrap([[0.1]])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- compare


def test_compare_same_run_has_no_evidence() -> None:
    m = matrix(noisy(5, [0.4, 0.5]))
    c = paired_comparison(m, m, "snsr", n_resamples=300)
    assert c.delta == 0.0
    assert c.ci == (0.0, 0.0)
    assert c.p_value == 1.0  # every resampled delta is 0: (1 + 300) / 301
    assert c.n_paired == 60
    assert c.alternative == "greater"


def test_compare_detects_a_less_fair_candidate() -> None:
    base = matrix(noisy(6, [0.50, 0.50, 0.50]))
    cand = matrix(noisy(7, [0.65, 0.50, 0.35]))
    c = paired_comparison(base, cand, "snsr", n_resamples=500, seed=1)
    assert (c.baseline, c.candidate) == (summarize(base).snsr, summarize(cand).snsr)
    assert c.delta > 0
    assert c.ci[0] > 0
    assert c.p_value < 0.01
    p = paired_comparison(base, cand, "pafs", n_resamples=500, seed=1)
    assert p.delta < 0
    assert p.alternative == "less"
    assert p.p_value < 0.01
    # the other way round: the candidate is fairer, so no evidence for H1
    back = paired_comparison(cand, base, "snsv", n_resamples=500, seed=1)
    assert back.delta < 0
    assert back.p_value > 0.5


def test_compare_pairs_by_entity_name() -> None:
    base_sims = noisy(8, [0.4, 0.6], E=20)
    cand_sims = noisy(9, [0.3, 0.7], E=20)
    names = [f"e{i}" for i in range(20)]
    base = matrix(base_sims, names)
    cand = matrix(cand_sims, names)
    order = np.arange(20)[::-1]
    shuffled = matrix(cand_sims[order], [names[i] for i in order])
    assert paired_comparison(base, cand, seed=3) == paired_comparison(base, shuffled, seed=3)
    # only shared entities are paired
    partial = matrix(cand_sims[:12], names[:12])
    assert paired_comparison(base, partial).n_paired == 12


def test_compare_refuses_unpairable_runs() -> None:
    base = matrix(np.ones((3, 2)))
    with pytest.raises(DataError, match="different attribute values"):
        paired_comparison(
            base, SimilarityMatrix(base.entities, ("v0", "z"), np.ones((3, 2)), base.missing)
        )
    with pytest.raises(DataError, match="share no entity"):
        paired_comparison(base, matrix(np.ones((3, 2)), ["x", "y", "z"]))
    with pytest.raises(ValueError, match="statistic must be one of"):
        paired_comparison(base, base, "mean")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- noise floor


def test_noise_floor_by_hand() -> None:
    # e1: Jaccard([a,b],[a,c]) = 1/3 both ways; e2: identical -> 1; e3: one repeat only
    nf = noise_floor(
        {"e1": [["a", "b"], ["a", "c"]], "e2": [["x"], ["x"]], "e3": [["q"]]},
        n_resamples=200,
    )
    assert nf is not None
    assert nf.n == 2
    assert nf.mean == pytest.approx((1 / 3 + 1) / 2)
    assert nf.ci[0] >= 1 / 3 - 1e-12
    assert nf.ci[1] <= 1 + 1e-12


def test_noise_floor_none_without_repeats_and_missing_repeats_dropped() -> None:
    assert noise_floor({"e1": [["a"]], "e2": [["b"], None]}) is None
    nf = noise_floor({"e1": [["a", "b"], None, ["b", "a"]]}, metric="prag", variant="fairllm")
    assert nf is not None
    assert nf.mean == 0.0
    with pytest.raises(TypeError, match=r"repeats\['e1'\]\[1\]\[0\]"):
        noise_floor({"e1": [["a"], [1]]})  # type: ignore[list-item]


def test_noise_floor_is_deterministic() -> None:
    reps = {f"e{i}": [["a", "b", f"c{i}"], ["a", f"d{i}", "b"]] for i in range(10)}
    assert noise_floor(reps, seed=5) == noise_floor(reps, seed=5)
    assert not math.isnan(noise_floor(reps, k=2).mean)  # type: ignore[union-attr]


@pytest.mark.parametrize(("B", "E", "block"), [(1000, 7, 50), (300, 1000, 4096), (17, 31, 1 << 22)])
def test_blocked_resample_weights_are_one_draw(
    B: int, E: int, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drawing the resample indices in blocks gives the numbers of one (B, E) draw."""
    from pytest_recfair.metrics import common

    monkeypatch.setattr(common, "DRAW_BLOCK", block)
    idx = np.random.default_rng(9).integers(0, E, size=(B, E), dtype=np.int64)
    one = np.stack([np.bincount(row, minlength=E) for row in idx]).astype(np.float64)
    np.testing.assert_array_equal(common.resample_weights(np.random.default_rng(9), B, E), one)


def test_bootstrap_reuses_weights_without_changing_numbers() -> None:
    rng = np.random.default_rng(1)
    m = SimilarityMatrix(
        entities=tuple(f"e{i}" for i in range(40)),
        values=("a", "b", "c"),
        sims=rng.random((40, 3)),
        missing=np.zeros((40, 3), dtype=bool),
    )
    first = bootstrap(m, n_resamples=200, seed=4)
    again = bootstrap(m, n_resamples=200, seed=4)  # cached weights
    fresh = bootstrap(m, n_resamples=200, seed=np.random.default_rng(4))  # drawn anew
    assert first == again == fresh
