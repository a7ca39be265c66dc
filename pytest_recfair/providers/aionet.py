"""The runner's HTTP transport: httpcore's connection pool on a plain asyncio network
backend (same bytes on the wire). Through anyio a request cost a timeout scope per read and
write, extra loop turns and epoll calls: a quarter of the client's CPU at 64 in flight.
Errors are httpcore's, raised as httpx's (:data:`ERRORS`); a proxied run keeps httpx's.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any, cast

import httpcore
import httpx

#: Kept writes are sent at once beyond this size (a streamed body is not held in memory).
FLUSH_BYTES = 64 * 1024
# Reading pauses while this much has arrived unread (one reply is far smaller).
_READ_LIMIT = 1 << 20


class _Connection(asyncio.Protocol):
    """One connection's state: unread bytes, EOF, the error that ended it, waiters."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.buffer = loop, bytearray()
        self.transport: asyncio.Transport | None = None
        self.error: BaseException | None = None
        self.eof = self.reading_paused = self.writing_paused = False
        self.waiter: asyncio.Future[None] | None = None
        self.drained: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > _READ_LIMIT and self.transport is not None:
            self.transport.pause_reading()
            self.reading_paused = True
        _settle(self.waiter)

    def eof_received(self) -> bool:
        self.eof = True
        _settle(self.waiter)
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof, self.error = True, exc
        _settle(self.waiter)
        self.resume_writing()

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        _settle(self.drained)

    async def wait(self, timeout: float | None, expired: Exception) -> None:
        """Until data, EOF or the end; ``expired`` after ``timeout`` s (one timer, no cancel)."""
        waiter = self.waiter = self.loop.create_future()
        timer = None if timeout is None else self.loop.call_later(timeout, _settle, waiter, expired)
        try:
            await waiter
        finally:
            self.waiter = None
            if timer is not None:
                timer.cancel()

    async def drain(self, timeout: float | None) -> None:  # below the high-water mark
        while self.writing_paused:
            drained = self.drained = self.loop.create_future()
            try:
                async with asyncio.timeout(timeout):
                    await drained
            except TimeoutError:
                raise httpcore.WriteTimeout("timed out writing to the server") from None
            finally:
                self.drained = None


def _settle(future: asyncio.Future[None] | None, error: Exception | None = None) -> None:
    """Wake whoever awaits ``future`` (with ``error``: a timeout), once."""
    if future is not None and not future.done():
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


