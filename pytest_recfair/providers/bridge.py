"""Run a coroutine to its end from synchronous code, also from inside a running event loop
(the coroutine then gets its own loop in a helper thread)."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from pytest_recfair.errors import ProviderError

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``main()`` run on an event loop of its own; its result."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run(main)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="recfair-run") as pool:
        return pool.submit(_run, main).result()


def _run(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    box: list[T] = []

    async def boxed() -> None:
        # Not the task's result: on Python 3.11 asyncio.run's SIGINT clean-up formats
        # the main task's repr, result included: 0.3 s for 32,000 completions.
        box.append(await main())

    try:
        runner = asyncio.Runner()
        runner.get_loop()  # the loop's self-pipe is a socketpair
    except OSError:
        raise
    except Exception as exc:  # socket creation refused by another plugin
        raise ProviderError(
            f"cannot start an event loop: creating its socket pair raised "
            f"{type(exc).__name__}: {str(exc).rstrip('.')}. Sockets are blocked in this "
            f"run (e.g. pytest-socket's --disable-socket); pytest-recfair runs requests "
            f"and replays on an asyncio loop, which needs local (unix) sockets: allow "
            f"them (--allow-unix-socket)."
        ) from None
    with runner:
        runner.run(boxed())
    return box[0]
