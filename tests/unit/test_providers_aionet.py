"""providers.aionet: httpcore's connections on asyncio directly (loopback sockets, TLS
with a throwaway CA from trustme)."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import httpcore
import httpx
import pytest
import trustme

from pytest_recfair.errors import ProviderError
from pytest_recfair.providers import arun_cases, from_config, retry
from pytest_recfair.providers import workers as clients
from pytest_recfair.providers.aionet import (
    ERRORS,
    FLUSH_BYTES,
    AsyncioBackend,
    AsyncioStream,
    AsyncioTransport,
    _mapped,
)
from pytest_recfair.providers.workers import transports as _transports

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _serve(
    handler: Handler,
    client: Callable[[int], Awaitable[Any]],
    ssl_context: ssl.SSLContext | None = None,
) -> Any:
    """Run ``client(port)`` against a loopback server that runs ``handler``; handlers
    still running afterwards are cancelled and their connections closed."""

    async def go() -> Any:
        handlers: set[asyncio.Task[None]] = set()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            handlers.add(task)
            try:
                await handler(reader, writer)
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ssl_context)
        port = server.sockets[0].getsockname()[1]
        try:
            return await client(port)
        finally:
            server.close()
            for task in handlers:
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)
            await asyncio.sleep(0.01)  # the closed transports release their sockets

    return asyncio.run(go())


def test_a_request_goes_out_in_one_write_and_the_reply_comes_back() -> None:
    received: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.read(65536))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    async def client(port: int) -> tuple[list[bytes], list[bytes], bool, bool]:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        assert isinstance(stream, AsyncioStream)
        sent: list[bytes] = []
        transport = stream._transport
        real_write = transport.write

        def write(data: Any) -> None:
            sent.append(bytes(data))
            real_write(data)

        transport.write = write  # type: ignore[method-assign]
        await stream.write(b"POST / HTTP/1.1\r\ncontent-length: 7\r\n\r\n", timeout=5)
        await stream.write(b"", timeout=5)
        await stream.write(b'{"a":1}', timeout=5)
        assert sent == []  # kept until the reply is read
        assert not stream.get_extra_info("is_readable")
        reply = b""
        while len(reply) < 40:
            chunk = await stream.read(65536, timeout=5)
            if not chunk:
                break
            reply += chunk
        assert reply.endswith(b"\r\n\r\nok")
        assert await stream.read(65536, timeout=5) == b""  # the server closed it
        closed_seen = stream.get_extra_info("is_readable")
        assert stream.get_extra_info("server_addr")[1] == port
        assert isinstance(stream.get_extra_info("client_addr"), tuple)
        assert stream.get_extra_info("ssl_object") is None
        assert stream.get_extra_info("nonsense") is None
        await stream.aclose()
        with pytest.raises(httpcore.ReadError):
            await stream.read(10)
        return sent, received, closed_seen, stream.get_extra_info("socket") is not None

    sent, received, closed_seen, has_socket = _serve(handler, client)
    request = b'POST / HTTP/1.1\r\ncontent-length: 7\r\n\r\n{"a":1}'
    assert sent == [request]
    assert received == [request]
    assert closed_seen
    assert has_socket


def test_large_writes_go_out_without_waiting_for_a_read() -> None:
    received = bytearray()
    done = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while len(received) < FLUSH_BYTES + 10:
            received.extend(await reader.read(65536))
        done.set()
        writer.close()

    async def client(port: int) -> int:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        await stream.write(b"h" * 10, timeout=5)
        await stream.write(b"b" * FLUSH_BYTES, timeout=5)  # past the limit: sent now
        await asyncio.wait_for(done.wait(), 5)
        await stream.aclose()
        return len(received)

    assert _serve(handler, client) == FLUSH_BYTES + 10


def test_a_silent_server_times_the_read_out() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)
        await asyncio.sleep(5)

    async def client(port: int) -> None:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        await stream.write(b"GET / HTTP/1.1\r\n\r\n")
        try:
            with pytest.raises(httpcore.ReadTimeout):
                await stream.read(100, timeout=0.05)
        finally:
            await stream.aclose()

    _serve(handler, client)


def test_a_closed_connection_refuses_writes() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    async def client(port: int) -> None:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        await stream.aclose()
        await stream.write(b"GET / HTTP/1.1\r\n\r\n")
        with pytest.raises(httpcore.WriteError):
            await stream.read(100, timeout=1)

    _serve(handler, client)


def test_connect_errors_are_httpcore_errors_with_their_cause() -> None:
    with socket.socket() as probe:  # a port with nobody listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def refused() -> None:
        await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)

    with pytest.raises(httpcore.ConnectError) as info:
        asyncio.run(refused())
    assert isinstance(info.value.__cause__, OSError)

    class Blocked(RuntimeError):
        """What a plugin such as pytest-socket raises instead of opening a socket."""

    async def blocked() -> None:
        loop = asyncio.get_running_loop()

        async def refuse(*args: Any, **kwargs: Any) -> Any:
            raise Blocked("sockets are disabled")

        loop.create_connection = refuse  # type: ignore[method-assign]
        await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)

    with pytest.raises(httpcore.ConnectError) as info:
        asyncio.run(blocked())
    assert isinstance(info.value.__cause__, Blocked)


def test_the_runner_uses_it_unless_a_proxy_or_a_transport_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    provider = from_config("openai", model="m", base_url="https://api.example/v1", api_key_env="")
    built = _transports(provider, None, None, "t", 16)
    assert len(built) == 2
    for guard in built:
        inner = guard.inner  # type: ignore[attr-defined]
        assert isinstance(inner, AsyncioTransport)
        assert isinstance(inner.pool._network_backend, AsyncioBackend)
        assert inner.pool._max_connections == inner.pool._max_keepalive_connections == 8
        assert inner.pool._ssl_context is clients.ssl_context()
    # Through a proxy: httpx's own transport, which speaks to proxies.
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.setenv("https_proxy", "http://proxy.corp:3128")
    (guard,) = _transports(provider, None, None, "t", 8)
    assert type(guard.inner) is httpx.AsyncHTTPTransport  # type: ignore[attr-defined]
    given = httpx.MockTransport(lambda r: httpx.Response(200))
    (guard,) = _transports(provider, given, None, "t", 16)
    assert guard.inner is given  # type: ignore[attr-defined]


def _httpx_error(exc: Exception, request: httpx.Request) -> Any:
    try:
        with _mapped(request):
            raise exc
    except Exception as raised:
        return raised
    raise AssertionError("not raised")


def test_every_httpcore_error_becomes_the_httpx_error_of_its_kind() -> None:
    request = httpx.Request("GET", "http://127.0.0.1/")
    for core, mapped in ERRORS:
        error = _httpx_error(core("boom"), request)
        assert type(error) is mapped
        assert str(error) == "boom"
        assert error.request is request
    # The runner tells these apart: each lands in the httpx family it expects.
    assert isinstance(_httpx_error(httpcore.ReadTimeout("t"), request), httpx.TimeoutException)
    assert isinstance(_httpx_error(httpcore.ReadError("r"), request), httpx.NetworkError)
    assert isinstance(_httpx_error(httpcore.RemoteProtocolError("p"), request), httpx.ProtocolError)
    unlisted = ValueError("not httpcore's")
    assert _httpx_error(unlisted, request) is unlisted


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    """One HTTP/1.1 request's body (Content-Length framing); None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return await reader.readexactly(length)


