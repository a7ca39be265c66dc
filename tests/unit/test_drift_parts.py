"""The drift test's power recovery (issue 23, point 3): the unusable shares in their own
max-T part at a fifth of alpha. Rates (sizes, power) are measured by
benchmarks/drift_test_validity.py and benchmarks/baseline_validity.py, not here."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_recfair.metrics import _drift_core as _core
from pytest_recfair.metrics import inference as inf


def _names(n: int) -> list[str]:
    return [f"e{i}" for i in range(n)]


def _spreads(rng: np.random.Generator, E: int, rise: float = 0.0) -> list[inf.DriftMember]:
    out = []
    for key, V in (("a", 4), ("b", 3)):
        ent = rng.uniform(0.4, 0.7, size=(E, 1))
        base = ent + rng.normal(0, 0.05, size=(E, V))
        cand = ent + rng.normal(0, 0.05, size=(E, V))
        cand[:, 0] += rise
        out.append(inf.DriftMember((key, "j", "snsr"), "snsr", _names(E), base, _names(E), cand))
    return out


def _unusable(rng: np.random.Generator, E: int, p: float, key: str) -> inf.DriftMember:
    base = (rng.uniform(size=(E, 3)) < p).astype(float)
    cand = (rng.uniform(size=(E, 3)) < p).astype(float)
    return inf.DriftMember((key, "j", "unusable"), "unusable", _names(E), base, _names(E), cand)


def test_the_unusable_shares_are_tested_at_a_fifth_of_alpha() -> None:
    rng = np.random.default_rng(1)
    fam = [*_spreads(rng, 80), _unusable(rng, 80, 0.05, "a"), _unusable(rng, 80, 0.05, "b")]
    T = np.zeros(len(fam))
    parts = inf.alpha_parts(fam, T, 0.05)
    spreads, shares = [True, True, False, False], [False, False, True, True]
    assert [m.tolist() for m, _ in parts] == [spreads, shares]
    assert [level for _, level in parts] == pytest.approx([0.04, 0.01])
    res = inf.drift_test(fam, tolerance=0.02)
    assert res.split
    for v in res.members:  # Bonferroni over the parts: a member fails at p <= alpha
        assert v.p_adjusted >= v.p_value
        assert v.failed == (v.p_adjusted <= 0.05)


def test_the_spreads_critical_value_no_longer_counts_the_unusable_shares() -> None:
    """Same seed, same flips: a spread member's critical value (hence its detectable rise)
    is the spread part's alone, at 4/5 of alpha, whatever the unusable shares do."""
    rng = np.random.default_rng(2)
    spreads = _spreads(rng, 100)
    unusable = [_unusable(rng, 100, 0.05, k) for k in "abcdef"]
    mixed = inf.drift_test([*spreads, *unusable], tolerance=0.02, seed=3)
    alone = inf.drift_test(spreads, tolerance=0.02, alpha=0.04, seed=3)
    for got, want in zip(mixed.members, alone.members, strict=False):
        assert got.mde == pytest.approx(want.mde)
        assert got.p_adjusted == pytest.approx(min(1.0, want.p_adjusted * 0.05 / 0.04))


def test_a_part_with_nothing_to_test_passes_its_alpha_on() -> None:
    """No unusable reply in either run: the unusable shares cannot reject under any flip,
    so the spreads keep all of alpha (the test at tolerance 0 stays exact)."""
    rng = np.random.default_rng(4)
    spreads = _spreads(rng, 60, rise=0.01)
    empty = [_unusable(rng, 60, 0.0, k) for k in "ab"]
    fam = [*spreads, *empty]
    T = np.array([1.0, 0.5, -np.inf, -np.inf])
    ((mask, level),) = inf.alpha_parts(fam, T, 0.05)
    assert mask.all()
    assert level == 0.05
    with_empty = inf.drift_test(fam, seed=5)
    alone = inf.drift_test(spreads, seed=5)
    assert not with_empty.split
    for got, want in zip(with_empty.members, alone.members, strict=False):
        assert got.mde == pytest.approx(want.mde)
        assert got.failed == want.failed
        if got.worsening > 0:  # a constant-0 column cannot reach a positive T
            assert got.p_adjusted == want.p_adjusted
    assert all(v.p_adjusted == 1.0 for v in with_empty.members[len(spreads) :])


def test_a_clear_rise_of_unusable_replies_still_fails_at_its_share() -> None:
    rng = np.random.default_rng(6)
    base = (rng.uniform(size=(100, 3)) < 0.03).astype(float)
    cand = (rng.uniform(size=(100, 3)) < 0.25).astype(float)
    m = inf.DriftMember(("a", "j", "unusable"), "unusable", _names(100), base, _names(100), cand)
    res = inf.drift_test([*_spreads(rng, 100), m], tolerance=0.02)
    assert res.members[-1].failed
    assert not any(v.failed for v in res.members[:-1])


def test_with_both_parts_the_family_fails_at_most_alpha_of_the_swapped_versions() -> None:
    """Exactness at margin 0 survives the split: every swap enumerated, each part is exact
    at its level, so the family fails in at most alpha x 2**E of the swapped versions."""
    rng = np.random.default_rng(31)
    E = 9
    b1 = rng.uniform(0.3, 0.6, size=(E, 1)) + rng.normal(0, 0.05, size=(E, 4))
    c1 = b1 + rng.normal(0, 0.05, size=b1.shape)
    b2 = (rng.uniform(size=(E, 3)) < 0.3).astype(float)
    c2 = (rng.uniform(size=(E, 3)) < 0.3).astype(float)
    alpha, fails = 0.25, 0
    for code in range(2**E):
        swap = ((code >> np.arange(E)) & 1).astype(bool)[:, None]
        members = [
            inf.DriftMember(
                ("a", "j", stat),
                stat,
                _names(E),
                np.where(swap, c, b),
                _names(E),
                np.where(swap, b, c),
            )
            for stat, b, c in (("snsr", b1, c1), ("unusable", b2, c2))
        ]
        res = inf.drift_test(members, alpha=alpha)
        assert res.exact
        fails += res.failed
    assert fails <= alpha * 2**E


def test_a_member_with_no_contribution_has_a_zero_reference_and_leaves_the_others() -> None:
    """An unchanged replay: every contribution is 0, and the lookups are skipped for such
    members. The reference of the others is the one they get alone (the same draws), and
    the caller's generator ends where it always did."""
    rng = np.random.default_rng(11)
    U = rng.standard_normal((100, 6))
    U[:, [1, 4]] = 0.0
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    with_dead = _core.reference(a, U, 5_000, exact=False)
    alone = _core.reference(b, U[:, [0, 2, 3, 5]], 5_000, exact=False)
    assert np.array_equal(with_dead[:, [0, 2, 3, 5]], alone)
    assert not with_dead[:, [1, 4]].any()
    assert a.integers(1 << 40) == b.integers(1 << 40)
    nothing, something = np.random.default_rng(5), np.random.default_rng(5)
    assert not _core.reference(nothing, np.zeros((100, 3)), 5_000, exact=False).any()
    assert _core.reference(something, np.ones((100, 3)), 5_000, exact=False).any()
    assert nothing.integers(1 << 40) == something.integers(1 << 40)
