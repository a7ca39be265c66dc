"""Drift tests computed before, remembered by content: a replay of unchanged cassettes
against an unchanged baseline does not draw the 50,000-flip reference again.

The drift test is a deterministic function of its members' rows and entity lists, the
tolerance, alpha, the number of draws and the seed. The key is a BLAKE2b digest of all of
them and of the code that computes the test (every module of ``metrics/``) and the
Python and numpy versions, kept in the replies' memo (:mod:`pytest_recfair.replies.memo`,
the cassette folder's ``.recfair_cache/``): an entry is never stale and the cache is safe
to delete. With the memo off (live runs, ``RECFAIR_CACHE=off``) every test is computed.

Pure: numpy and the stdlib.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np

from pytest_recfair.metrics import inference
from pytest_recfair.metrics.inference import DriftMember, DriftResult, MemberVerdict
from pytest_recfair.replies import memo

__all__ = ["drift_test"]

_FORMAT: Final = b"recfair-drift-test-1"


@functools.cache
def _code_version() -> bytes:
    metrics = Path(inference.__file__).parent
    files = sorted(f"metrics/{p.name}" for p in metrics.glob("*.py"))
    return memo.code_version(_FORMAT, ("gate/driftcache.py", *files), np.__version__.encode())


def drift_test(
    members: Sequence[DriftMember], *, tolerance: float, alpha: float, n_resamples: int, seed: int
) -> DriftResult:
    """:func:`~pytest_recfair.metrics.inference.drift_test`, or its result for the same
    inputs kept by an earlier run."""

    def compute() -> DriftResult:
        return inference.drift_test(
            members, tolerance=tolerance, alpha=alpha, n_resamples=n_resamples, seed=seed
        )

    if memo.folder() is None or not isinstance(seed, int):
        return compute()
    key = _key(members, (tolerance, alpha, n_resamples, seed))
    kept = _decode(memo.lookup(key))
    if kept is not None:
        return kept
    result = compute()
    memo.store(key, _encode(result))
    return result


def _key(members: Sequence[DriftMember], params: tuple[Any, ...]) -> bytes:
    h = hashlib.blake2b(_code_version(), digest_size=20)
    h.update(repr(params).encode())
    seen: dict[int, bytes] = {}  # the members share entity lists and matrices: each once
    for m in members:
        h.update(repr((m.key, m.statistic, m.margin)).encode("utf-8", "surrogatepass"))
        for part in (m.baseline_entities, m.candidate_entities, m.baseline, m.candidate):
            h.update(_digest(part, seen))
    return h.digest()


def _digest(part: Any, seen: dict[int, bytes]) -> bytes:
    """The digest of an entity list or a matrix, computed once per object (``seen``)."""
    done = seen.get(id(part))
    if done is None:
        h = hashlib.blake2b(digest_size=20)
        if isinstance(part, np.ndarray):
            array = np.ascontiguousarray(part, dtype=np.float64)
            h.update(b"rows" + repr(array.shape).encode() + array.tobytes())
        else:
            h.update(b"names" + repr(list(part)).encode("utf-8", "surrogatepass"))
        done = seen[id(part)] = h.digest()
    return done


def _plain(value: Any) -> Any:
    """``value`` as marshal-able data (numpy scalars become Python's)."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value)
    if isinstance(value, tuple | list):
        return tuple(_plain(v) for v in value)
    return value


def _values(obj: Any) -> tuple[Any, ...]:
    return tuple(_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj))


def _encode(result: DriftResult) -> Any:
    rest = tuple(f.name for f in dataclasses.fields(DriftResult) if f.name != "members")
    return (
        tuple(_values(m) for m in result.members),
        tuple(_plain(getattr(result, name)) for name in rest),
    )


def _decode(stored: Any) -> DriftResult | None:
    try:
        members, rest = stored
        names = [f.name for f in dataclasses.fields(DriftResult) if f.name != "members"]
        verdicts = tuple(MemberVerdict(*values) for values in members)
        return DriftResult(verdicts, **dict(zip(names, rest, strict=True)))
    except (TypeError, ValueError):
        return None
