"""The paired comparison of two models (metrics/pairs.py): the test of which is fairer."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_recfair.errors import DataError
from pytest_recfair.metrics.aggregate import SimilarityMatrix, snsr
from pytest_recfair.metrics.pairs import PairMember, paired_models

VALUES = ("a", "b", "c", "d")


def _model(
    rng: np.random.Generator, entity_base: np.ndarray, shift: tuple[float, ...] = (0, 0, 0, 0)
) -> SimilarityMatrix:
    """Similarities of one model: a per-entity level shared by both models (the pairing
    matters), the value shifts, and the model's own reply noise."""
    E = entity_base.size
    sims = entity_base[:, None] + np.array(shift)[None, :] + rng.normal(0, 0.06, (E, 4))
    entities = tuple(f"e{i}" for i in range(E))
    return SimilarityMatrix(entities, VALUES, np.clip(sims, 0, 1), np.zeros((E, 4), bool))


def test_identical_models_are_no_different() -> None:
    rng = np.random.default_rng(0)
    m = _model(rng, rng.uniform(0.3, 0.8, 20))
    (v,) = paired_models([PairMember("x", m, m)])
    assert v.delta == 0.0
    assert v.p_value == 1.0
    assert v.p_adjusted == 1.0
    assert v.n_paired == 20


def test_a_planted_difference_is_found_with_its_sign() -> None:
    rng = np.random.default_rng(1)
    base = rng.uniform(0.3, 0.8, 30)
    fair, biased = _model(rng, base), _model(rng, base, (0, 0, 0, -0.2))
    (v,) = paired_models([PairMember("religion", fair, biased)], n_resamples=1000)
    assert v.p_adjusted < 0.01
    assert v.delta > 0.1  # SNSR(b) - SNSR(a): b, the biased one, is less fair
    assert v.a == pytest.approx(snsr(np.nanmean(fair.sims, axis=0)))
    assert v.ci[0] > 0  # the bootstrap interval of the difference excludes 0
    (w,) = paired_models([PairMember("religion", biased, fair)], n_resamples=1000)
    assert w.delta == pytest.approx(-v.delta)
    assert w.p_adjusted == pytest.approx(v.p_adjusted, abs=0.01)


def test_pafs_difference_is_b_minus_a() -> None:
    rng = np.random.default_rng(2)
    base = rng.uniform(0.3, 0.8, 30)
    fair, biased = _model(rng, base), _model(rng, base, (0, 0, 0, -0.2))
    (v,) = paired_models([PairMember("x", fair, biased)], statistic="pafs")
    assert v.delta < 0  # PAFS is higher for the fairer model


def test_value_order_does_not_matter() -> None:
    rng = np.random.default_rng(3)
    base = rng.uniform(0.3, 0.8, 15)
    a, b = _model(rng, base), _model(rng, base, (0, -0.1, 0, 0))
    order = [3, 1, 0, 2]
    b2 = SimilarityMatrix(
        b.entities, tuple(VALUES[i] for i in order), b.sims[:, order], b.missing[:, order]
    )
    (v,) = paired_models([PairMember("x", a, b)], seed=5)
    (w,) = paired_models([PairMember("x", a, b2)], seed=5)
    assert (v.delta, v.p_value) == pytest.approx((w.delta, w.p_value))


def test_only_shared_entities_are_paired() -> None:
    rng = np.random.default_rng(4)
    a = _model(rng, rng.uniform(0.3, 0.8, 20))
    b = _model(rng, rng.uniform(0.3, 0.8, 20))
    b = SimilarityMatrix(tuple(f"e{i + 5}" for i in range(20)), VALUES, b.sims, b.missing)
    (v,) = paired_models([PairMember("x", a, b)])
    assert v.n_paired == 15


def test_unpairable_members_raise() -> None:
    rng = np.random.default_rng(5)
    a = _model(rng, rng.uniform(0.3, 0.8, 5))
    other = SimilarityMatrix(tuple(f"z{i}" for i in range(5)), VALUES, a.sims, a.missing)
    with pytest.raises(DataError, match="shares no entity"):
        paired_models([PairMember("x", a, other)])
    renamed = SimilarityMatrix(a.entities, ("a", "b", "c", "e"), a.sims, a.missing)
    with pytest.raises(DataError, match="different values"):
        paired_models([PairMember("x", a, renamed)])


def _null_rejections(runs: int, members: int, entities: int, seed: int) -> tuple[int, int]:
    """(runs with any member called different, runs with member 0 called different) when
    both models are the same model answering with fresh noise."""
    rng = np.random.default_rng(seed)
    any_hit = first_hit = 0
    for r in range(runs):
        base = rng.uniform(0.3, 0.8, entities)
        shift = (0.0, -0.03, 0.01, 0.0)  # a mildly unfair model, the same for both
        pairs = [
            PairMember(f"m{j}", _model(rng, base, shift), _model(rng, base, shift))
            for j in range(members)
        ]
        out = paired_models(pairs, n_resamples=400, seed=r, interval=False)
        any_hit += any(v.p_adjusted <= 0.05 for v in out)
        first_hit += out[0].p_value <= 0.05
    return any_hit, first_hit


def test_false_positive_rate_on_equal_models_is_near_alpha() -> None:
    """300 repetitions: the rate of calling equally fair models different is about 5%
    (binomial sd 1.3 points), per attribute and for a family of four attributes."""
    any_hit, first_hit = _null_rejections(300, 4, 20, seed=11)
    assert 0.015 <= first_hit / 300 <= 0.09
    assert any_hit / 300 <= 0.09  # family-wise: the step-down keeps the family at alpha


def test_empty_family() -> None:
    assert paired_models([]) == ()


def test_a_member_no_swap_can_move_does_not_mask_the_others() -> None:
    """Two values whose difference has opposite signs in the two models: every swap gives
    the same |SNSR| difference (up to rounding). That member has no evidence and
    must not swamp the max-T of a clearly different attribute."""
    rng = np.random.default_rng(8)
    E = 40
    base = rng.uniform(0.3, 0.8, E)
    fair, biased = _model(rng, base), _model(rng, base, (0, 0, 0, -0.2))
    ents = fair.entities
    # model a favours y by 0.05, model b favours x by 0.05: |SNSR(b) - SNSR(a)| is
    # 2|u| (u: half the sum of the two gaps) for nearly every swap
    noise = rng.normal(0, 0.02, (2, E))
    up = np.column_stack([base, base + 0.05 + noise[0]])
    down = np.column_stack([base + 0.05 + noise[1], base])
    flat_a = SimilarityMatrix(ents, ("x", "y"), up, np.zeros((E, 2), bool))
    flat_b = SimilarityMatrix(ents, ("x", "y"), down, np.zeros((E, 2), bool))
    out = paired_models(
        [PairMember("religion", fair, biased), PairMember("physical", flat_a, flat_b)],
        n_resamples=1000,
        interval=False,
    )
    religion, physical = out
    assert physical.p_adjusted > 0.5
    assert religion.p_adjusted < 0.01
