"""Send every prompt case to the recommender: bounded concurrency, timeouts, retries, usage.

Failure policy (what aborts the run and what is collected per case):

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
without an HTTP client (same lookup and misses as ``CassetteTransport``). The remaining
cases go to ``concurrency`` workers; worker i always uses transport i mod n, one
connection pool per SHARD_CONNECTIONS workers (httpcore on plain asyncio,
``providers.aionet.AsyncioTransport``; httpx's own transport when a proxy is set). A
recording is kept only when its reply is final, i.e. not retried, and each entity's
cassette is saved once its cases are done.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import email.utils
import functools
import math
import random
import ssl
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, TextIO, cast
from urllib.parse import urlsplit

import httpx

from pytest_recfair.cassettes.store import RecordedResponse
from pytest_recfair.errors import ConfigError, ProviderError, RecfairError
from pytest_recfair.providers import replycap
from pytest_recfair.providers.adapter import CallableProvider
from pytest_recfair.providers.aionet import AsyncioTransport
from pytest_recfair.providers.base import (
    Completion,
    GarbledReply,
    Provider,
    RecordedReply,
    TruncatedReply,
    Usage,
    error_detail,
)
from pytest_recfair.providers.http import HTTPProvider, is_loopback
from pytest_recfair.providers.progress import Progress
from pytest_recfair.providers.transport import (
    UNSCOPED_ENTITY,
    CaseRef,
    CassetteTransport,
    response_of,
)

if TYPE_CHECKING:
    from pytest_recfair.cassettes.store import CassetteStore

__all__ = [
    "CaseLike",
    "RunOptions",
    "RunOutcome",
    "arun_cases",
    "env_proxy",
    "retry_after_seconds",
    "run_cases",
]

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
FATAL_STATUS = frozenset({401, 403, 404, 407})

# Requests in flight per connection pool. httpcore's pool walks every connection at each
# request event (a readability check per idle connection), so the client's CPU per request
# grows with the pool: 64 in flight cost 1.24 ms/request of CPU in pools of 16 and 0.95 ms
# in pools of 8 (benchmarks/bench_live.py, docs/performance.md).
SHARD_CONNECTIONS = 8
# The replay pass hands the event loop back this often, so it does not starve other tasks.
_REPLAY_YIELD_EVERY = 256


class CaseLike(CaseRef, Protocol):
    """What the runner reads from a ``prompts.PromptCase``: what replay reads (id,
    entity_id, repeat) and the prompt itself."""

    @property
    def system(self) -> str | None: ...
    @property
    def prompt(self) -> str: ...


@dataclass(frozen=True)
class RunOutcome:
    """What one run produced. ``completions`` and ``errors`` are keyed by case id and
    together cover every case; ``cost`` is None unless prices were given."""

    completions: dict[str, Completion]
    errors: dict[str, str]
    usage: Usage
    cost: float | None = None
    requests: int = 0  # HTTP requests sent (or callable calls), retries included
    retries: int = 0
    elapsed: float = 0.0  # seconds, wall clock
    unknown_usage: int = field(default=0)  # completions whose reply reported no usage


class LiveLike(Protocol):
    """What the runner calls on the progress line of a live run."""

    def advance(
        self, *, failed: bool = False, tokens: int = 0, cost: float | None = None
    ) -> None: ...


class _Retryable(Exception):
    """One attempt failed in a way that may pass on a later try."""

    def __init__(
        self, what: str, *, retry_after: float | None = None, unreachable: bool = False
    ) -> None:
        super().__init__(what)
        self.what = what
        self.retry_after = retry_after
        self.unreachable = unreachable


class _Abort(Exception):
    """Carries the error that stops the whole run through the task group."""

    def __init__(self, error: RecfairError) -> None:
        super().__init__(str(error))
        self.error = error


def retry_after_seconds(headers: httpx.Headers, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


class _Backoff:
    """The wait before retry n: the server's Retry-After when it gave one (capped), else
    exponential with jitter, ``min(max_backoff, backoff * 2**(n-1)) + uniform(0, backoff)``."""

    # Its own generator: jitter must not disturb (or depend on) the global random state.
    _rng = random.Random()

    def __init__(self, backoff: float, max_backoff: float, cap: float) -> None:
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.cap = cap

    def __call__(self, retry: int, failure: _Retryable) -> float:
        if failure.retry_after is not None:
            return min(failure.retry_after, self.cap)
        exponent = min(retry - 1, 60)  # no float overflow
        base = min(self.max_backoff, self.backoff * 2.0**exponent)
        return base + self._rng.uniform(0, self.backoff)


class _KeyGuard(httpx.AsyncBaseTransport):
    """Checks for the API key just before a request really leaves, so replaying cassettes
    never needs one but a live call without one fails with the variable's name."""

    def __init__(self, inner: httpx.AsyncBaseTransport, provider: Provider) -> None:
        self.inner = inner
        self.check: Callable[[], None] | None = getattr(provider, "check_credentials", None)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.check is not None:
            try:
                self.check()
            except RecfairError as exc:  # no key: every request would fail the same way
                raise _Abort(exc) from None
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _check_args(concurrency: int, timeout: float, max_retries: int, prices: Any) -> None:
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ConfigError(
            f"concurrency: expected an integer >= 1 (requests in flight), got {concurrency!r}."
        )
    if not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ConfigError(f"timeout: expected seconds > 0 per request, got {timeout!r}.")
    if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
        raise ConfigError(
            f"max_retries: expected an integer >= 0 (0 = no retries), got {max_retries!r}."
        )
    if prices is not None and (
        not isinstance(prices, (tuple, list))
        or len(prices) != 2
        or not all(isinstance(p, (int, float)) and p >= 0 for p in prices)
    ):
        raise ConfigError(
            "prices: expected (USD per 1M prompt tokens, USD per 1M completion tokens), "
            f"e.g. (0.15, 0.60); got {prices!r}."
        )


