"""Run a blocking call in a daemon thread, so a call that never returns can be abandoned.

``asyncio.to_thread`` uses the loop's default executor, whose threads are joined when the
loop closes and again when the interpreter exits: a recommender callable that hangs keeps
pytest from ever exiting, even after its timeout fired. :func:`call_in_daemon` starts one
daemon thread per call instead; when the awaiting task is cancelled (timeout), the thread
is left behind and dies with the process, and its late result is dropped.

Pure: stdlib only.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["call_in_daemon"]

T = TypeVar("T")


def _settle(fut: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if fut.done():  # cancelled: the caller gave up on this call
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


async def call_in_daemon(fn: Callable[..., T], *args: Any, name: str = "recfair-call") -> T:
    """``fn(*args)`` in a new daemon thread; cancelling the await abandons the thread."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()

    def work() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = fn(*args)
        except BaseException as exc:  # handed to the awaiting task, which re-raises it
            error = exc
        # the loop may be closed by now (the run ended while this call hung)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, fut, result, error)

    threading.Thread(target=work, name=name, daemon=True).start()
    return await fut