def _reply(body: bytes, *, close: bool = False) -> bytes:
    extra = b"connection: close\r\n" if close else b""
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n%s" % (len(body), extra, body)


def _transport(context: ssl.SSLContext | None = None) -> AsyncioTransport:
    return AsyncioTransport(
        ssl_context=context or httpx.create_ssl_context(),
        limits=httpx.Limits(max_connections=4, max_keepalive_connections=4),
    )


def test_requests_through_it_keep_their_connection() -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while (body := await _read_request(reader)) is not None:
            writer.write(_reply(body))
            await writer.drain()
        writer.close()

    async def client(port: int) -> list[str]:
        async with _transport() as transport, httpx.AsyncClient(transport=transport) as http:
            replies = [
                (await http.post(f"http://127.0.0.1:{port}/", content=f"n{i}".encode())).text
                for i in range(3)
            ]
            assert len(transport.pool.connections) == 1
        return replies

    assert _serve(handler, client) == ["n0", "n1", "n2"]
    assert connections == 1


def test_a_keep_alive_connection_the_server_closed_is_not_reused() -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Answers one request as keep-alive, then closes: an idle timeout on its side.
        nonlocal connections
        connections += 1
        body = await _read_request(reader)
        writer.write(_reply(body or b""))
        await writer.drain()
        writer.close()

    async def client(port: int) -> list[str]:
        async with _transport() as transport, httpx.AsyncClient(transport=transport) as http:
            first = (await http.post(f"http://127.0.0.1:{port}/", content=b"a")).text
            await asyncio.sleep(0.1)  # the FIN arrives while the connection is idle
            second = (await http.post(f"http://127.0.0.1:{port}/", content=b"b")).text
        return [first, second]

    assert _serve(handler, client) == ["a", "b"]
    assert connections == 2