def _as_provider(provider: Any) -> Provider | CallableProvider:
    if isinstance(provider, CallableProvider):
        return provider
    if callable(getattr(provider, "build_request", None)) and callable(
        getattr(provider, "parse_response", None)
    ):
        return provider  # type: ignore[no-any-return]
    return CallableProvider(provider)


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How :func:`run_cases` sends the cases (one object instead of a long signature).

    ``transport``, ``backoff``/``max_backoff``, ``max_retry_after``, ``sleep`` and
    ``progress_stream`` are for tests and benchmarks (see :func:`run_cases`).
    """

    concurrency: int = 8
    timeout: float = 60.0
    max_retries: int = 5
    cassettes: CassetteStore | None = None
    test_id: str = ""
    progress: bool | None = None
    prices: tuple[float, float] | None = None
    transport: httpx.AsyncBaseTransport | None = None
    backoff: float = 0.5
    max_backoff: float = 30.0
    max_retry_after: float = 120.0
    sleep: Callable[[float], Awaitable[None]] | None = None
    progress_stream: TextIO | None = None
    # the pytest progress line (liveline.LiveLine): advanced once per case sent live
    live: LiveLike | None = None
    max_reply_chars: int | None = None  # longer replies are cut, with a note (replycap)

    @classmethod
    def of(cls, options: RunOptions | None, overrides: Mapping[str, Any]) -> RunOptions:
        """``options`` (or the defaults) with keyword ``overrides`` applied."""
        base = options if options is not None else cls()
        return dataclasses.replace(base, **overrides) if overrides else base


class _Run:
    """Shared state of one run: counters, results, the retry policy."""

    def __init__(
        self,
        cases: Sequence[CaseLike],
        *,
        concurrency: int,
        timeout: float,
        max_retries: int,
        backoff: float,
        max_backoff: float,
        max_retry_after: float,
        sleep: Callable[[float], Awaitable[None]] | None,
        progress: Progress,
    ) -> None:
        self.cases = cases
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.wait = _Backoff(backoff, max_backoff, max_retry_after)
        # The transport reads each request's timeouts from its extensions.
        self.timeout_ext = httpx.Timeout(timeout).as_dict()
        self.sleep = sleep
        self.progress = progress
        self.completions: dict[str, Completion] = {}
        self.errors: dict[str, str] = {}
        self.requests = 0
        self.retries = 0
        self.abort: RecfairError | None = None  # set by the first case that stops the run
        self.max_reply_chars: int | None = None

    async def pause(self, retry: int, failure: _Retryable) -> None:
        """Wait before retry number ``retry`` (1 = the first retry)."""
        await (self.sleep or asyncio.sleep)(self.wait(retry, failure))

    def finish(self, case: CaseLike, result: Completion | str) -> None:
        if isinstance(result, Completion):
            if self.max_reply_chars is not None:
                result = _capped(result, self.max_reply_chars)
            self.completions[case.id] = result
        else:
            self.errors[case.id] = result
        self.progress.advance(failed=not isinstance(result, Completion))


def _capped(completion: Completion, limit: int) -> Completion:
    """The reply cut to ``limit`` characters, with a note (once: a replayed cut reply
    already ends with its note)."""
    if len(completion.text) <= limit or replycap.was_cut(completion.text):
        return completion
    text, _ = replycap.cut_text(completion.text, limit)
    return dataclasses.replace(completion, text=text)


def _live_advance(live: LiveLike, result: Completion | str, prices: Any) -> None:
    usage = result.usage if isinstance(result, Completion) else None
    live.advance(
        failed=not isinstance(result, Completion),
        tokens=usage.total_tokens if usage is not None else 0,
        cost=usage.cost((float(prices[0]), float(prices[1])))
        if usage is not None and prices is not None
        else None,
    )


def _url_of(provider: Any) -> str:
    return str(getattr(provider, "base_url", "") or getattr(provider, "name", "the service"))


def _fatal_status(provider: Any, response: httpx.Response, case: CaseLike) -> ProviderError:
    name = getattr(provider, "name", "provider")
    model = getattr(provider, "model", "?")
    base = _url_of(provider)
    env = getattr(provider, "api_key_env", None)
    detail = error_detail(response)
    url = response.request.url
    status = response.status_code
    if status == 401:
        hint = (
            f"Check that the environment variable {env} holds a valid key for {base}."
            if env
            else "The request carried no API key: set api_key_env to the NAME of the "
            "environment variable that holds the key."
        )
        return ProviderError(f"{name}: HTTP 401 Unauthorized from {url}: {detail}. {hint}")
    if status == 404:
        return ProviderError(
            f"{name}: HTTP 404 Not Found from {url}: {detail}. Either the model {model!r} "
            f"is unknown to this service or base_url {base!r} is wrong (OpenAI-compatible "
            "servers usually end in /v1). Check both; nothing was retried."
        )
    if status == 407:
        return ProviderError(
            f"{name}: HTTP 407 from {url}: the proxy wants credentials: {detail}. Fix the "
            "proxy settings (HTTPS_PROXY) or bypass it for this host."
        )
    key_hint = f"the key in {env}" if env else "your credentials"
    return ProviderError(
        f"{name}: HTTP 403 Forbidden from {url} for model {model!r} (case {case.id!r}): "
        f"{detail}. {key_hint} lacks access to this model or project; request access or use "
        "another model."
    )


def _advice(exc: _Retryable, run: _Run) -> str:
    what = exc.what
    if what.startswith("HTTP 429"):
        return (
            f"The service is rate-limiting: lower concurrency (now {run.concurrency}), "
            "raise max_retries, or wait and re-run."
        )
    if what.startswith("HTTP 5"):
        return "The service is failing or overloaded: re-run later or raise max_retries."
    if what.startswith("timeout"):
        return (
            f"Raise timeout (now {run.timeout:g} s) or lower concurrency (now {run.concurrency})."
        )
    if exc.unreachable:
        return "Is the server running, and is base_url right? Check the network and proxy too."
    return "Check the network, proxy and base_url, then re-run."


def _request(provider: Provider, case: CaseLike, run: _Run) -> httpx.Request:
    request = provider.build_request(case.system, case.prompt)
    request.extensions = {
        **request.extensions,
        "timeout": run.timeout_ext,
        "recfair_entity_id": case.entity_id,
        "recfair_repeat": case.repeat,
        "recfair_case": case,
    }
    return request


def _judge(provider: Provider, response: httpx.Response, case: CaseLike) -> Completion:
    """The completion in ``response``, or the exception that says what to do about it."""
    status = response.status_code
    if 200 <= status < 300:
        try:
            return provider.parse_response(response)
        except TruncatedReply as exc:
            raise _Retryable(f"reply cut off: {exc}") from None
        except GarbledReply as exc:  # a proxy's page, a broken gateway: worth a retry
            raise _Retryable(str(exc)) from None
    if status in RETRYABLE_STATUS or status >= 500:
        raise _Retryable(
            f"HTTP {status} {response.reason_phrase}: {error_detail(response)}",
            retry_after=retry_after_seconds(response.headers),
        )
    if status in FATAL_STATUS:
        raise _Abort(_fatal_status(provider, response, case))
    raise ProviderError(
        f"HTTP {status} {response.reason_phrase} from {response.request.url}: "
        f"{error_detail(response)}. "
        "The service rejected this request (not retried); check the options it names."
    )


async def _send(transport: httpx.AsyncBaseTransport, request: httpx.Request) -> httpx.Response:
    """What ``AsyncClient.send`` does for a prebuilt request, minus what the runner never
    uses (auth flows, redirects, cookies, event hooks): those cost ~10% of a request's CPU.
    The request's timeouts travel in its extensions, as with a client."""
    response = await transport.handle_async_request(request)
    response.request = request
    try:
        await response.aread()  # closes the stream once it is read
    except BaseException:
        await response.aclose()
        raise
    return response


