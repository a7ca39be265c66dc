"""OpenAI/Anthropic-compatible HTTP for the simulator on a small asyncio HTTP/1.1 server
(latency is an asyncio.sleep: hundreds of requests wait at once on one core). Seeded faults
stop at ``Faults.max_per_request`` per body, so a retrying client gets through; rpm/tpm are
token buckets stated in each service's rate-limit headers."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import math
import threading
import time
from asyncio import CancelledError, IncompleteReadError, LimitOverrunError
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from typing import Any

from pytest_recfair.errors import ConfigError
from pytest_recfair.sim.batch import (
    CREATED,
    BatchEngine,
    BatchOptions,
    Response,
    fail,
    json_response,
    prompt_parts,
    reply_body,
)
from pytest_recfair.sim.planted import unit
from pytest_recfair.sim.profile import Faults
from pytest_recfair.sim.recommender import SimulatedRecommender

DEFAULT_MODEL = "recfair-sim-1"
MAX_BODY = 210 * 1024 * 1024  # batch input files: OpenAI accepts up to 200 MB


def go_duration(seconds: float) -> str:
    """Seconds as OpenAI writes a reset: 20ms, 1.5s, 6m0s."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes else text


class _Bucket:
    """``burst_s`` seconds of a per-minute limit (at least one unit), full at first."""

    def __init__(self, per_minute: float, burst_s: float, at: float) -> None:
        self.per_minute, self.rate, self.at = per_minute, per_minute / 60.0, at
        self.capacity = self.level = max(1.0, self.rate * burst_s)

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + max(0.0, now - self.at) * self.rate)
        self.at = max(self.at, now)

    def short(self, amount: float) -> float:
        need = min(amount, self.capacity)  # larger than the bucket: wait until it is full
        return 0.0 if self.level >= need else (need - self.level) / self.rate

    def full_in(self) -> float:
        return max(0.0, (self.capacity - self.level) / self.rate)


class Limiter:
    """Requests- and tokens-per-minute limits of one simulated key (None: no limit)."""

    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        *,
        burst_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        for name, value in (("rpm", rpm), ("tpm", tpm), ("burst_s", burst_s)):
            if value is not None and not (isinstance(value, int | float) and value > 0):
                raise ConfigError(
                    f"SimServer({name}=...): expected a number > 0 (per minute; burst in "
                    f"seconds), got {value!r}; leave rpm/tpm None for no limit."
                )
        self.clock = clock
        now = clock()
        self.requests = _Bucket(float(rpm), burst_s, now) if rpm else None
        self.tokens = _Bucket(float(tpm), burst_s, now) if tpm else None

    def admit(self, tokens: int) -> float | None:
        """Charge one request of ``tokens``; None if admitted, else the seconds to wait."""
        now = self.clock()
        charged = [(b, n) for b, n in ((self.requests, 1.0), (self.tokens, float(tokens))) if b]
        for bucket, _ in charged:
            bucket.refill(now)
        if (wait := max((b.short(n) for b, n in charged), default=0.0)) > 0:
            return wait
        for bucket, amount in charged:
            bucket.level -= amount
        return None

    def headers(self, *, anthropic: bool = False) -> dict[str, str]:
        now = self.clock()
        out: dict[str, str] = {}
        for name, bucket in (("requests", self.requests), ("tokens", self.tokens)):
            if bucket is None:
                continue
            bucket.refill(now)
            if anthropic:  # resets as RFC 3339 times, OpenAI's as Go durations
                when = datetime.now(UTC) + timedelta(seconds=bucket.full_in())
                key, reset = "anthropic-ratelimit-{n}-{w}", when.strftime("%Y-%m-%dT%H:%M:%SZ")
            else:
                key, reset = "x-ratelimit-{w}-{n}", go_duration(bucket.full_in())
            limit, left = str(int(bucket.per_minute)), str(max(0, math.floor(bucket.level)))
            for w, v in (("limit", limit), ("remaining", left), ("reset", reset)):
                out[key.format(n=name, w=w)] = v
        return out


@dataclass
class ServerStats:
    """Counts of what the server did, by kind ("ok", "429", "500", "timeout", ...)."""

    requests: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.requests, **self.outcomes}


def _too_many(
    message: str, kind: str, after_s: int, after_ms: int, headers: dict[str, str]
) -> Response:
    response = fail(429, message, kind, "rate_limit_exceeded")
    retry = {"Retry-After": str(after_s), "retry-after-ms": str(after_ms)}
    response.headers.update({**headers, **retry})
    return response


