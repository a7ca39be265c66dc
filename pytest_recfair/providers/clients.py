"""The runner's HTTP transports: connection pools sized to the workers, TLS, proxies, the
API-key check, and the cassette transport around them when recording.

One pool per SHARD_CONNECTIONS workers (httpcore on plain asyncio,
``providers.aionet.AsyncioTransport``; httpx's own transport when a proxy is set).
"""

from __future__ import annotations

import functools
import math
import ssl
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx

from pytest_recfair.errors import RecfairError
from pytest_recfair.providers.aionet import AsyncioTransport
from pytest_recfair.providers.base import Provider
from pytest_recfair.providers.http import is_loopback
from pytest_recfair.providers.retry import Abort
from pytest_recfair.providers.transport import CassetteTransport

if TYPE_CHECKING:
    from pytest_recfair.cassettes.store import CassetteStore

__all__ = ["SHARD_CONNECTIONS", "KeyGuard", "env_proxy", "ssl_context", "transports"]

# Requests in flight per connection pool. httpcore's pool walks every connection at each
# request event (a readability check per idle connection), so the client's CPU per request
# grows with the pool: 64 in flight cost 1.24 ms/request of CPU in pools of 16 and 0.95 ms
# in pools of 8 (benchmarks/bench_live.py, docs/performance.md).
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


def transports(
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
        return KeyGuard(_network(transport, proxy, limits), provider)

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


def _network(
    transport: httpx.AsyncBaseTransport | None, proxy: str | None, limits: httpx.Limits
) -> httpx.AsyncBaseTransport:
    if transport is not None:
        return transport
    if proxy is None:
        # httpcore's pool on plain asyncio, not anyio: ~30% less CPU per request
        # (providers/aionet.py). No retries there either.
        return AsyncioTransport(ssl_context=ssl_context(), limits=limits)
    # Through a proxy, httpx's own transport (proxy URL, auth, CONNECT tunnels).
    # retries=0: retrying is ours (with backoff and Retry-After), not httpcore's.
    return httpx.AsyncHTTPTransport(verify=ssl_context(), retries=0, limits=limits, proxy=proxy)