async def _attempt_http(
    transport: httpx.AsyncBaseTransport, provider: Provider, case: CaseLike, run: _Run
) -> Completion:
    request = _request(provider, case, run)
    # A cassette transport hands its recording back here instead of recording at once:
    # it is kept only when this try is final, so a reply that is retried is never saved.
    deferred: list[Callable[[], None]] = []
    request.extensions["recfair_record"] = deferred
    run.requests += 1
    try:
        # httpx's timeouts are per phase (connect, each read); this bounds the whole reply.
        async with asyncio.timeout(run.timeout):
            response = await _send(transport, request)
    except (TimeoutError, httpx.TimeoutException) as exc:
        kind = "connect timeout" if isinstance(exc, httpx.ConnectTimeout) else "read timeout"
        raise _Retryable(
            f"timeout: no complete reply within {run.timeout:g} s ({kind})",
            unreachable=isinstance(exc, httpx.ConnectTimeout),
        ) from None
    except httpx.ConnectError as exc:
        where = f"{request.url.host}:{request.url.port or ''}"
        blocked = _blocker(exc)
        if blocked is not None:  # e.g. pytest-socket: no retry helps, say it in one line
            raise _blocked(where, blocked) from None
        raise _Retryable(f"cannot connect to {where} ({exc})", unreachable=True) from None
    except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
        # Includes a body cut off mid-transfer (fewer bytes than Content-Length).
        raise _Retryable(f"{type(exc).__name__}: {exc or 'connection dropped'}") from None
    except BaseExceptionGroup as eg:  # a socket refused inside anyio's connect
        blocked = _blocker(eg)
        if blocked is None:
            raise
        raise _blocked(f"{request.url.host}:{request.url.port or ''}", blocked) from None
    except httpx.HTTPError as exc:  # bad URL, unsupported protocol: no retry helps
        raise _Abort(
            ProviderError(
                f"{getattr(provider, 'name', 'provider')}: cannot send to {request.url}: "
                f"{type(exc).__name__}: {exc}. Check base_url."
            )
        ) from None
    completion = _judge(provider, response, case)
    # Only a reply that parsed as a completion is recorded: an error or a retried reply
    # never reaches the cassette, so the next recording run asks that prompt again.
    for record in deferred:
        record()
    return completion