class AsyncioStream(httpcore.AsyncNetworkStream):
    """An httpcore network stream over an asyncio transport (see the module docstring)."""

    def __init__(self, transport: asyncio.Transport, connection: _Connection) -> None:
        self._transport, self._conn = transport, connection
        self._pending: list[bytes] = []
        self._size, self._closed = 0, False
        self._timeout: float | None = None

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._pending:
            await self._flush()
        conn = self._conn
        while not conn.buffer and not conn.eof:
            if self._closed:
                raise httpcore.ReadError("the connection was closed")
            await conn.wait(timeout, httpcore.ReadTimeout("timed out reading from the server"))
        buffer = conn.buffer
        if buffer:
            if len(buffer) <= max_bytes:
                chunk = bytes(buffer)
                buffer.clear()
            else:
                chunk = bytes(buffer[:max_bytes])
                del buffer[:max_bytes]
            if conn.reading_paused and len(buffer) <= _READ_LIMIT // 2:
                conn.reading_paused = False
                self._transport.resume_reading()
            return chunk
        if self._closed:
            raise httpcore.ReadError("the connection was closed")
        if conn.error is not None:
            raise httpcore.ReadError(str(conn.error) or type(conn.error).__name__) from conn.error
        return b""  # the server closed the connection

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        self._pending.append(buffer)
        self._size += len(buffer)
        self._timeout = timeout
        if self._size >= FLUSH_BYTES:
            await self._flush()

    async def _flush(self) -> None:
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending, self._size = [], 0
        conn = self._conn
        if self._closed or self._transport.is_closing():
            error = conn.error
            raise httpcore.WriteError(
                str(error) if error is not None else "the connection was closed"
            ) from error
        self._transport.write(data)
        if conn.writing_paused:
            await conn.drain(self._timeout)

    async def aclose(self) -> None:
        # A request abandoned before its reply was read: nothing more goes out.
        self._pending, self._size = [], 0
        self._closed = True
        if not self._transport.is_closing():
            self._transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if self._pending:
            await self._flush()
        conn = self._conn
        try:
            async with asyncio.timeout(timeout):
                tls = await conn.loop.start_tls(
                    self._transport, conn, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError as exc:
            await self.aclose()
            raise httpcore.ConnectTimeout(str(exc) or "TLS handshake timed out") from exc
        except (OSError, ssl.SSLError) as exc:
            await self.aclose()
            raise _ConnectFailed(str(exc) or type(exc).__name__, exc) from exc
        if tls is None:  # pragma: no cover - only for a transport closed meanwhile
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        conn.transport = tls
        return AsyncioStream(tls, conn)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            # Data or EOF on an idle connection: the server closed it (or broke protocol).
            return bool(self._conn.buffer) or self._conn.eof
        # ssl_object and socket under their own names; asyncio gives None for unknown ones
        name = {"client_addr": "sockname", "server_addr": "peername"}.get(info, info)
        return self._transport.get_extra_info(name)


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """Opens :class:`AsyncioStream` connections (asyncio only: the runner's own loop)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        local_addr = (local_address, 0) if local_address else None
        try:
            async with asyncio.timeout(timeout):
                try:
                    transport, conn = await loop.create_connection(
                        lambda: _Connection(loop),
                        host,
                        port,
                        local_addr=local_addr,
                        happy_eyeballs_delay=0.25,  # as anyio's connect_tcp
                    )
                except OSError:
                    raise
                except Exception:
                    # asyncio's happy eyeballs drops an error that is not an OSError (a
                    # socket refused by another plugin) and raises IndexError instead
                    # (CPython 3.11): one plain try raises the real error.
                    transport, conn = await loop.create_connection(
                        lambda: _Connection(loop), host, port, local_addr=local_addr
                    )
        except TimeoutError as exc:  # an OSError: caught first
            raise httpcore.ConnectTimeout(str(exc) or "timed out connecting") from exc
        except Exception as exc:
            raise _ConnectFailed(str(exc) or type(exc).__name__, exc) from exc
        for option in socket_options or ():
            transport.get_extra_info("socket").setsockopt(*option)
        return AsyncioStream(transport, conn)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _ConnectFailed(httpcore.ConnectError):
    """A ConnectError keeping its ``origin``: httpcore's pool re-raises ``from None``; the
    transport restores ``__cause__`` so the runner can tell a socket another plugin blocked."""

    def __init__(self, message: str, origin: BaseException) -> None:
        super().__init__(message)
        self.origin = origin


class AsyncioTransport(httpx.AsyncBaseTransport):
    """``httpx.AsyncHTTPTransport``, direct, over :class:`AsyncioBackend` (HTTP/1.1, no retries)."""

    def __init__(self, *, ssl_context: ssl.SSLContext, limits: httpx.Limits) -> None:
        self.pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=AsyncioBackend(),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        with _mapped(request):
            reply = await self.pool.handle_async_request(
                httpcore.Request(
                    method=request.method,
                    url=httpcore.URL(
                        scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
                    ),
                    headers=request.headers.raw,
                    content=request.stream,
                    extensions=request.extensions,  # the timeouts travel here
                )
            )
        return httpx.Response(
            status_code=reply.status,
            headers=reply.headers,
            stream=_Body(cast(httpx.AsyncByteStream, reply.stream), request),
            extensions=reply.extensions,
        )

    async def aclose(self) -> None:
        await self.pool.aclose()


class _Body(httpx.AsyncByteStream):
    """A reply's body as httpx reads it, httpcore's errors as httpx's."""

    def __init__(self, stream: httpx.AsyncByteStream, request: httpx.Request) -> None:
        self._stream, self._request = stream, request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _mapped(self._request):
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        await self._stream.aclose()


# httpcore's errors with the same name in httpx, the more specific first
_NAMES = (
    "ConnectTimeout ReadTimeout WriteTimeout PoolTimeout ConnectError ReadError WriteError "
    "RemoteProtocolError LocalProtocolError UnsupportedProtocol"
)
#: httpcore's errors and httpx's raised for them, first match wins (the runner tells them apart).
ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = tuple(
    (getattr(httpcore, name), getattr(httpx, name)) for name in _NAMES.split()
)


@contextlib.contextmanager
def _mapped(request: httpx.Request) -> Iterator[None]:
    """httpcore's errors raised as httpx's (``from`` the original); others as they are."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc, _ConnectFailed):
            exc.__cause__ = exc.origin
        for core, mapped in ERRORS:
            if isinstance(exc, core):
                raise mapped(str(exc), request=request) from exc
        raise
