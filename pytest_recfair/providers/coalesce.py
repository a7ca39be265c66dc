"""One socket write per HTTP/1.1 request instead of one per part (head, body).

httpcore writes a request's head and its body separately, and each write is a socket
send, an anyio checkpoint and a timeout scope. On a live run that is a third of the
client's socket time, and the server is woken twice per request. The streams below keep
the writes and send them as one when the connection is next read (httpcore always reads
the reply after writing the whole request), when the kept bytes grow past
``FLUSH_BYTES``, or before a TLS upgrade. The bytes on the wire are the same.

A write error now surfaces on that read, as httpcore's ``WriteError`` (a network error,
retried by the runner as before); httpcore itself already ignores a write error and
reads the reply instead, because a server may answer early and close.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from typing import Any

import httpcore

__all__ = ["FLUSH_BYTES", "CoalescingBackend", "CoalescingStream", "coalesce_writes"]

#: Kept writes are sent at once beyond this size (a streamed body is not held in memory).
FLUSH_BYTES = 64 * 1024


class CoalescingStream(httpcore.AsyncNetworkStream):
    """A network stream that sends consecutive writes in one go before the next read."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._pending: list[bytes] = []
        self._size = 0
        self._timeout: float | None = None

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        self._pending.append(buffer)
        self._size += len(buffer)
        self._timeout = timeout
        if self._size >= FLUSH_BYTES:
            await self.flush()

    async def flush(self) -> None:
        """Send what the writes kept, as one write."""
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        timeout = self._timeout
        self._pending, self._size = [], 0
        await self._inner.write(data, timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._pending:
            await self.flush()
        return await self._inner.read(max_bytes, timeout)

    async def aclose(self) -> None:
        # A request abandoned before its reply was read: nothing more goes out.
        self._pending, self._size = [], 0
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        await self.flush()
        return CoalescingStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class CoalescingBackend(httpcore.AsyncNetworkBackend):
    """``inner``'s connections, each wrapped in a :class:`CoalescingStream`."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self.inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self.inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        return CoalescingStream(stream)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self.inner.connect_unix_socket(
            path, timeout=timeout, socket_options=socket_options
        )
        return CoalescingStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def coalesce_writes(pool: object) -> bool:
    """Make an httpcore connection pool (``httpx.AsyncHTTPTransport._pool``) open its
    connections through a :class:`CoalescingBackend`. True when it did; an object that
    does not look like httpcore's pool is left as it is (requests then go out as before)."""
    backend = getattr(pool, "_network_backend", None)
    if not isinstance(backend, httpcore.AsyncNetworkBackend) or isinstance(
        backend, CoalescingBackend
    ):
        return False
    pool._network_backend = CoalescingBackend(backend)  # type: ignore[attr-defined]
    return True
