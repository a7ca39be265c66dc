"""A sync recommender that never returns is abandoned after its timeout, and Python exits.

Ported from the tests of the deleted ``daemon.py`` (``call_in_daemon``) to the one
implementation left, ``providers.adapter._in_daemon_thread``, which
``CallableProvider.acall`` runs every sync callable through.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from pytest_recfair.providers import CallableProvider, run_cases
from pytest_recfair.providers.adapter import _in_daemon_thread


def test_result_and_error_come_back() -> None:
    async def main() -> tuple[int, str]:
        ok = await _in_daemon_thread(lambda a, b: a + b, 2, 3)
        with pytest.raises(KeyError, match="boom"):
            await _in_daemon_thread(lambda: {}["boom"])
        return ok, threading.current_thread().name

    assert asyncio.run(main()) == (5, "MainThread")


def test_the_call_runs_in_a_daemon_thread() -> None:
    seen: list[threading.Thread] = []

    async def main() -> None:
        await _in_daemon_thread(lambda: seen.append(threading.current_thread()))

    asyncio.run(main())
    (thread,) = seen
    assert thread.daemon
    assert thread.name == "recfair-recommender"


def test_hung_call_is_abandoned_and_the_loop_closes() -> None:
    release = threading.Event()

    async def main() -> None:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await _in_daemon_thread(release.wait)

    t0 = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - t0 < 2.0
    release.set()  # the late result is dropped without an error


def test_a_hung_recommender_times_out_as_an_error_of_its_case() -> None:
    release = threading.Event()

    def recommend(prompt: str) -> str:
        if prompt == "hang":
            release.wait()
        return "1. A"

    cases = [_Case("ok", "fine"), _Case("stuck", "hang")]
    t0 = time.monotonic()
    try:
        outcome = run_cases(CallableProvider(recommend), cases, timeout=0.2, progress=False)
    finally:
        release.set()
    assert time.monotonic() - t0 < 2.0
    assert list(outcome.completions) == ["ok"]
    assert "gave no reply to case 'stuck' within 0.2 s" in outcome.errors["stuck"]


@pytest.mark.parametrize(
    "call",
    [
        "await _in_daemon_thread(time.sleep, 3600)",
        "await CallableProvider(lambda p: time.sleep(3600)).acall(None, 'p')",
    ],
)
def test_interpreter_exits_while_the_call_still_hangs(call: str) -> None:
    code = textwrap.dedent(
        f"""
        import asyncio, time
        from pytest_recfair.providers.adapter import CallableProvider, _in_daemon_thread

        async def main():
            try:
                async with asyncio.timeout(0.2):
                    {call}
            except TimeoutError:
                print("abandoned", flush=True)

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "abandoned"


class _Case:
    def __init__(self, case_id: str, prompt: str) -> None:
        self.id = case_id
        self.prompt = prompt
        self.system: str | None = None
        self.entity_id = "e"
        self.repeat = 0
