"""A blocking call that never returns is abandoned after its timeout, and Python exits."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from pytest_recfair.daemon import call_in_daemon


def test_result_and_error_come_back() -> None:
    async def main() -> tuple[int, str]:
        ok = await call_in_daemon(lambda a, b: a + b, 2, 3)
        with pytest.raises(KeyError, match="boom"):
            await call_in_daemon(lambda: {}["boom"])
        return ok, threading.current_thread().name

    assert asyncio.run(main()) == (5, "MainThread")


def test_hung_call_is_abandoned_and_the_loop_closes() -> None:
    release = threading.Event()

    async def main() -> None:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await call_in_daemon(release.wait)

    t0 = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - t0 < 2.0
    release.set()  # the late result is dropped without an error


def test_interpreter_exits_while_the_call_still_hangs() -> None:
    code = textwrap.dedent(
        """
        import asyncio, time
        from pytest_recfair.daemon import call_in_daemon

        async def main():
            try:
                async with asyncio.timeout(0.2):
                    await call_in_daemon(time.sleep, 3600)
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