def _stream(out: dict[str, Any], payload: dict[str, Any]) -> Response:
    """OpenAI's server-sent events: role, one chunk per line, finish, usage if asked, DONE."""
    head = {k: out[k] for k in ("id", "created", "model", "system_fingerprint")}
    head["object"] = "chat.completion.chunk"
    text: str = out["choices"][0]["message"]["content"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": piece} for piece in text.splitlines(keepends=True)]
    chunks = [
        {**head, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    options = payload.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        chunks.append({**head, "choices": [], "usage": out["usage"]})
    events = [f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks]
    events.append("data: [DONE]\n\n")
    return Response(200, "".join(events).encode("utf-8"), content_type="text/event-stream")


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
    """Serve a recommender (or any ``(prompt, system) -> str``) over loopback HTTP from a
    background thread; port 0 picks a free one; ``faults`` and ``seed`` default to the
    recommender's; ``api_key``, when set, is required as a Bearer token."""

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
        self.host, self.port, self.model, self.api_key = host, port, model, api_key
        self.latency, self.jitter = latency_ms / 1000.0, jitter_ms / 1000.0
        self.stats = ServerStats()
        self.limiter = Limiter(rpm, tpm, burst_s=burst_s) if rpm or tpm else None
        self.batches = BatchEngine(self._call, model=model, options=batch)
        self._attempts: Counter[bytes] = Counter()
        self._faulted: Counter[bytes] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._startup_error: OSError | None = None

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    async def _serve(self, announce: Callable[[str], None] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        try:
            server = await asyncio.start_server(
                self._connection, self.host, self.port, backlog=1024, limit=MAX_BODY
            )
            self.port = server.sockets[0].getsockname()[1]
        except OSError as exc:
            self._startup_error = exc
            return
        finally:
            self._ready.set()
        if announce is not None:
            announce(f"recfair-sim listening on {self.base_url} (model {self.model!r})")
        await self._stopping.wait()
        server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await server.wait_closed()

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
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._serve()), name="recfair-sim", daemon=True
        )
        self._thread.start()
        self._ready.wait(timeout=10)
        if self._startup_error is not None:
            self._thread.join(timeout=1)
            raise ConfigError(
                f"SimServer could not listen on {self.host}:{self.port}: {self._startup_error}; "
                "pick another port (0 = any free port)."
            ) from self._startup_error
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while (line := await reader.readline()).strip():
                try:
                    method, target, version = line.decode("latin-1").split()
                except ValueError:
                    break
                headers: dict[str, str] = {}
                while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = raw.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                if headers.get("transfer-encoding", "").lower() == "chunked":
                    chunks = []
                    while size := int((await reader.readline()).split(b";")[0].strip() or b"0", 16):
                        chunks.append(await reader.readexactly(size))
                        await reader.readline()
                    await reader.readline()  # the empty trailer after the last chunk
                    body = b"".join(chunks)
                else:
                    length = int(headers.get("content-length", "0") or 0)
                    if length > MAX_BODY:
                        break
                    body = await reader.readexactly(length) if length else b""
                conn = headers.get("connection", "").lower()  # HTTP/1.1 keeps alive by default
                keep_alive = conn == "keep-alive" or (version == "HTTP/1.1" and conn != "close")
                path = target.split("?", 1)[0]
                response = await self._dispatch(method.upper(), path, headers, body)
                if response is None:  # a "close" timeout: drop the connection unanswered
                    break
                head = [
                    f"HTTP/1.1 {response.status} {HTTPStatus(response.status).phrase}",
                    f"Content-Type: {response.content_type}",
                    f"Content-Length: {len(response.body)}",
                    f"Connection: {'keep-alive' if keep_alive else 'close'}",
                    "Server: recfair-sim",
                    *(f"{k}: {v}" for k, v in response.headers.items()),
                ]
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + response.body)
                await writer.drain()
                if not keep_alive:
                    break
        except (ConnectionError, IncompleteReadError, LimitOverrunError, CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _dispatch(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> Response | None:
        self.stats.requests += 1
        path = path.rstrip("/")
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            self.stats.outcomes["401"] += 1
            return fail(401, "Incorrect API key provided.", code="invalid_api_key")
        if path.startswith(("/v1/files", "/v1/batches", "/v1/messages/batches")):
            self.stats.outcomes["batch"] += 1
            return self.batches.handle(method, path, headers, body)
        card = {
            "id": self.model,
            "object": "model",
            "created": CREATED,
            "owned_by": "pytest-recfair",
        }
        if path.startswith(("/v1/models/", "/models/")):
            name = path.rsplit("/", 1)[1]
            if name != self.model:
                return fail(404, f"The model '{name}' does not exist.", code="model_not_found")
            return json_response(200, card)
        listing = path in ("/v1/models", "/models")
        anthropic = path == "/v1/messages"  # Anthropic's Messages API (no streaming)
        if not (listing or anthropic or path in ("/v1/chat/completions", "/chat/completions")):
            self.stats.outcomes["404"] += 1
            return fail(
                404,
                f"Unknown path {path!r}; the simulator serves /v1/chat/completions, "
                "/v1/messages, the batch endpoints and /v1/models.",
            )
        if method != (allowed := "GET" if listing else "POST"):
            return fail(405, f"{method} is not allowed on {path}; use {allowed}.")
        if listing:
            self.stats.outcomes["models"] += 1
            return json_response(200, {"object": "list", "data": [card]})
        return await self._chat(body, anthropic=anthropic)

    async def _chat(self, body: bytes, *, anthropic: bool) -> Response | None:
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        system, users = prompt_parts(payload) if isinstance(payload, dict) else (None, [])
        if not users:  # not an object, no list of messages, or no user message in it
            why = "The request body is not a JSON object."
            if isinstance(payload, dict):
                messages = payload.get("messages")
                why = "No message with role 'user' found."
                if not isinstance(messages, list) or not messages:
                    why = "'messages' must be a non-empty list of {role, content} objects."
            self.stats.outcomes["400"] += 1
            return fail(400, why)
        arrived = time.monotonic()
        fault = self._draw_fault(body)
        delay = self.latency
        if self.jitter:  # deterministic per attempt at this body
            delay += (2 * unit(self.seed, "jitter", body, self._attempts[body]) - 1) * self.jitter
        if fault in ("timeout", "429", "500"):
            return await self._fault(fault, delay)
        try:
            text = self._call(users[-1], system)
        except Exception as exc:  # a user callable failed: report it like a provider would
            self.stats.outcomes["500"] += 1
            return fail(500, f"recommender raised {type(exc).__name__}: {exc}", "server_error")
        out = reply_body(body, payload, text, self.model, anthropic=anthropic)
        limit_headers: dict[str, str] = {}
        if self.limiter is not None:
            usage = out["usage"]
            tokens = usage.get("total_tokens") or usage["input_tokens"] + usage["output_tokens"]
            wait = self.limiter.admit(int(tokens))
            limit_headers = self.limiter.headers(anthropic=anthropic)
            if wait is not None:
                self.stats.outcomes["429-limit"] += 1
                short = self.limiter.tokens and self.limiter.tokens.short(tokens)
                what = "tokens" if short else "requests"
                message = f"Rate limit reached for {what} per minute (simulated)."
                retry = (math.ceil(wait), math.ceil(wait * 1000))
                return _too_many(message, what, *retry, limit_headers)
        # the wait covers the rest of the latency: answered `latency` after arrival
        remaining = delay - (time.monotonic() - arrived)
        if remaining > 0:
            await asyncio.sleep(remaining)
        stream = payload.get("stream") and not anthropic
        response = _stream(out, payload) if stream else json_response(200, out)
        response.headers.update(limit_headers)
        self.stats.outcomes["malformed" if fault == "malformed" else "ok"] += 1
        if fault == "malformed":  # a 200 cut short
            response.body = response.body[: max(1, len(response.body) // 2)]
        return response

    async def _fault(self, fault: str, delay: float) -> Response | None:
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
            message = "The server had an error while processing your request (simulated)."
            return fail(500, message, "server_error")
        wait = self.faults.retry_after
        message = "Rate limit reached for requests (simulated)."
        return _too_many(message, "requests", max(0, math.ceil(wait)), int(wait * 1000), {})

    def _draw_fault(self, body: bytes) -> str | None:
        attempt = self._attempts[body]
        self._attempts[body] += 1
        f, done = self.faults, self._faulted[body]
        if not f.http_rate or (f.max_per_request is not None and done >= f.max_per_request):
            return None
        u = unit(self.seed, "http-fault", body, attempt)
        rates = (f.rate_429, f.rate_500, f.rate_timeout, f.rate_malformed)
        for name, rate in zip(("429", "500", "timeout", "malformed"), rates, strict=True):
            if u < rate:
                self._faulted[body] += 1
                return name
            u -= rate
        return None
