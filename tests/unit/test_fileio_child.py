"""fileio.Child: work in a forked process, its bytes read back; any failure of the child is
None (the caller then does the work itself), and no child outlives ``result``/``stop``."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from pytest_recfair.fileio import Child

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork: POSIX only")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_childs_bytes_come_back_whole() -> None:
    big = os.urandom(3 << 20)  # past a pipe's buffer many times over
    child = Child(lambda: big[::-1])
    assert child.result(60) == big[::-1]
    assert child.stop() == -1  # already reaped


def test_the_child_works_on_a_copy_of_this_process() -> None:
    state = {"n": 1}

    def work() -> bytes:
        state["n"] += 41
        return json.dumps([state["n"], os.getpid()]).encode()

    n, pid = json.loads(Child(work).result(60) or b"null")
    assert (n, state["n"]) == (42, 1)
    assert pid != os.getpid()
    assert _gone(pid)


def _raises() -> bytes:
    raise RuntimeError("failed in the child")


def _crashes() -> bytes:
    os.kill(os.getpid(), signal.SIGKILL)
    return b"never"


def _exits() -> bytes:
    os._exit(3)


@pytest.mark.parametrize("work", [_raises, _crashes, _exits])
def test_a_child_that_fails_gives_none(work: object) -> None:
    assert Child(work).result(60) is None  # type: ignore[arg-type]


def test_a_child_past_its_deadline_is_killed_and_gives_none() -> None:
    child = Child(lambda: time.sleep(600) or b"late")
    pid, start = child._pid, time.monotonic()
    assert child.result(0.5) is None
    assert time.monotonic() - start < 10
    assert _gone(pid)


def test_stop_kills_a_running_child() -> None:
    child = Child(lambda: time.sleep(600) or b"late")
    pid = child._pid
    assert child.stop() == -signal.SIGKILL
    assert _gone(pid)
    assert child.stop() == -1