def _blocker(exc: BaseException) -> BaseException | None:
    """The error under a failed connect that is not a network error: another plugin
    (pytest-socket and the like) refusing to open sockets. Follows explicit causes and
    the leaves of exception groups (anyio connects in a task group)."""
    todo, seen = [exc], set()
    while todo:
        cause = todo.pop()
        if id(cause) in seen:
            continue
        seen.add(id(cause))
        if isinstance(cause, BaseExceptionGroup):
            todo.extend(cause.exceptions)
            continue
        transport = any(  # theirs, or a subclass of theirs (providers/aionet.py)
            kind.__module__.split(".")[0] in ("httpx", "httpcore", "anyio")
            for kind in type(cause).__mro__
        )
        if not transport and not isinstance(cause, OSError):
            return cause
        if cause.__cause__ is not None:
            todo.append(cause.__cause__)
    return None


def _blocked(where: str, blocked: BaseException) -> _Abort:
    return _Abort(
        ProviderError(
            f"the network is blocked in this test run: connecting to {where} raised "
            f"{type(blocked).__name__}: {str(blocked).rstrip('.')}. Allow the network for live "
            f"recording, or replay cassettes (record mode none)."
        )
    )


async def _one_http(
    transport: httpx.AsyncBaseTransport,
    provider: Provider,
    case: CaseLike,
    run: _Run,
    first: _Retryable | None = None,
) -> Completion | str:
    """One case: a try, then up to ``max_retries`` retries of a retryable failure.

    ``first`` is a retryable failure of try 1 that already happened (in the replay pass),
    so the retries start at once. A plain loop: a retry library costs more per request
    than the request itself, and its first try would have to replay ``first``.
    """
    failure, tries = first, 0 if first is None else 1
    try:
        while True:
            if failure is not None:
                if tries > run.max_retries:
                    raise failure
                if run.abort is not None:
                    raise _Abort(run.abort)
                await run.pause(tries, failure)
                run.retries += 1
            tries += 1
            try:
                return await _attempt_http(transport, provider, case, run)
            except _Retryable as exc:
                failure = exc
    except _Retryable as exc:
        message = (
            f"gave up on case {case.id!r} after {tries} tries ({run.max_retries} retries) to "
            f"{_url_of(provider)}: last error: {exc.what}. {_advice(exc, run)}"
        )
        if exc.unreachable:
            raise _Abort(ProviderError(message)) from None
        return message
    except ProviderError as exc:
        return str(exc)
    except RecfairError as exc:  # a cassette miss or similar: same for every case
        raise _Abort(exc) from None


