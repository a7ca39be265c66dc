"""Send every prompt case to the recommender: bounded concurrency, timeouts, retries, usage.
Retried with backoff (:mod:`.retry`): 408/409/425/429, 5xx, connection errors, timeouts, a
cut-off 2xx (retries spent: a per-case error). The run aborts on 401/403/404/407, an
unreachable base URL, a missing key, a cassette miss, a bad URL. Other 4xx and unusable
replies: per-case errors, not retried."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from pytest_recfair import secrets
from pytest_recfair.errors import ConfigError, ProviderError
from pytest_recfair.providers.adapter import CallableProvider
from pytest_recfair.providers.base import Provider, Usage, bad_value
from pytest_recfair.providers.pacing import Pacer, endpoint_for
from pytest_recfair.providers.replay import first_pass, remember_failures
from pytest_recfair.providers.retry import Abort
from pytest_recfair.providers.runstate import CaseLike, Progress, Run, RunOptions, RunOutcome
from pytest_recfair.providers.workers import Workers

__all__ = ["arun_cases", "run_cases"]


async def arun_cases(
    provider: Provider | CallableProvider | Callable[..., Any],
    cases: Sequence[CaseLike],
    options: RunOptions | None = None,
    /,
    **overrides: Any,
) -> RunOutcome:
    """Async :func:`run_cases`. See the module docstring for what aborts the run."""
    opts = dataclasses.replace(options or RunOptions(), **overrides)
    _check(opts)
    ids = [case.id for case in cases]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ConfigError(
            f"cases: every case needs its own id, but {dup!r} occurs more than once; "
            "build them with prompts.build_cases."
        )
    prov: Provider | CallableProvider = provider  # type: ignore[assignment]
    if not isinstance(provider, CallableProvider) and not (
        callable(getattr(provider, "build_request", None))
        and callable(getattr(provider, "parse_response", None))
    ):
        prov = CallableProvider(cast(Any, provider))
    bar = Progress(len(cases), enabled=opts.progress, stream=opts.progress_stream)
    run = Run(opts, bar)
    say = bar.note if opts.live is None else opts.live.note  # the run's output
    run.max_tokens = getattr(prov, "max_tokens", None)
    # Paced always for HTTP (the replies may state limits), a callable only with rpm / tpm.
    if not isinstance(prov, CallableProvider) or opts.rpm is not None or opts.tpm is not None:
        endpoint = endpoint_for(prov, opts.rpm, opts.tpm)
        run.pacer = Pacer(
            endpoint, concurrency=opts.concurrency, max_hold=opts.max_retry_after, say=say
        )
    start = time.monotonic()
    workers = Workers(prov, run)
    try:
        with secrets.scrubbed_logs():
            try:
                await workers.drain(await first_pass(prov, cases, opts, run))
                store = opts.cassettes
                if store is not None and store.policy.records:  # replays fail them again
                    remember_failures(prov, cases, run.errors, store.root, opts.test_id)
            except Abort as exc:
                raise exc.error from None
            except BaseExceptionGroup as eg:
                first: BaseException | None = eg.subgroup(Abort)
                while isinstance(first, BaseExceptionGroup):
                    first = first.exceptions[0]
                error = run.abort or (first.error if isinstance(first, Abort) else None)
                if error is None:
                    raise
                raise error from None
    finally:
        bar.close()
        await workers.close()
    known = [c.usage for c in run.completions.values() if c.usage is not None]
    usage = Usage(sum(u.prompt_tokens for u in known), sum(u.completion_tokens for u in known))
    # Keep the cases' order, not completion order, so outcomes compare and print stably.
    done, errors = run.completions, run.errors
    return RunOutcome(
        completions={i: done[i] for i in ids if i in done},
        errors={i: errors[i] for i in ids if i in errors},
        usage=usage,
        cost=usage.cost(opts.prices) if opts.prices is not None else None,
        requests=run.requests,
        retries=run.retries,
        elapsed=time.monotonic() - start,
        unknown_usage=len(done) - len(known),
    )


def _check(opts: RunOptions) -> None:
    concurrency, timeout, prices = opts.concurrency, opts.timeout, opts.prices
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise bad_value("concurrency", "an integer >= 1 (requests in flight)", concurrency)
    if not isinstance(timeout, (int, float)) or not timeout > 0:
        raise bad_value("timeout", "seconds > 0 per request", timeout)
    retries = opts.max_retries
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise bad_value("max_retries", "an integer >= 0 (0 = no retries)", retries)
    if prices is not None and (
        not isinstance(prices, (tuple, list))
        or len(prices) != 2
        or not all(isinstance(p, (int, float)) and p >= 0 for p in prices)
    ):
        per_1m = "(USD per 1M prompt tokens, USD per 1M completion tokens), e.g. (0.15, 0.60)"
        raise bad_value("prices", per_1m, prices)


def run_cases(
    provider: Provider | CallableProvider | Callable[..., Any],
    cases: Sequence[CaseLike],
    options: RunOptions | None = None,
    /,
    **overrides: Any,
) -> RunOutcome:
    """Send every case to ``provider`` (an HTTP :class:`Provider`, a :class:`CallableProvider`
    or a plain ``recommend(prompt[, system])``, sync or async); collect completions, errors
    and usage. Settings: ``options`` and/or keyword overrides of its fields (:class:`RunOptions`).
    Inside a running event loop the run gets its own loop in a helper thread."""
    opts = dataclasses.replace(options or RunOptions(), **overrides)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run(provider, cases, opts)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="recfair-run") as pool:
        return pool.submit(_run, provider, cases, opts).result()


def _run(provider: Any, cases: Sequence[CaseLike], opts: RunOptions) -> RunOutcome:
    box: list[RunOutcome] = []

    async def boxed() -> None:
        # Not the task's result: on Python 3.11 asyncio.run's SIGINT clean-up formats
        # the main task's repr, result included: 0.3 s for 32,000 completions.
        box.append(await arun_cases(provider, cases, opts))

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
