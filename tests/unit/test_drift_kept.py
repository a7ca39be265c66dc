"""Drift tests kept in the content store (gate/drift.py): the kept result is the computed
one, field for field, and any change of the rows, entities or parameters is another key."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pytest_recfair.cassettes import cache
from pytest_recfair.gate import drift
from pytest_recfair.metrics import inference as inf

PARAMS = {"tolerance": 0.02, "alpha": 0.05, "n_resamples": 2000, "seed": 0}


def _members(shift: float = 0.0) -> list[inf.DriftMember]:
    rng = np.random.default_rng(4)
    names = [f"e{i}" for i in range(40)]
    out = []
    for attr in ("religion", "gender"):
        base = rng.uniform(0.3, 0.8, size=(40, 3))
        cand = base + rng.normal(0, 0.05, size=(40, 3))
        cand[:, 0] += shift
        out.append(inf.DriftMember((attr, "jaccard", "snsr"), "snsr", names, base, names, cand))
    return out


def _test(members: list[inf.DriftMember], tol: float = 0.02) -> inf.DriftResult:
    return drift._kept_drift_test(members, **{**PARAMS, "tolerance": tol})


def _key(members: list[inf.DriftMember], **changed: object) -> bytes:
    return drift._drift_key(members, {**PARAMS, **changed})


def test_a_kept_drift_test_is_the_computed_one(store_dir: Path) -> None:
    computed = inf.drift_test(_members(), **PARAMS)
    first = _test(_members())
    cache.use(None)
    cache.use(store_dir)  # a later run
    kept = _test(_members())
    assert repr(first) == repr(kept) == repr(computed)  # repr: NaN fields compare equal
    assert cache.get(b"drift", _key(_members())) is not None


def test_another_input_is_another_key(store_dir: Path) -> None:
    base = _key(_members())
    moved = _members()
    moved[1] = inf.DriftMember(
        moved[1].key, "snsr", moved[1].baseline_entities[::-1], moved[1].baseline,
        moved[1].candidate_entities, moved[1].candidate,
    )  # fmt: skip
    others = {
        _key(_members(0.01)),
        _key(_members(), tolerance=0.03),
        _key(_members(), seed=1),
        _key(moved),
    }
    assert base not in others
    assert len(others) == 4
    assert repr(_test(_members(0.2))) == repr(inf.drift_test(_members(0.2), **PARAMS))


def test_an_unreadable_entry_is_computed_again(store_dir: Path) -> None:
    cache.put(b"drift", _key(_members()), ("not", "a", "drift result"))
    assert repr(_test(_members())) == repr(inf.drift_test(_members(), **PARAMS))
