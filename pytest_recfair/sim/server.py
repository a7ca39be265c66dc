"""An OpenAI-compatible HTTP front end for the simulated recommender (stdlib only).

``POST /v1/chat/completions`` answers with the recommender's reply in the OpenAI response
shape (as server-sent events with ``stream: true``); ``GET /v1/models`` lists the one
model; the OpenAI Batch API and Anthropic Message Batches endpoints are served by
:mod:`pytest_recfair.sim.batch` (``batch=BatchOptions(delay_s=...)``). The server is a
small asyncio HTTP/1.1 server (keep-alive, Content-Length or chunked request bodies):
latency is an ``asyncio.sleep``, so hundreds of requests can wait at once on one core,
and faults are drawn per request from the seed:

- 429 with ``Retry-After`` (seconds, rounded up) and ``retry-after-ms``,
- 500 with an OpenAI-style error body,
- timeouts: ``hang`` (no answer until ``hang_s`` passes or the server stops) or ``close``
  (the connection is dropped without an answer),
- malformed: a 200 whose body is cut short.

With ``rpm`` / ``tpm`` the server also keeps requests- and tokens-per-minute limits
(:mod:`pytest_recfair.sim.wire`): every chat reply states them in OpenAI's (or, on
``/v1/messages``, Anthropic's) rate-limit headers, and a request past them gets a 429
with ``Retry-After`` (counted as ``"429-limit"``, apart from the drawn ``"429"`` faults).

After ``Faults.max_per_request`` faults for the same request body the server answers it
normally, so a client that retries always gets through. Use :class:`SimServer` as a
context manager in tests (port 0 picks a free port) or run ``python -m pytest_recfair.sim``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from pytest_recfair.errors import ConfigError
from pytest_recfair.sim.batch import BatchEngine, BatchOptions
from pytest_recfair.sim.catalogue import stable_seed
from pytest_recfair.sim.profile import Faults
from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.wire import (
    CREATED,
    Limiter,
    anthropic_message,
    chat_completion,
    prompt_parts,
)

__all__ = ["DEFAULT_MODEL", "ServerStats", "SimServer"]

DEFAULT_MODEL = "recfair-sim-1"
MAX_BODY = 210 * 1024 * 1024  # batch input files: OpenAI accepts up to 200 MB
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
}


@dataclass
class ServerStats:
    """Counts of what the server did, by kind ("ok", "429", "500", "timeout", ...)."""

    requests: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.requests, **self.outcomes}


class _Response:
    __slots__ = ("body", "close", "content_type", "headers", "status")

    def __init__(
        self,
        status: int,
        body: bytes,
        headers: dict[str, str] | None = None,
        close: bool = False,
        content_type: str = "application/json",
    ) -> None:
        self.status = status
        self.body = body
        self.headers = headers or {}
        self.close = close
        self.content_type = content_type


def _json(status: int, payload: object, headers: dict[str, str] | None = None) -> _Response:
    return _Response(status, json.dumps(payload, ensure_ascii=False).encode("utf-8"), headers)


def _error(status: int, message: str, kind: str, code: str | None = None) -> _Response:
    return _json(status, {"error": {"message": message, "type": kind, "param": None, "code": code}})


def _include_usage(payload: dict[str, Any]) -> bool:
    options = payload.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def _stream(out: dict[str, Any], *, include_usage: bool) -> _Response:
    """The completion as OpenAI's server-sent events: a role chunk, one chunk per line of
    the reply, a finish chunk, the usage chunk if asked for, then ``[DONE]``."""
    head = {k: out[k] for k in ("id", "created", "model", "system_fingerprint")}
    head["object"] = "chat.completion.chunk"
    text: str = out["choices"][0]["message"]["content"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": piece} for piece in text.splitlines(keepends=True)]
    chunks = [
        {**head, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if include_usage:
        chunks.append({**head, "choices": [], "usage": out["usage"]})
    events = [f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks]
    events.append("data: [DONE]\n\n")
    return _Response(200, "".join(events).encode("utf-8"), content_type="text/event-stream")


def _adapt(recommender: Callable[..., str]) -> Callable[[str, str | None], str]:
    """Call ``recommender(prompt, system)`` if it takes two arguments, else ``(prompt)``."""
    try:
        params = inspect.signature(recommender).parameters.values()
    except (TypeError, ValueError):
        return recommender
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params):
        return recommender
    return lambda prompt, system: recommender(prompt)


class SimServer:
    """Serve a recommender over loopback HTTP from a background thread.

    >>> with SimServer(SimulatedRecommender(), latency_ms=200) as srv:  # doctest: +SKIP
    ...     srv.base_url   # "http://127.0.0.1:54321/v1"

    Args:
        recommender: a :class:`SimulatedRecommender` or any ``(prompt, system) -> str``.
        host, port: where to listen; port 0 picks a free port (see :attr:`port`).
        latency_ms, jitter_ms: delay before each chat answer (uniform +- jitter).
        faults: HTTP faults; default: the recommender's own fault plan.
        seed: seeds the fault draws; default: the recommender's seed.
        model: the model id reported by /v1/models and echoed when a request names none.
        api_key: if set, requests must send ``Authorization: Bearer <api_key>``.
        batch: how the batch endpoints behave (completion delay, per-line errors).
        rpm, tpm: requests / tokens per minute this key allows (None: no limit);
            burst_s: seconds of the limit a bucket holds.
    """

    def __init__(
        self,
        recommender: SimulatedRecommender | Callable[..., str] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency_ms: float = 0.0,
        jitter_ms: float = 0.0,
        faults: Faults | dict[str, Any] | str | None = None,
        seed: int | None = None,
        model: str = DEFAULT_MODEL,
        api_key: str | None = None,
        batch: BatchOptions | None = None,
        rpm: float | None = None,
        tpm: float | None = None,
        burst_s: float = 1.0,
    ) -> None:
        if latency_ms < 0 or jitter_ms < 0 or (jitter_ms > latency_ms and jitter_ms):
            raise ConfigError(
                f"SimServer: latency_ms and jitter_ms must be >= 0 with jitter <= latency, "
                f"got latency_ms={latency_ms!r}, jitter_ms={jitter_ms!r}."
            )
        if not 0 <= port <= 65535:
            raise ConfigError(
                f"SimServer(port=...) must be in 0..65535 (0 = any free), got {port!r}."
            )
        self.recommender = recommender if recommender is not None else SimulatedRecommender()
        self._call = _adapt(self.recommender)
        own = getattr(self.recommender, "faults", None)
        self.faults = Faults.parse(faults) if faults is not None else own or Faults()
        self.seed = seed if seed is not None else getattr(self.recommender, "seed", 0)
        self.host = host
        self.port = port
        self.latency = latency_ms / 1000.0
        self.jitter = jitter_ms / 1000.0
        self.model = model
        self.api_key = api_key
        self.stats = ServerStats()
        self.limiter = Limiter(rpm, tpm, burst_s=burst_s) if rpm or tpm else None
        self.batches = BatchEngine(
            lambda prompt, system: self._call(prompt, system), model=model, options=batch
        )
        self._attempts: Counter[bytes] = Counter()
        self._faulted: Counter[bytes] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._stopping: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, e.g. ``http://127.0.0.1:54321/v1``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    async def start(self) -> None:
        """Bind and start accepting (inside a running event loop)."""
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._server = await asyncio.start_server(
            self._connection, self.host, self.port, backlog=1024, limit=MAX_BODY
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def serve_until_stopped(self) -> None:
        """Serve until :meth:`stop` is called (from any thread)."""
        if self._server is None:
            await self.start()
        assert self._stopping is not None
        assert self._server is not None
        await self._stopping.wait()
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def stop(self) -> None:
        """Stop serving; pending hangs end and open connections are closed."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stopping.set)
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> SimServer:
        self._thread = threading.Thread(target=self._run, name="recfair-sim", daemon=True)
        self._thread.start()
        self._ready.wait(timeout=10)
        if self._startup_error is not None:
            self._thread.join(timeout=1)
            raise ConfigError(
                f"SimServer could not listen on {self.host}:{self.port}: {self._startup_error}; "
                "pick another port (0 = any free port)."
            ) from self._startup_error
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        async def main() -> None:
            try:
                await self.start()
            except OSError as exc:
                self._startup_error = exc
                return
            finally:
                self._ready.set()
            await self.serve_until_stopped()

        asyncio.run(main())

    # -- HTTP --------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while True:
                request = await self._read_request(reader)
                if request is None:
                    break
                method, path, headers, body, keep_alive = request
                response = await self._dispatch(method, path, headers, body)
                if response is None:  # a "close" timeout: drop the connection unanswered
                    break
                keep_alive = keep_alive and not response.close
                self._write(writer, response, keep_alive)
                await writer.drain()
                if not keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _read_request(
        self, reader: asyncio.StreamReader
    ) -> tuple[str, str, dict[str, str], bytes, bool] | None:
        line = await reader.readline()
        if not line.strip():
            return None
        try:
            method, target, version = line.decode("latin-1").split()
        except ValueError:
            return None
        headers: dict[str, str] = {}
        while True:
            raw = await reader.readline()
            if raw in (b"\r\n", b"\n", b""):
                break
            name, _, value = raw.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    await reader.readline()
                    break
                chunks.append(await reader.readexactly(size))
                await reader.readline()
            body = b"".join(chunks)
        else:
            length = int(headers.get("content-length", "0") or 0)
            if length > MAX_BODY:
                return None
            body = await reader.readexactly(length) if length else b""
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        return method.upper(), target.split("?", 1)[0], headers, body, keep_alive

    def _write(self, writer: asyncio.StreamWriter, response: _Response, keep_alive: bool) -> None:
        head = [
            f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Unknown')}",
            f"Content-Type: {response.content_type}",
            f"Content-Length: {len(response.body)}",
            f"Connection: {'keep-alive' if keep_alive else 'close'}",
            "Server: recfair-sim",
            *(f"{k}: {v}" for k, v in response.headers.items()),
        ]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + response.body)

    async def _dispatch(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> _Response | None:
        self.stats.requests += 1
        path = path.rstrip("/")
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            self.stats.outcomes["401"] += 1
            return _error(
                401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key"
            )
        if path in ("/v1/models", "/models"):
            if method != "GET":
                return _error(
                    405, f"{method} is not allowed on {path}; use GET.", "invalid_request_error"
                )
            self.stats.outcomes["models"] += 1
            return _json(200, {"object": "list", "data": [self._model_card()]})
        if path.startswith(("/v1/models/", "/models/")):
            name = path.rsplit("/", 1)[1]
            if name != self.model:
                return _error(
                    404,
                    f"The model '{name}' does not exist.",
                    "invalid_request_error",
                    "model_not_found",
                )
            return _json(200, self._model_card())
        if BatchEngine.handles(path):
            self.stats.outcomes["batch"] += 1
            status, payload, content_type = self.batches.handle(method, path, headers, body)
            return _Response(status, payload, content_type=content_type)
        anthropic = path == "/v1/messages"  # Anthropic's Messages API (no streaming)
        if path not in ("/v1/chat/completions", "/chat/completions") and not anthropic:
            self.stats.outcomes["404"] += 1
            return _error(
                404,
                f"Unknown path {path!r}; the simulator serves /v1/chat/completions, "
                "/v1/messages, the batch endpoints and /v1/models.",
                "invalid_request_error",
            )
        if method != "POST":
            return _error(
                405, f"{method} is not allowed on {path}; use POST.", "invalid_request_error"
            )
        return await self._chat(body, anthropic=anthropic)

    def _model_card(self) -> dict[str, Any]:
        return {
            "id": self.model,
            "object": "model",
            "created": CREATED,
            "owned_by": "pytest-recfair",
        }

    async def _chat(self, body: bytes, *, anthropic: bool = False) -> _Response | None:
        parsed = self._parse_chat(body)
        if isinstance(parsed, _Response):
            return parsed
        payload, system, users = parsed
        arrived = time.monotonic()
        fault = self._draw_fault(body)
        delay = self._delay(body)
        if fault in ("timeout", "429", "500"):
            return await self._fault(fault, delay)
        try:
            text = self._call(users[-1], system)
        except Exception as exc:  # a user callable failed: report it like a provider would
            self.stats.outcomes["500"] += 1
            return _error(500, f"recommender raised {type(exc).__name__}: {exc}", "server_error")
        shape = anthropic_message if anthropic else chat_completion
        out = shape(body, payload, text, self.model)
        limited, limit_headers = self._limit(out, anthropic)
        if limited is not None:
            return limited
        # The reply is computed first and the wait covers the rest of the latency, so the
        # server's own work does not add to it (a request answers `latency` after arrival).
        remaining = delay - (time.monotonic() - arrived)
        if remaining > 0:
            await asyncio.sleep(remaining)
        if payload.get("stream") and not anthropic:
            response = _stream(out, include_usage=_include_usage(payload))
        else:
            response = _json(200, out)
        response.headers.update(limit_headers)
        if fault == "malformed":
            self.stats.outcomes["malformed"] += 1
            response.body = response.body[: max(1, len(response.body) // 2)]
            return response
        self.stats.outcomes["ok"] += 1
        return response

    def _limit(
        self, out: dict[str, Any], anthropic: bool
    ) -> tuple[_Response | None, dict[str, str]]:
        """(a 429 if this reply is past the limits, the limit headers for the reply)."""
        if self.limiter is None:
            return None, {}
        usage = out["usage"]
        tokens = usage.get("total_tokens") or usage["input_tokens"] + usage["output_tokens"]
        wait = self.limiter.admit(int(tokens))
        headers = self.limiter.headers(anthropic=anthropic)
        if wait is None:
            return None, headers
        self.stats.outcomes["429-limit"] += 1
        what = "tokens" if self.limiter.tokens and self.limiter.tokens.short(tokens) else "requests"
        response = _error(
            429,
            f"Rate limit reached for {what} per minute (simulated).",
            what,
            "rate_limit_exceeded",
        )
        response.headers.update(
            {
                **headers,
                "Retry-After": str(math.ceil(wait)),
                "retry-after-ms": str(math.ceil(wait * 1000)),
            }
        )
        return response, headers

    def _parse_chat(self, body: bytes) -> _Response | tuple[dict[str, Any], Any, list[Any]]:
        """The request's payload, system text and user messages, or a 400 response."""
        try:
            payload = json.loads(body)
            if not isinstance(payload, dict):
                raise TypeError("not an object")
        except (ValueError, TypeError):
            self.stats.outcomes["400"] += 1
            return _error(400, "The request body is not a JSON object.", "invalid_request_error")
        messages = payload.get("messages")
        if not isinstance(messages, list) or not messages:
            self.stats.outcomes["400"] += 1
            return _error(
                400,
                "'messages' must be a non-empty list of {role, content} objects.",
                "invalid_request_error",
            )
        system, users = prompt_parts(payload)
        if not users:
            self.stats.outcomes["400"] += 1
            return _error(400, "No message with role 'user' found.", "invalid_request_error")
        return payload, system, users

    def _delay(self, body: bytes) -> float:
        """Latency of this attempt at ``body``: fixed, plus deterministic jitter."""
        if not self.jitter:
            return self.latency
        rng_unit = stable_seed(self.seed, "jitter", body, self._attempts[body]) / 2.0**64
        return self.latency + (2 * rng_unit - 1) * self.jitter

    async def _fault(self, fault: str, delay: float) -> _Response | None:
        """A simulated transport fault: a dropped or hung connection, a 429 or a 500."""
        if fault == "timeout":
            if self.faults.timeout_mode == "close":
                self.stats.outcomes["timeout-close"] += 1
                await asyncio.sleep(delay)
                return None
            self.stats.outcomes["timeout-hang"] += 1
            assert self._stopping is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.faults.hang_s)
            return None
        await asyncio.sleep(delay)
        self.stats.outcomes[fault] += 1
        if fault == "500":
            return _error(
                500,
                "The server had an error while processing your request (simulated).",
                "server_error",
            )
        wait = self.faults.retry_after
        response = _error(
            429, "Rate limit reached for requests (simulated).", "requests", "rate_limit_exceeded"
        )
        response.headers.update(
            {"Retry-After": str(max(0, math.ceil(wait))), "retry-after-ms": str(int(wait * 1000))}
        )
        return response

    def _draw_fault(self, body: bytes) -> str | None:
        """Which fault (if any) this attempt at ``body`` gets; deterministic per attempt."""
        attempt = self._attempts[body]
        self._attempts[body] += 1
        f = self.faults
        if not f.http_rate:
            return None
        if f.max_per_request is not None and self._faulted[body] >= f.max_per_request:
            return None
        u = stable_seed(self.seed, "http-fault", body, attempt) / 2.0**64
        for name, rate in (
            ("429", f.rate_429),
            ("500", f.rate_500),
            ("timeout", f.rate_timeout),
            ("malformed", f.rate_malformed),
        ):
            if u < rate:
                self._faulted[body] += 1
                return name
            u -= rate
        return None


def run_forever(server: SimServer, *, announce: Callable[[str], None] = print) -> None:
    """Serve in the foreground until interrupted (the CLI's main loop)."""

    async def main() -> None:
        await server.start()
        announce(f"recfair-sim listening on {server.base_url} (model {server.model!r})")
        await server.serve_until_stopped()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
