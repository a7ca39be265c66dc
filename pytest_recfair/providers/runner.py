"""Send every prompt case to the recommender: bounded concurrency, timeouts, retries, usage.

Failure policy (what aborts the run and what is collected per case; :mod:`.retry`):

- Retried with exponential backoff and jitter, honouring Retry-After: HTTP 408/409/425/429
  and 5xx, connect / read / write errors, timeouts, a 2xx whose JSON body is cut off.
  Once ``max_retries`` retries are spent the case gets an error in ``RunOutcome.errors``
  saying how many tries and the last problem; the other cases go on, and the session
  decides what a partial run means.
- Aborts the whole run at once with one ProviderError (other requests are cancelled):
  401/403/404/407 (every request would fail the same way), a base URL that stays
  unreachable after the retries, a missing API key, a cassette miss, an invalid URL.
- Collected per case without retry: other 4xx (the request itself is wrong, e.g. too
  long), a 2xx reply that is not JSON (an HTML page) or has an unexpected shape, a
  callable that raised or returned something that is not text.

How a run goes: with cassettes, a replay pass first answers every case the cassettes hold,
without an HTTP client (:mod:`.replay`: same lookup and misses as ``CassetteTransport``).
The remaining cases go to ``concurrency`` workers (:mod:`.workers`); worker i always uses
transport i mod n, one connection pool per SHARD_CONNECTIONS workers (:mod:`.workers`:
pools, TLS, proxies). A recording is kept only when its reply is final, i.e. not retried,
and each entity's cassette is saved once its cases are done. Every request of an HTTP
provider (and of a callable with ``rpm`` / ``tpm``) first waits for its share of the
endpoint's requests- and tokens-per-minute limits (:mod:`.pacing`: configured, or read
from the replies' rate-limit headers; adaptive on 429). :func:`run_cases` runs it all
from synchronous code, also from inside a running event loop (:func:`run_sync`: the
coroutine then gets its own loop in a helper thread).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from pytest_recfair import secrets
from pytest_recfair.errors import ProviderError, RecfairError
from pytest_recfair.providers.adapter import CallableProvider
from pytest_recfair.providers.base import Provider
from pytest_recfair.providers.pacing import Pacer, endpoint_for
from pytest_recfair.providers.replay import first_pass, note_failures
from pytest_recfair.providers.retry import Abort
from pytest_recfair.providers.runstate import (
    CaseLike,
    Progress,
    Run,
    RunOptions,
    RunOutcome,
    as_provider,
    check_args,
    outcome,
    unique_ids,
)
from pytest_recfair.providers.workers import Workers, close

__all__ = ["arun_cases", "run_cases", "run_sync"]


async def arun_cases(
    provider: Provider | CallableProvider | Callable[..., Any],
    cases: Sequence[CaseLike],
    options: RunOptions | None = None,
    /,
    **overrides: Any,
) -> RunOutcome:
    """Async :func:`run_cases`. See the module docstring for what aborts the run."""
    opts = RunOptions.of(options, overrides)
    check_args(opts.concurrency, opts.timeout, opts.max_retries, opts.prices)
    ids = unique_ids(cases)
    prov = as_provider(provider)
    bar = Progress(len(cases), enabled=opts.progress, stream=opts.progress_stream)
    run = Run(cases, opts, bar)
    say = getattr(opts.live, "note", None) or bar.note  # the run's output: pytest's line
    run.pacer, run.max_tokens = _pacer(prov, opts, say), getattr(prov, "max_tokens", None)
    start = time.monotonic()
    workers = Workers(prov, run, opts)
    try:
        with secrets.scrubbed_logs():
            try:
                await workers.drain(await first_pass(prov, cases, opts, run))
                note_failures(prov, cases, opts, run)
            except Abort as exc:
                raise exc.error from None
            except BaseExceptionGroup as eg:
                error = run.abort or _first_abort(eg)
                if error is None:
                    raise
                raise error from None
    finally:
        bar.close()
        await close(workers.transports, opts.cassettes)
    return outcome(run, ids, opts.prices, time.monotonic() - start)


def _pacer(
    prov: Provider | CallableProvider, opts: RunOptions, say: Callable[[str], None]
) -> Pacer | None:
    """The run's pacer: always for HTTP (the replies may state limits), for a callable
    only when recfair_rpm / recfair_tpm are set."""
    if isinstance(prov, CallableProvider) and opts.rpm is None and opts.tpm is None:
        return None
    return Pacer(
        endpoint_for(prov, opts.rpm, opts.tpm),
        concurrency=opts.concurrency,
        max_hold=opts.max_retry_after,
        say=say,
    )


def _first_abort(group: BaseExceptionGroup[BaseException]) -> RecfairError | None:
    for exc in group.exceptions:
        if isinstance(exc, Abort):
            return exc.error
        if isinstance(exc, BaseExceptionGroup):
            inner = _first_abort(exc)
            if inner is not None:
                return inner
    return None


def run_cases(
    provider: Provider | CallableProvider | Callable[..., Any],
    cases: Sequence[CaseLike],
    options: RunOptions | None = None,
    /,
    **overrides: Any,
) -> RunOutcome:
    """Send every case to ``provider`` and collect completions, errors and token usage.

    Settings come from ``options`` (a :class:`RunOptions`) and/or keyword overrides
    of its fields (``run_cases(p, cases, concurrency=4)`` keeps working).

    ``provider`` is an HTTP :class:`Provider`, a :class:`CallableProvider` or a plain
    ``recommend(prompt[, system]) -> str | list[str]`` (sync or async). At most
    ``concurrency`` requests are in flight; each try gets ``timeout`` seconds and failed
    tries are retried ``max_retries`` times. ``progress=None`` draws a progress line on
    stderr only when it is a terminal. ``prices`` = (USD per 1M prompt tokens, per 1M
    completion tokens) fills ``RunOutcome.cost``.

    For tests and benchmarks: ``transport`` replaces the network (e.g. an
    ``httpx.MockTransport``); ``backoff``/``max_backoff`` shape the waits between retries
    (seconds), ``max_retry_after`` caps a server's Retry-After, ``sleep`` replaces
    ``asyncio.sleep`` for those waits, ``progress_stream`` replaces stderr.

    Works from synchronous code and also from inside a running event loop (the run then
    gets its own loop in a helper thread).
    """
    opts = RunOptions.of(options, overrides)
    return run_sync(lambda: arun_cases(provider, cases, opts))


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