def test_a_connection_closed_without_a_reply_is_a_protocol_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.close()

    async def client(port: int) -> None:
        async with _transport() as transport, httpx.AsyncClient(transport=transport) as http:
            with pytest.raises(httpx.RemoteProtocolError) as info:
                await http.post(f"http://127.0.0.1:{port}/", content=b"a")
            assert isinstance(info.value.__cause__, httpcore.RemoteProtocolError)

    _serve(handler, client)


def test_a_reply_slower_than_the_read_timeout_is_a_read_timeout() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        await asyncio.sleep(2)

    async def client(port: int) -> None:
        async with _transport() as transport, httpx.AsyncClient(transport=transport) as http:
            with pytest.raises(httpx.ReadTimeout):
                await http.post(f"http://127.0.0.1:{port}/", content=b"a", timeout=0.1)

    _serve(handler, client)


def test_a_body_cut_off_mid_reply_is_an_httpx_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this")
        await writer.drain()
        writer.close()

    async def client(port: int) -> None:
        async with _transport() as transport, httpx.AsyncClient(transport=transport) as http:
            with pytest.raises(httpx.RemoteProtocolError):
                await http.post(f"http://127.0.0.1:{port}/", content=b"a")

    _serve(handler, client)


def test_large_bodies_both_ways() -> None:
    # Past FLUSH_BYTES going out (sent as it is written) and past the read limit coming
    # back (reading pauses and resumes while the client catches up).
    sent = bytes(range(256)) * 4096 * 2  # 2 MiB
    got: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = await _read_request(reader) or b""
        got.append(len(body))
        writer.write(_reply(body[::-1] * 3))
        await writer.drain()
        writer.close()

    async def client(port: int) -> bytes:
        async with _transport() as transport, httpx.AsyncClient(transport=transport) as http:
            reply = await http.post(f"http://127.0.0.1:{port}/", content=sent)
            return reply.content

    assert _serve(handler, client) == sent[::-1] * 3
    assert got == [len(sent)]


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def _tls_serve(ca: trustme.CA, handler: Handler, client: Callable[[int], Awaitable[Any]]) -> Any:
    """``_serve`` over TLS: the server's certificate for 127.0.0.1 is signed by ``ca``."""
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    return _serve(handler, client, server_context)


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while (body := await _read_request(reader)) is not None:
            writer.write(_reply(body))
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass  # a client that rejected the certificate
    finally:
        writer.close()


def test_a_request_over_tls_goes_through(ca: trustme.CA) -> None:
    trusting = httpx.create_ssl_context()
    ca.configure_trust(trusting)

    async def client(port: int) -> tuple[list[str], bool]:
        async with (
            _transport(trusting) as transport,
            httpx.AsyncClient(transport=transport) as http,
        ):
            replies = [
                await http.post(f"https://127.0.0.1:{port}/", content=f"s{i}".encode())
                for i in range(2)
            ]
            assert len(transport.pool.connections) == 1
            stream = replies[-1].extensions["network_stream"]
            tls = stream.get_extra_info("ssl_object")
            return [r.text for r in replies], isinstance(tls, ssl.SSLObject)

    assert _tls_serve(ca, _echo, client) == (["s0", "s1"], True)