async def _replay_pass(
    provider: Provider, cases: Sequence[CaseLike], replayer: CassetteTransport, run: _Run
) -> list[tuple[CaseLike, _Retryable | None]]:
    """Serve every case the cassettes answer, without an AsyncClient; return the rest.

    Replay needs no connection pool, timeout or concurrency bound, and httpx's client
    machinery cost more than the lookup and the parsing together. The reply comes from
    the same lookup the cassette transport uses (same misses, same errors) and is judged
    like a live one. Returned: cases that need the network (to record), and cases whose
    replayed reply calls for a retry, with that failure.
    """
    rest: list[tuple[CaseLike, _Retryable | None]] = []
    live_only: dict[str, bool] = {}
    for done, case in enumerate(cases, 1):
        if done % _REPLAY_YIELD_EVERY == 0:
            await asyncio.sleep(0)
        skip = live_only.get(case.entity_id)
        if skip is None:
            skip = live_only[case.entity_id] = replayer.live_only(case.entity_id)
        if skip:  # recording a new cassette: no request to build twice
            rest.append((case, None))
            continue
        response = _replayed(provider, case, replayer, run)
        if response is None:
            rest.append((case, None))
            continue
        run.requests += 1
        result: Completion | str
        try:
            result = _judge_replayed(provider, response, case, run)
        except _Retryable as exc:
            rest.append((case, exc))
            continue
        except ProviderError as exc:
            result = str(exc)
        except RecfairError as exc:
            raise _Abort(exc) from None
        run.finish(case, result)
    return rest


