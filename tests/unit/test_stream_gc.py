"""The streamed audit's garbage-collector setting: fewer young collections while it runs,
cycles still collected, the caller's thresholds back afterwards."""

from __future__ import annotations

import gc
import weakref

import pytest

from pytest_recfair.audit import stream


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def _inside() -> None:
    with stream._fewer_collections():
        raise RuntimeError(gc.get_threshold())


def test_threshold_raised_inside_and_restored_after_an_error() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError) as err:
        _inside()
    assert err.value.args[0] == (stream._GEN0_THRESHOLD, *before[1:])
    assert gc.get_threshold() == before


def test_cyclic_garbage_is_still_collected_inside() -> None:
    with stream._fewer_collections():
        node = _Node()
        ref = weakref.ref(node)
        del node
        # more container allocations than the raised threshold: a young collection runs
        junk = [[i] for i in range(3 * stream._GEN0_THRESHOLD)]
        del junk
        assert ref() is None


def test_a_disabled_collector_is_left_alone() -> None:
    before = gc.get_threshold()
    gc.disable()
    try:
        with stream._fewer_collections():
            assert gc.get_threshold() == before
    finally:
        gc.enable()
