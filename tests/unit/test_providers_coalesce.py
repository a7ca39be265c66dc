"""providers.coalesce: a request's writes leave in one socket write, before the read."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from pytest_recfair.providers.coalesce import (
    FLUSH_BYTES,
    CoalescingBackend,
    CoalescingStream,
    coalesce_writes,
)
from pytest_recfair.providers.runner import _transports


class Recorder(httpcore.AsyncNetworkStream):
    """A network stream that logs what reaches it."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self.log.append(("read", timeout))
        return b"reply"

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.log.append(("write", buffer))

    async def aclose(self) -> None:
        self.log.append(("close", None))

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.log.append(("tls", server_hostname))
        return self

    def get_extra_info(self, info: str) -> Any:
        return f"info:{info}"


def test_writes_go_out_as_one_before_the_read() -> None:
    async def go() -> list[tuple[str, Any]]:
        inner = Recorder()
        stream = CoalescingStream(inner)
        await stream.write(b"POST / HTTP/1.1\r\n\r\n", timeout=5.0)
        await stream.write(b"", timeout=5.0)
        await stream.write(b'{"a":1}', timeout=5.0)
        assert inner.log == []  # nothing sent yet
        assert await stream.read(100, timeout=7.0) == b"reply"
        await stream.write(b"next", timeout=5.0)
        assert await stream.read(100) == b"reply"
        assert stream.get_extra_info("socket") == "info:socket"
        await stream.aclose()
        return inner.log

    assert asyncio.run(go()) == [
        ("write", b'POST / HTTP/1.1\r\n\r\n{"a":1}'),
        ("read", 7.0),
        ("write", b"next"),
        ("read", None),
        ("close", None),
    ]


def test_a_large_body_and_a_tls_upgrade_flush_at_once() -> None:
    async def go() -> list[tuple[str, Any]]:
        inner = Recorder()
        stream = CoalescingStream(inner)
        await stream.write(b"h" * 10)
        await stream.write(b"b" * FLUSH_BYTES)  # past the limit: sent now
        await stream.write(b"CONNECT")
        tls = await stream.start_tls(ssl.create_default_context(), "example.org")
        assert isinstance(tls, CoalescingStream)
        await stream.write(b"dropped")
        await stream.aclose()  # a request abandoned before its reply: nothing goes out
        return inner.log

    log = asyncio.run(go())
    assert log == [
        ("write", b"h" * 10 + b"b" * FLUSH_BYTES),
        ("write", b"CONNECT"),
        ("tls", "example.org"),
        ("close", None),
    ]


class Backend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return Recorder()

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return Recorder()


def test_backend_wraps_every_connection() -> None:
    backend = CoalescingBackend(Backend())

    async def go() -> tuple[object, object]:
        return await backend.connect_tcp("h", 1), await backend.connect_unix_socket("/s")

    assert all(isinstance(s, CoalescingStream) for s in asyncio.run(go()))


def test_the_runner_pools_coalesce_and_a_given_transport_is_left_alone() -> None:
    from pytest_recfair.providers import from_config

    provider = from_config("openai", model="m", base_url="http://127.0.0.1:9/v1", api_key_env="")
    built = _transports(provider, None, None, "t", 16)
    assert len(built) == 2
    for guard in built:
        pool = guard.inner._pool  # type: ignore[attr-defined]
        assert isinstance(pool._network_backend, CoalescingBackend)
        assert not coalesce_writes(pool)  # once is enough
    given = httpx.MockTransport(lambda r: httpx.Response(200))
    (guard,) = _transports(provider, given, None, "t", 16)
    assert guard.inner is given  # type: ignore[attr-defined]
    assert not coalesce_writes(given)
