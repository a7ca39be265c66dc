"""Audit any Python recommender: wrap ``recommend(prompt[, system])`` (sync or async),
returning ``str``, a list of titles (numbered so the parser reads them back) or a Completion.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pytest_recfair.errors import ConfigError, ProviderError
from pytest_recfair.providers.base import Completion

Recommender = Callable[..., Any]


def numbered(items: Sequence[str]) -> str:
    """``["A", "B"]`` -> ``"1. A\\n2. B"``: the shape LLMs answer in and the parser expects."""
    return "\n".join(f"{i}. {' '.join(str(item).split())}" for i, item in enumerate(items, 1))


def _positional_arity(fn: Callable[..., Any]) -> int:
    """1 or 2 positional arguments (else an error): an optional 2nd gets the system prompt only
    if named ``system`` (or ``*args``), so ``recommend(prompt, k=25)`` keeps k."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins / C callables have no signature
        return 1
    positional = [
        p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    required = sum(p.default is p.empty for p in positional)
    varargs = any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values())
    if required >= 2:
        return required
    if len(positional) >= 2 and positional[1].name == "system":
        return 2
    if varargs:
        return 2 if len(positional) <= 1 else 1
    return 1 if positional else 0


class CallableProvider:
    """A Python recommender under test (a pipeline, a local model). Sync callables run in
    daemon threads, so ``concurrency`` applies (``concurrency=1`` if yours is not
    thread-safe). Its model calls through a recfair HTTP client are recorded and replayed
    (:mod:`.pipeline`); ``record=True`` records what it returned instead."""

    secrets: tuple[str, ...] = ()
    recommend: Recommender
    record: bool

    def __init__(
        self,
        recommend: Recommender,
        *,
        name: str = "callable",
        model: str | None = None,
        record: bool = False,
    ) -> None:
        if isinstance(recommend, CallableProvider):
            record = record or recommend.record
            recommend = recommend.recommend
        if not isinstance(record, bool):
            raise ConfigError(f"CallableProvider: record= must be True or False, got {record!r}.")
        if not callable(recommend):
            raise ConfigError(
                "recommender: expected a callable recommend(prompt) -> str | list[str] (sync or "
                f"async), got {type(recommend).__name__}: {recommend!r}."
            )
        arity = _positional_arity(recommend)
        if arity == 0 or arity > 2:
            raise ConfigError(
                f"recommender: {callable_label(recommend)} takes {arity} positional arguments; "
                "expected recommend(prompt) or recommend(prompt, system)."
            )
        self.recommend = recommend
        self.takes_system = arity == 2
        call = getattr(recommend, "__call__", None)  # noqa: B004 - an async __call__
        self.is_async = inspect.iscoroutinefunction(recommend) or inspect.iscoroutinefunction(call)
        self.name, self.record = name, record
        self.model = model or callable_label(recommend)

    def __repr__(self) -> str:
        return f"CallableProvider({self.model}{', record=True' if self.record else ''})"

    def _args(self, system: str | None, prompt: str) -> tuple[Any, ...]:
        return (prompt, system) if self.takes_system else (prompt,)

    def to_completion(self, reply: Any) -> Completion:  # or a ProviderError saying why not
        if isinstance(reply, Completion):
            return reply
        if isinstance(reply, str):
            return Completion(reply, "stop", None, self.model)
        if isinstance(reply, (list, tuple)) and all(isinstance(x, str) for x in reply):
            return Completion(numbered(reply), "stop", None, self.model)
        raise ProviderError(
            f"recommender {self.model} returned {type(reply).__name__} ({reply!r:.80}); expected "
            "a str (the reply text) or a list of str (the recommended titles, best first)."
        )

    def __call__(self, system: str | None, prompt: str) -> Completion:
        """Call synchronously (not from inside a running event loop for async callables)."""
        reply = self.recommend(*self._args(system, prompt))
        if inspect.isawaitable(reply):
            reply = asyncio.run(_await(reply))
        return self.to_completion(reply)

    async def acall(self, system: str | None, prompt: str) -> Completion:
        if self.is_async:
            reply = await self.recommend(*self._args(system, prompt))
        else:
            reply = await _in_daemon_thread(self.recommend, *self._args(system, prompt))
            if inspect.isawaitable(reply):  # e.g. a lambda returning a coroutine
                reply = await reply
        return self.to_completion(reply)


async def _in_daemon_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a daemon thread. Not ``asyncio.to_thread``: its threads are joined at
    exit, so a call that never returns would keep pytest from exiting after the timeout."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # the runner gave up (timeout) or the run was cancelled
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def target() -> None:
        try:
            result, error = context.run(fn, *args), None
        except BaseException as exc:  # handed to the awaiting task, as to_thread does
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=target, name="recfair-recommender", daemon=True).start()
    return await future


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def is_in_process(recommender: Any) -> bool:
    """A Python callable (no HTTP, nothing recorded), not an HTTP provider."""
    return isinstance(recommender, CallableProvider) or not (
        callable(getattr(recommender, "build_request", None))
        and callable(getattr(recommender, "parse_response", None))
    )


def callable_label(fn: Callable[..., Any]) -> str:
    """``module.qualname`` of a callable (its class's for an instance)."""
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}" if module and module != "builtins" else str(name)
