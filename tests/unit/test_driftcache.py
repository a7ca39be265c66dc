"""Drift tests kept by content (gate/driftcache.py): the kept result is the computed one,
field for field, and any change of the rows, entities or parameters is another key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pytest_recfair.gate import driftcache
from pytest_recfair.metrics import inference as inf
from pytest_recfair.replies import memo


@pytest.fixture
def memo_dir(tmp_path: Path) -> Iterator[Path]:
    before = memo.folder()
    memo.use(tmp_path)
    yield tmp_path
    memo.use(before)


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
    return driftcache.drift_test(members, tolerance=tol, alpha=0.05, n_resamples=2000, seed=0)


def test_a_kept_drift_test_is_the_computed_one(memo_dir: Path) -> None:
    computed = inf.drift_test(_members(), tolerance=0.02, alpha=0.05, n_resamples=2000, seed=0)
    first = _test(_members())
    memo.use(None)
    memo.use(memo_dir)  # a later run
    kept = _test(_members())
    assert repr(first) == repr(kept) == repr(computed)  # repr: NaN fields compare equal
    assert memo.lookup(driftcache._key(_members(), (0.02, 0.05, 2000, 0))) is not None


def test_another_input_is_another_key(memo_dir: Path) -> None:
    params = (0.02, 0.05, 2000, 0)
    base = driftcache._key(_members(), params)
    moved = _members()
    moved[1] = inf.DriftMember(
        moved[1].key, "snsr", moved[1].baseline_entities[::-1], moved[1].baseline,
        moved[1].candidate_entities, moved[1].candidate,
    )  # fmt: skip
    others = {
        driftcache._key(_members(0.01), params),
        driftcache._key(_members(), (0.03, 0.05, 2000, 0)),
        driftcache._key(_members(), (0.02, 0.05, 2000, 1)),
        driftcache._key(moved, params),
    }
    assert base not in others
    assert len(others) == 4
    assert repr(_test(_members(0.2))) == repr(
        inf.drift_test(_members(0.2), tolerance=0.02, alpha=0.05, n_resamples=2000, seed=0)
    )


def test_an_unreadable_entry_is_computed_again(memo_dir: Path) -> None:
    key = driftcache._key(_members(), (0.02, 0.05, 2000, 0))
    memo.store(key, ("not", "a", "drift result"))
    assert repr(_test(_members())) == repr(
        inf.drift_test(_members(), tolerance=0.02, alpha=0.05, n_resamples=2000, seed=0)
    )