def _replayed(
    provider: Provider, case: CaseLike, replayer: CassetteTransport, run: _Run
) -> httpx.Response | RecordedResponse | None:
    """The recorded reply to ``case``, or None when it is to be recorded live.

    A built-in provider gives the request's key without building it (``replay_key``)
    and gets the recording as stored; any other provider builds its request and gets a
    read response. Building and reading the httpx objects took half of a replayed case.
    """
    key_of = getattr(provider, "replay_key", None)
    key: tuple[str, str, str] | None = key_of(case.system, case.prompt) if key_of else None
    try:
        if key is not None:
            method, url, body = key
            return replayer.replay_parts(method, url, body, case)
        request = _request(provider, case, run)
        response = replayer.replay(request)
    except RecfairError as exc:  # a cassette miss: the same for every case
        raise _Abort(exc) from None
    if response is not None:
        response.request = request
        response.read()
    return response


def _judge_replayed(
    provider: Provider, replayed: httpx.Response | RecordedResponse, case: CaseLike, run: _Run
) -> Completion:
    """``_judge`` of a replayed reply. A recording replayed by key is parsed as stored
    (``parse_reply``, the code ``parse_response`` runs); when that fails it is judged as
    a response with its request, so the words are the ones a live reply gets."""
    if isinstance(replayed, RecordedResponse):
        reply = _recorded_reply(replayed)
        if reply is not None and isinstance(provider, HTTPProvider):
            with contextlib.suppress(Exception):  # judged again below, URL and all
                return provider.parse_reply(reply)
        replayed = _as_response(provider, replayed, case, run)
    return _judge(provider, replayed, case)


def _recorded_reply(recorded: RecordedResponse) -> RecordedReply | None:
    """The recording as ``parse_reply`` reads it; None unless it reads exactly as the
    response would (a 2xx, headers in ASCII as httpx keeps them)."""
    if not 200 <= recorded.status < 300:
        return None
    headers: dict[str, str] = {}
    for name, value in recorded.headers:
        if not (name.isascii() and value.isascii()):
            return None
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return RecordedReply(recorded.body, headers)


def _as_response(
    provider: Provider, recorded: RecordedResponse, case: CaseLike, run: _Run
) -> httpx.Response:
    response = response_of(recorded)
    response.request = _request(provider, case, run)
    response.read()
    return response


async def _one_callable(provider: CallableProvider, case: CaseLike, run: _Run) -> Completion | str:
    run.requests += 1
    try:
        async with asyncio.timeout(run.timeout):
            return await provider.acall(case.system, case.prompt)
    except TimeoutError:
        return (
            f"recommender {provider.model} gave no reply to case {case.id!r} within "
            f"{run.timeout:g} s; raise timeout or make it faster."
        )
    except ProviderError as exc:
        return str(exc)
    except Exception as exc:
        # The recommender's own bug or failure: recorded for this case, the run goes on.
        return f"recommender {provider.model} raised {type(exc).__name__}: {exc}"


def _first_abort(group: BaseExceptionGroup[BaseException]) -> RecfairError | None:
    for exc in group.exceptions:
        if isinstance(exc, _Abort):
            return exc.error
        if isinstance(exc, BaseExceptionGroup):
            inner = _first_abort(exc)
            if inner is not None:
                return inner
    return None


async def arun_cases(
    provider: Provider | CallableProvider | Callable[..., Any],
    cases: Sequence[CaseLike],
    options: RunOptions | None = None,
    /,
    **overrides: Any,
) -> RunOutcome:
    """Async :func:`run_cases`. See the module docstring for what aborts the run."""
    opts = RunOptions.of(options, overrides)
    _check_args(opts.concurrency, opts.timeout, opts.max_retries, opts.prices)
    ids = _unique_ids(cases)
    prov = _as_provider(provider)
    bar = Progress(len(cases), enabled=opts.progress, stream=opts.progress_stream)
    run = _Run(
        cases,
        concurrency=opts.concurrency,
        timeout=opts.timeout,
        max_retries=opts.max_retries,
        backoff=opts.backoff,
        max_backoff=opts.max_backoff,
        max_retry_after=opts.max_retry_after,
        sleep=opts.sleep,
        progress=bar,
    )
    run.max_reply_chars = opts.max_reply_chars
    start = time.monotonic()
    workers = _Workers(prov, run, opts)
    try:
        try:
            await workers.drain(await _first_pass(prov, cases, opts, run))
        except _Abort as exc:
            raise exc.error from None
        except BaseExceptionGroup as eg:
            error = run.abort or _first_abort(eg)
            if error is None:
                raise
            raise error from None
    finally:
        bar.close()
        await _close(workers.transports, opts.cassettes if workers.http else None)
    return _outcome(run, ids, opts.prices, time.monotonic() - start)


