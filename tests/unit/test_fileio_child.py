"""fileio.Child: work in a forked process, its value, warnings and log records read back;
any failure of the fork or the child is None (the caller then does the work itself), and
no child or pipe outlives ``result``/``stop``."""

from __future__ import annotations

import logging
import os
import resource
import signal
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from pytest_recfair.fileio import Child

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork: POSIX only")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_the_childs_value_comes_back_whole() -> None:
    big = os.urandom(3 << 20)  # past a pipe's buffer many times over
    before = _fds()
    child = Child(lambda: {"data": big[::-1], "n": [1, 2.5, None]})
    assert child.result(60) == {"data": big[::-1], "n": [1, 2.5, None]}
    assert child.stop() == -1  # already reaped
    assert _fds() == before


def test_the_child_works_on_a_copy_of_this_process() -> None:
    state = {"n": 1}

    def work() -> tuple[int, int]:
        state["n"] += 41
        return state["n"], os.getpid()

    n, pid = Child(work).result(60)
    assert (n, state["n"]) == (42, 1)
    assert pid != os.getpid()
    assert _gone(pid)


def _raises() -> Any:
    raise RuntimeError("failed in the child")


def _crashes() -> Any:
    os.kill(os.getpid(), signal.SIGKILL)


def _exits() -> Any:
    os._exit(3)


def _unsendable() -> Any:
    return lambda: None


def _fail_to_load() -> None:
    raise ValueError("cannot be rebuilt here")


class _Unloadable:
    def __reduce__(self) -> tuple[Callable[[], None], tuple[()]]:
        return _fail_to_load, ()


@pytest.mark.parametrize("work", [_raises, _crashes, _exits, _unsendable, _Unloadable])
def test_a_child_that_fails_or_answers_what_cannot_be_read_gives_none(
    work: Callable[[], Any],
) -> None:
    before = _fds()
    assert Child(work).result(60) is None
    assert _fds() == before


def test_a_child_past_its_deadline_is_killed_and_gives_none() -> None:
    child = Child(lambda: time.sleep(600))
    pid, start = child._pid, time.monotonic()
    assert child.result(0.5) is None
    assert time.monotonic() - start < 10
    assert _gone(pid)


def test_stop_kills_a_running_child() -> None:
    child = Child(lambda: time.sleep(600))
    pid = child._pid
    assert child.stop() == -signal.SIGKILL
    assert _gone(pid)
    assert child.stop() == -1


def test_no_process_to_spare_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    before = _fds()
    monkeypatch.setattr(os, "fork", no_fork)
    child = Child(lambda: 1)
    assert child.result(60) is None
    assert _fds() == before


@pytest.mark.skipif(
    resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 1200, reason="fewer than 1,200 fds allowed"
)
def test_a_pipe_past_fd_1024_is_read() -> None:
    held = [os.open(os.devnull, os.O_RDONLY)]
    while held[-1] < 1100:  # (select() would refuse the pipe's fd)
        held.append(os.open(os.devnull, os.O_RDONLY))
    try:
        assert Child(lambda: "read").result(60) == "read"
    finally:
        for fd in held:
            os.close(fd)


def test_the_childs_warnings_and_log_records_are_raised_and_handled_here(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def work() -> str:
        warnings.warn("a note from the child", UserWarning, stacklevel=1)
        logging.getLogger("pytest_recfair.test").warning("merged %d titles", 3)
        return "done"

    caplog.set_level(logging.INFO)
    child = Child(work)
    assert not caplog.records
    with pytest.warns(UserWarning, match="a note from the child"):
        assert child.result(60) == "done"
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("pytest_recfair.test", "merged 3 titles")
    ]