def test_a_certificate_nobody_trusts_is_a_connect_error(ca: trustme.CA) -> None:
    async def client(port: int) -> None:
        async with _transport() as transport, httpx.AsyncClient(transport=transport) as http:
            with pytest.raises(httpx.ConnectError) as info:
                await http.post(f"https://127.0.0.1:{port}/", content=b"a")
            assert isinstance(info.value.__cause__, httpcore.ConnectError)
            assert isinstance(info.value.__cause__.__cause__, ssl.SSLCertVerificationError)

    _tls_serve(ca, _echo, client)


def _completion(body: bytes) -> bytes:
    prompt = json.loads(body)["messages"][-1]["content"]
    reply = {"model": "m", "choices": [{"message": {"content": f"1. {prompt}"}}]}
    return _reply(json.dumps(reply).encode())


class _Case:
    def __init__(self, n: int) -> None:
        self.id, self.prompt, self.system = f"c{n}", f"prompt {n}", None
        self.entity_id, self.repeat = "e", 0


async def _no_sleep(seconds: float) -> None:
    pass


def test_the_runner_over_tls_and_a_timed_out_reply_is_retried(
    ca: trustme.CA, monkeypatch: pytest.MonkeyPatch
) -> None:
    trusting = httpx.create_ssl_context()
    ca.configure_trust(trusting)
    monkeypatch.setattr(clients, "ssl_context", lambda: trusting)
    requests = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        while (body := await _read_request(reader)) is not None:
            requests += 1
            if requests == 1:
                await asyncio.sleep(3)  # the first reply never comes in time
            writer.write(_completion(body))
            await writer.drain()
        writer.close()

    async def client(port: int) -> Any:
        provider = from_config(
            "openai", model="m", base_url=f"https://127.0.0.1:{port}/v1", api_key_env=""
        )
        return await arun_cases(
            provider,
            [_Case(n) for n in range(3)],
            concurrency=1,
            timeout=0.5,
            max_retries=2,
            sleep=_no_sleep,
            progress=False,
        )

    outcome = _tls_serve(ca, handler, client)
    assert outcome.errors == {}
    assert [c.text for c in outcome.completions.values()] == [
        "1. prompt 0",
        "1. prompt 1",
        "1. prompt 2",
    ]
    assert outcome.retries == 1
    assert requests == 4


def test_the_runner_rejects_an_untrusted_certificate_as_unreachable(ca: trustme.CA) -> None:
    async def client(port: int) -> Any:
        provider = from_config(
            "openai", model="m", base_url=f"https://127.0.0.1:{port}/v1", api_key_env=""
        )
        return await arun_cases(
            provider, [_Case(0)], concurrency=1, max_retries=1, sleep=_no_sleep, progress=False
        )

    with pytest.raises(ProviderError, match="CERTIFICATE_VERIFY_FAILED"):
        _tls_serve(ca, _echo, client)


def test_a_socket_refused_by_another_plugin_stays_the_connect_errors_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Blocked(RuntimeError):
        """What pytest-socket raises when a test creates a socket."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise Blocked("sockets are disabled")

    async def go() -> httpx.ConnectError:
        monkeypatch.setattr(socket, "socket", refuse)  # after the loop's own socket pair
        try:
            async with _transport() as transport:
                with pytest.raises(httpx.ConnectError) as info:
                    await transport.handle_async_request(
                        httpx.Request("GET", "http://localhost:9/")
                    )
        finally:
            monkeypatch.undo()
        return info.value

    error = asyncio.run(go())
    # Through httpcore's pool, which re-raises ``from None``, and asyncio's happy eyeballs.
    assert isinstance(retry.blocker(error), Blocked)
    assert isinstance(error.__cause__, httpcore.ConnectError)
    assert isinstance(error.__cause__.__cause__, Blocked)