class _Workers:
    """The cases the cassettes did not answer, sent by ``concurrency`` workers."""

    def __init__(self, prov: Provider | CallableProvider, run: _Run, opts: RunOptions) -> None:
        self.prov, self.run, self.opts = prov, run, opts
        self.http = not isinstance(prov, CallableProvider)
        self.transports: list[httpx.AsyncBaseTransport] = []
        # cases still out per entity, when recording: its cassette is saved when it hits 0
        self.unfinished: Counter[str] | None = None

    async def drain(self, todo: list[tuple[CaseLike, _Retryable | None]]) -> None:
        opts = self.opts
        if self.http and opts.cassettes is not None and opts.cassettes.policy.records:
            self.unfinished = Counter(case.entity_id or UNSCOPED_ENTITY for case, _ in todo)
        workers = min(opts.concurrency, len(todo))
        if self.http and workers:
            prov = cast(Provider, self.prov)
            self.transports.extend(
                _transports(
                    prov,
                    opts.transport,
                    opts.cassettes,
                    opts.test_id,
                    workers,
                    opts.max_reply_chars,
                )
            )
        pending = iter(todo)
        async with asyncio.TaskGroup() as group:
            for slot in range(workers):
                group.create_task(self.work(pending, slot))

    async def work(self, todo: Iterator[tuple[CaseLike, _Retryable | None]], slot: int) -> None:
        # A fixed set of workers pulling from one iterator bounds the concurrency, and
        # worker ``slot`` always uses the same transport, so no pool ever has more requests
        # in flight than connections.
        run, prov, cassettes = self.run, self.prov, self.opts.cassettes
        transport = self.transports[slot % len(self.transports)] if self.transports else None
        for case, first in todo:
            if run.abort is not None:
                # Cancellation only lands at a suspension point; a transport that answers
                # without suspending (mock, cassette) would otherwise run every case.
                return
            try:
                if isinstance(prov, CallableProvider):
                    result = await _one_callable(prov, case, run)
                else:
                    assert transport is not None
                    result = await _one_http(transport, prov, case, run, first)
            except _Abort as exc:
                run.abort = run.abort or exc.error
                raise
            run.finish(case, result)
            if self.opts.live is not None:
                _live_advance(self.opts.live, result, self.opts.prices)
            if self.unfinished is not None and cassettes is not None:
                _entity_done(self.unfinished, cassettes, self.opts.test_id, case)


async def _first_pass(
    prov: Provider | CallableProvider, cases: Sequence[CaseLike], opts: RunOptions, run: _Run
) -> list[tuple[CaseLike, _Retryable | None]]:
    """Serve what the cassettes hold (no network); the rest is left for the workers."""
    cassettes = opts.cassettes
    if isinstance(prov, CallableProvider) or cassettes is None or not cassettes.policy.replays:
        return [(case, None) for case in cases]
    cassettes.add_secrets(getattr(prov, "secrets", ()))
    replayer = CassetteTransport(cassettes, test_id=opts.test_id)
    return await _replay_pass(prov, cases, replayer, run)


def _entity_done(
    unfinished: Counter[str], cassettes: CassetteStore, test_id: str, case: CaseLike
) -> None:
    entity = case.entity_id or UNSCOPED_ENTITY
    unfinished[entity] -= 1
    if not unfinished[entity]:
        # Saved now, while other requests are still out, not all at the end.
        cassettes.flush_entity(test_id, entity)


async def _close(
    transports: list[httpx.AsyncBaseTransport], cassettes: CassetteStore | None
) -> None:
    try:
        for used in transports:
            await used.aclose()
    finally:
        if cassettes is not None:
            cassettes.flush()


