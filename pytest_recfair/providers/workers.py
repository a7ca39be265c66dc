"""The worker pool: ``concurrency`` workers send what the cassettes did not answer, each try
timed out and retried by :mod:`.retry`, over connection pools sized to the workers.
``intercept="vcr"``: vcrpy patches process-wide, so the audit runs one prompt at a time,
each with a vcrpy cassette persisted through the prompt's :class:`~.pipeline.Scope`."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import ssl
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import vcr
from vcr.cassette import Cassette
from vcr.persisters.filesystem import CassetteNotFoundError
from vcr.request import Request

from pytest_recfair.errors import ProviderError, RecfairError
from pytest_recfair.providers.adapter import CallableProvider
from pytest_recfair.providers.aionet import AsyncioTransport
from pytest_recfair.providers.base import Completion, Provider
from pytest_recfair.providers.http import is_loopback
from pytest_recfair.providers.pacing import request_tokens
from pytest_recfair.providers.pipeline import (
    SCOPE,
    Scope,
    output_completion,
    output_reply,
    output_request,
    scoped,
)
from pytest_recfair.providers.replay import Todo, noted_failure, replay_failures
from pytest_recfair.providers.retry import (
    Abort,
    Retryable,
    advice,
    blocked,
    blocker,
    judge,
    limits_of,
    url_of,
)
from pytest_recfair.providers.runstate import CaseLike, Run
from pytest_recfair.providers.transport import EXT_RECORD, UNSCOPED_ENTITY, CassetteTransport

if TYPE_CHECKING:
    from pytest_recfair.cassettes.failures import FailureLog
    from pytest_recfair.cassettes.store import CassetteStore


class Workers:
    """The cases the cassettes did not answer, sent by ``concurrency`` workers."""

    def __init__(self, prov: Provider | CallableProvider, run: Run) -> None:
        self.prov, self.run, self.opts = prov, run, run.opts
        self.transports: list[httpx.AsyncBaseTransport] = []
        # cases still out per entity, when recording: its cassette is saved when it hits 0
        self.unfinished: Counter[str] | None = None
        # a Python recommender's replay: the failures its recording noted, read once
        py = isinstance(prov, CallableProvider)
        self.noted = replay_failures(self.opts.cassettes) if py else None

    async def drain(self, todo: list[Todo]) -> None:
        opts, prov = self.opts, self.prov
        if opts.cassettes is not None and opts.cassettes.policy.records:
            self.unfinished = Counter(case.entity_id or UNSCOPED_ENTITY for case, _ in todo)
        workers = min(opts.concurrency, len(todo))
        if not isinstance(prov, CallableProvider) and workers:
            self.transports = transports(
                prov, opts.transport, opts.cassettes, opts.test_id, workers, opts.max_reply_chars
            )
        pending = iter(todo)
        async with asyncio.TaskGroup() as group:
            for slot in range(workers):
                group.create_task(self.work(pending, slot))

    async def work(self, todo: Iterator[Todo], slot: int) -> None:
        # Fixed workers pulling from one iterator bound the concurrency; ``slot`` keeps its
        # transport, so no pool ever has more requests in flight than connections.
        run, prov, opts = self.run, self.prov, self.opts
        for case, first in todo:
            if run.abort is not None:
                # Cancellation only lands at a suspension point; a transport that answers
                # without suspending (mock, cassette) would otherwise run every case.
                return
            try:
                if isinstance(prov, CallableProvider):
                    result = await _one_callable(prov, case, run, self.noted)
                else:
                    transport = self.transports[slot % len(self.transports)]
                    result = await _one_http(transport, prov, case, run, first)
            except Abort as exc:
                run.abort = run.abort or exc.error
                raise
            run.finish(case, result)
            if opts.live is not None:
                usage = result.usage if isinstance(result, Completion) else None
                opts.live.advance(
                    failed=not isinstance(result, Completion),
                    tokens=usage.total_tokens if usage else 0,
                    cost=usage.cost(opts.prices) if usage and opts.prices else None,
                )
            if self.unfinished is not None and opts.cassettes is not None:
                entity = case.entity_id or UNSCOPED_ENTITY
                self.unfinished[entity] -= 1
                if not self.unfinished[entity]:
                    # Saved now, while other requests are still out, not all at the end.
                    opts.cassettes.flush_entity(opts.test_id, entity)

    async def close(self) -> None:
        """Close the transports, then save what the cassettes recorded."""
        try:
            for transport in self.transports:
                await transport.aclose()
        finally:
            if self.opts.cassettes is not None:
                self.opts.cassettes.flush()


async def _one_callable(
    provider: CallableProvider, case: CaseLike, run: Run, noted_log: FailureLog | None
) -> Completion | str:
    """One case of a Python recommender, its recfair-client calls recorded (:mod:`.pipeline`);
    a miss or the budget stops the whole run, however the pipeline handled the error it got."""
    opts = run.opts
    store = opts.cassettes
    if store is None:
        return await _called(provider, case, run)
    noted = noted_failure(provider, case, opts.test_id, noted_log)
    if noted is not None:  # this test's recording failed the prompt: so does its replay
        return noted
    scope = Scope(store, opts.test_id, case, opts.allowance)
    # record=True: what the function returned is kept and replayed under this key
    method, url, body = output_request(provider.model, case.system, case.prompt)
    with scoped(scope):
        try:
            hit = scope.lookup((method, url, [], body), http=False) if provider.record else None
            replayed = None if hit is None else output_completion(hit.body, provider.model)
            if replayed is not None:
                result: Completion | str = replayed
            else:  # intercept="vcr": vcrpy saves (into the scope) when the block ends
                with intercepted(scope) if opts.intercept == "vcr" else contextlib.nullcontext():
                    result = await _called(provider, case, run)
        except RecfairError as exc:
            scope.stop = scope.stop or exc
        if scope.stop is not None:
            raise Abort(scope.stop)
        if provider.record and replayed is None and isinstance(result, Completion):
            ok = (200, [("content-type", "application/json")], output_reply(result), "OK")
            scope.keep((method, url, [], body), ok)
    return scope.settle(result)


async def _called(provider: CallableProvider, case: CaseLike, run: Run) -> Completion | str:
    pacer = run.pacer  # only with recfair_rpm / recfair_tpm
    ticket = None if pacer is None else await pacer.acquire(request_tokens(case, run.max_tokens))
    run.requests += 1
    try:
        async with asyncio.timeout(run.timeout):
            completion = await provider.acall(case.system, case.prompt)
        if pacer is not None and ticket is not None and completion.usage is not None:
            pacer.used(ticket, completion.usage.total_tokens)
        return completion
    except TimeoutError:
        return (
            f"recommender {provider.model} gave no reply to case {case.id!r} within "
            f"{run.timeout:g} s; raise timeout or make it faster."
        )
    except ProviderError as exc:
        return str(exc)
    except RecfairError:
        raise  # a miss or the budget, raised by a recfair client: stops the run
    except Exception as exc:
        # The recommender's own bug or failure: recorded for this case, the run goes on.
        return f"recommender {provider.model} raised {type(exc).__name__}: {exc}"
    finally:
        if pacer is not None:
            await pacer.release()


async def _one_http(
    transport: httpx.AsyncBaseTransport,
    provider: Provider,
    case: CaseLike,
    run: Run,
    first: Retryable | None = None,
) -> Completion | str:
    """One case: a try, then up to ``max_retries`` retries of a retryable failure
    (``first``: try 1's, in the replay pass). A plain loop: a retry library costs more
    per request than the request itself, and its first try would have to replay ``first``."""
    failure, tries = first, 0 if first is None else 1
    try:
        while True:
            if failure is not None:
                if tries > run.opts.max_retries:
                    raise failure
                if run.abort is not None:
                    raise Abort(run.abort)
                await run.pause(tries, failure)
                run.retries += 1
            tries += 1
            try:
                return await _attempt_http(transport, provider, case, run)
            except Retryable as exc:
                failure = exc
    except Retryable as exc:
        message = (
            f"gave up on case {case.id!r} after {tries} tries ({run.opts.max_retries} retries) to "
            f"{url_of(provider)}: last error: {exc.what}. "
            f"{advice(exc, concurrency=run.opts.concurrency, timeout=run.timeout)}"
        )
        if exc.unreachable:
            raise Abort(ProviderError(message)) from None
        return message
    except ProviderError as exc:
        return str(exc)
    except RecfairError as exc:  # a cassette miss or similar: same for every case
        raise Abort(exc) from None


async def _attempt_http(
    transport: httpx.AsyncBaseTransport, provider: Provider, case: CaseLike, run: Run
) -> Completion:
    request = run.request(provider, case)
    # A cassette transport hands its recording back here instead of recording at once:
    # it is kept only when this try is final, so a reply that is retried is never saved.
    deferred: list[Callable[[], None]] = []
    request.extensions[EXT_RECORD] = deferred
    pacer = run.pacer
    ticket = None if pacer is None else await pacer.acquire(request_tokens(case, run.max_tokens))
    run.requests += 1
    try:
        response = await _sent(transport, provider, request, run.timeout)
    finally:
        if pacer is not None:
            await pacer.release()
    try:
        completion = judge(provider, response, case)
        # Only a reply that parsed as a completion is recorded: an error or a retried reply
        # (a 429 above all) never reaches the cassette, so the next recording run asks again.
        for record in deferred:
            record()
    finally:  # a paid reply is recorded before its headers are read for the pacer
        if pacer is not None and ticket is not None:
            pacer.replied(response.status_code, *limits_of(response))
    if pacer is not None and ticket is not None:
        pacer.used(ticket, completion.usage.total_tokens if completion.usage else None)
    return completion


async def _sent(
    transport: httpx.AsyncBaseTransport, provider: Provider, request: httpx.Request, timeout: float
) -> httpx.Response:
    """The read reply to ``request``; a failure becomes Retryable or Abort."""
    try:
        # httpx's timeouts are per phase (connect, each read); this bounds the whole reply.
        async with asyncio.timeout(timeout):
            # ``AsyncClient.send`` minus what the runner never uses (auth flows, redirects,
            # cookies, hooks: ~10% of a request's CPU); timeouts travel in the extensions.
            response = await transport.handle_async_request(request)
            response.request = request
            try:
                await response.aread()  # closes the stream once it is read
            except BaseException:
                await response.aclose()
                raise
            return response
    except (TimeoutError, httpx.TimeoutException) as exc:
        kind = "connect timeout" if isinstance(exc, httpx.ConnectTimeout) else "read timeout"
        raise Retryable(
            f"timeout: no complete reply within {timeout:g} s ({kind})",
            unreachable=isinstance(exc, httpx.ConnectTimeout),
        ) from None
    except (httpx.ConnectError, BaseExceptionGroup) as exc:  # a group: anyio's connect
        where = f"{request.url.host}:{request.url.port or ''}"
        cause = blocker(exc)
        if cause is not None:  # e.g. pytest-socket: no retry helps, say it in one line
            raise blocked(where, cause) from None
        if isinstance(exc, BaseExceptionGroup):
            raise
        raise Retryable(f"cannot connect to {where} ({exc})", unreachable=True) from None
    except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
        # Includes a body cut off mid-transfer (fewer bytes than Content-Length).
        raise Retryable(f"{type(exc).__name__}: {exc or 'connection dropped'}") from None
    except httpx.HTTPError as exc:  # bad URL, unsupported protocol: no retry helps
        raise Abort(
            ProviderError(
                f"{getattr(provider, 'name', 'provider')}: cannot send to {request.url}: "
                f"{type(exc).__name__}: {exc}. Check base_url."
            )
        ) from None


# Requests in flight per pool: httpcore's pool checks every idle connection at each request
# event, so CPU per request grows with the pool: 64 in flight cost 1.24 ms/request in pools
# of 16, 0.95 ms in pools of 8 (benchmarks/bench_live.py, docs/performance.md).
SHARD_CONNECTIONS = 8


class KeyGuard(httpx.AsyncBaseTransport):
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
                raise Abort(exc) from None
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """One certificate store per process: loading it costs ~50-150 ms per transport."""
    return httpx.create_ssl_context()


def env_proxy(base_url: str) -> str | None:
    """The proxy HTTP(S)_PROXY / ALL_PROXY / NO_PROXY give for ``base_url`` (none for
    loopback): httpx reads them only for transports it builds, and the runner builds its own."""
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


def transports(
    provider: Provider,
    transport: httpx.AsyncBaseTransport | None,
    cassettes: CassetteStore | None,
    test_id: str,
    workers: int,
    max_reply_chars: int | None = None,
) -> list[httpx.AsyncBaseTransport]:
    """A pool per SHARD_CONNECTIONS workers (one if ``transport`` given), in CassetteTransports."""
    shards = 1 if transport is not None else math.ceil(workers / SHARD_CONNECTIONS)
    per_shard = math.ceil(workers / shards)
    # Keep-alive for all: with fewer, connections past the limit close and reopen under load.
    limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=per_shard)
    proxy = env_proxy(str(getattr(provider, "base_url", "") or ""))

    def network() -> httpx.AsyncBaseTransport:
        # httpcore's pool on plain asyncio, not anyio: ~30% less CPU per request (aionet);
        # through a proxy, httpx's own transport (proxy URL, auth, CONNECT tunnels).
        # No retries in either: retrying is ours (with backoff and Retry-After).
        if transport is not None:
            return KeyGuard(transport, provider)
        if proxy is None:
            return KeyGuard(AsyncioTransport(ssl_context=ssl_context(), limits=limits), provider)
        tls = ssl_context()
        inner = httpx.AsyncHTTPTransport(verify=tls, retries=0, limits=limits, proxy=proxy)
        return KeyGuard(inner, provider)

    if cassettes is None:
        return [network() for _ in range(shards)]
    cassettes.add_secrets(getattr(provider, "secrets", ()))
    # In replay-only mode no real transport is built, so nothing can reach the network.
    live = transport is not None or cassettes.policy.records
    cap = max_reply_chars
    return [
        CassetteTransport(cassettes, test_id, network() if live else None, max_reply_chars=cap)
        for _ in range(shards)
    ]


# --- intercept="vcr": a pipeline's calls through vcrpy, one prompt at a time

_VCR = vcr.VCR(decode_compressed_response=True)


class _Persister:
    """vcrpy's storage, for one prompt: its scope's entity cassette."""

    @staticmethod
    def load_cassette(cassette_path: str, serializer: Any) -> tuple[list[Any], list[Any]]:
        scope = SCOPE.get()
        if scope is None or not scope.store.policy.replays:
            raise CassetteNotFoundError
        requests, responses = [], []
        recorded = scope.store.recorded(scope.entity, scope.case.id)
        for _, (method, host, path, body, _), (code, reason, headers, text) in recorded:
            requests.append(Request(method, f"https://{host}{path}", body, {}))
            grouped: dict[str, list[str]] = {}
            for name, value in headers:
                grouped.setdefault(name, []).append(value)
            status, content = {"code": code, "message": reason}, {"string": text.encode()}
            responses.append({"status": status, "headers": grouped, "body": content})
        if not requests:
            raise CassetteNotFoundError
        scope.vcr_loaded = len(requests)
        return requests, responses

    @staticmethod
    def save_cassette(cassette_path: str, cassette_dict: dict[str, Any], serializer: Any) -> None:
        scope = SCOPE.get()
        if scope is None:
            return
        pairs = list(zip(cassette_dict["requests"], cassette_dict["responses"], strict=True))
        for request, response in pairs[scope.vcr_loaded :]:
            _hand(scope, request, response)


def _hand(scope: Scope, request: Any, response: dict[str, Any]) -> None:
    """A reply vcrpy got live, handed to the prompt's scope (kept if a 2xx)."""
    method, url, body = request.method, request.uri, _body(request)
    with scope.lock:  # vcrpy recorded a reply (any status) to a request it sent live
        scope.vcr_unanswered[(method, url, body)] -= 1
    asked = [(str(n), str(v)) for n, v in request.headers.items()]
    status, content = response["status"], response["body"]["string"]
    content = content if isinstance(content, bytes) else str(content or "").encode("utf-8")
    listed = {n: v if isinstance(v, list | tuple) else [v] for n, v in response["headers"].items()}
    headers = [(n, str(v)) for n, values in listed.items() for v in values]
    reason = str(status.get("message") or "")
    scope.keep((method, url, asked, body), (int(status["code"]), headers, content, reason))


def _body(request: Any) -> bytes:
    body = request.body or b""
    return body if isinstance(body, bytes) else str(body).encode("utf-8")


class _Cassette(Cassette):  # type: ignore[misc]  # vcrpy ships no type hints
    """A vcrpy cassette telling the scope of each request it cannot play (before vcrpy does)."""

    def can_play_response_for(self, request: Any) -> bool:
        playable = bool(super().can_play_response_for(request))
        scope = SCOPE.get()
        if not playable and scope is not None:
            scope.unplayable(request, request.method, request.uri, _body(request))
        return playable

    def append(self, request: Any, response: dict[str, Any]) -> None:
        """A non-2xx reply goes to the scope (its request failed) and not into vcrpy's
        cassette, which would answer the pipeline's retry with it instead of sending it."""
        scope = SCOPE.get()
        if scope is not None and not 200 <= int(response["status"]["code"]) < 300:
            _hand(scope, request, response)
            return
        super().append(request, response)


@contextlib.contextmanager
def intercepted(scope: Scope) -> Iterator[None]:
    """vcrpy's patches for the duration of one prompt, recording into ``scope``."""
    policy = scope.store.policy
    mode = ("new_episodes" if policy.replays else "all") if policy.records else "none"
    config = _VCR.get_merged_config(
        path=f"recfair-{scope.entity}",
        persister=_Persister,
        record_mode=mode,
        match_on=("method", "host", "path", "body"),
        allow_playback_repeats=False,
    )
    with _Cassette.use(**config):
        yield
    scope.vcr_done()  # after vcrpy saved what it recorded into the scope