def _unique_ids(cases: Sequence[CaseLike]) -> list[str]:
    ids = [case.id for case in cases]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ConfigError(
            f"cases: every case needs its own id, but {dup!r} occurs more than once; "
            "build them with prompts.build_cases."
        )
    return ids


def _outcome(
    run: _Run, ids: list[str], prices: tuple[float, float] | None, elapsed: float
) -> RunOutcome:
    usage = Usage()
    unknown = 0
    for completion in run.completions.values():
        if completion.usage is None:
            unknown += 1
        else:
            usage = usage + completion.usage
    # Keep the cases' order, not completion order, so outcomes compare and print stably.
    order = {case_id: i for i, case_id in enumerate(ids)}
    return RunOutcome(
        completions=dict(sorted(run.completions.items(), key=lambda kv: order[kv[0]])),
        errors=dict(sorted(run.errors.items(), key=lambda kv: order[kv[0]])),
        usage=usage,
        cost=usage.cost((float(prices[0]), float(prices[1]))) if prices is not None else None,
        requests=run.requests,
        retries=run.retries,
        elapsed=elapsed,
        unknown_usage=unknown,
    )


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One certificate store per process: loading it costs ~50-150 ms per transport."""
    return httpx.create_ssl_context()


def env_proxy(base_url: str) -> str | None:
    """The proxy that HTTP(S)_PROXY / ALL_PROXY / NO_PROXY give for ``base_url``, if any.

    httpx only reads these variables for transports it builds itself; the runner builds
    its own (to wrap it), so it applies them here. Loopback servers never go via a proxy.
    """
    if not base_url or is_loopback(base_url):
        return None
    parts = urlsplit(base_url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy:
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _transports(
    provider: Provider,
    transport: httpx.AsyncBaseTransport | None,
    cassettes: CassetteStore | None,
    test_id: str,
    workers: int,
    max_reply_chars: int | None = None,
) -> list[httpx.AsyncBaseTransport]:
    """One transport (connection pool) per SHARD_CONNECTIONS workers, sized to fit them.

    A given ``transport`` is one object, so there is one. With cassettes, each has its own
    CassetteTransport over the same store.
    """
    shards = 1 if transport is not None else math.ceil(workers / SHARD_CONNECTIONS)
    per_shard = math.ceil(workers / shards)
    # Keep-alive for every connection: with fewer, connections past the limit are closed
    # and opened again while the load is steady.
    limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=per_shard)
    proxy = env_proxy(str(getattr(provider, "base_url", "") or ""))

    def network() -> httpx.AsyncBaseTransport:
        real: httpx.AsyncBaseTransport
        if transport is not None:
            real = transport
        elif proxy is None:
            # httpcore's pool on plain asyncio, not anyio: ~30% less CPU per request
            # (providers/aionet.py). No retries there either.
            real = AsyncioTransport(ssl_context=_ssl_context(), limits=limits)
        else:
            # Through a proxy, httpx's own transport (proxy URL, auth, CONNECT tunnels).
            # retries=0: retrying is ours (with backoff and Retry-After), not httpcore's.
            real = httpx.AsyncHTTPTransport(
                verify=_ssl_context(), retries=0, limits=limits, proxy=proxy
            )
        return _KeyGuard(real, provider)

    if cassettes is None:
        return [network() for _ in range(shards)]
    cassettes.add_secrets(getattr(provider, "secrets", ()))
    # In replay-only mode no real transport is built, so nothing can reach the network.
    live = transport is not None or cassettes.policy.records
    return [
        CassetteTransport(
            cassettes,
            test_id=test_id,
            inner=network() if live else None,
            max_reply_chars=max_reply_chars,
        )
        for _ in range(shards)
    ]


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

    def start() -> RunOutcome:
        box: list[RunOutcome] = []

        async def main() -> None:
            # Not the task's result: on Python 3.11 asyncio.run's SIGINT clean-up formats
            # the main task's repr, result included: 0.3 s for 32,000 completions.
            box.append(await arun_cases(provider, cases, RunOptions.of(options, overrides)))

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
            runner.run(main())
        return box[0]

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return start()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="recfair-run") as pool:
        return pool.submit(start).result()
