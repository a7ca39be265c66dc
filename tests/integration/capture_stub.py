"""A loopback server that answers like OpenAI, Anthropic or Gemini (the stub formats of
``llm_stubs``) and keeps every request it received: path, headers, decoded JSON body.

Not a test module. ``delay`` makes each reply wait; ``status`` answers every request with
that HTTP status instead (500: a failing service); ``pad`` appends that many characters
of prose to every reply; ``headers`` go with every reply, and ``throttle`` (429 headers)
answers the first request 429 with them.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from pytest_recfair.sim.recommender import SimulatedRecommender
from tests.integration.llm_stubs import _prompt, _reply


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Capture:
    delay: float = 0.0
    status: int = 200
    pad: int = 0  # characters of prose appended to every reply (a runaway generation)
    headers: dict[str, str] = field(default_factory=dict)
    throttle: dict[str, str] | None = None
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _kind(path: str) -> str:
    if path.endswith("/chat/completions"):
        return "openai"
    if path.endswith("/v1/messages"):
        return "anthropic"
    return "gemini" if ":generateContent" in path else ""


def _handler(cap: Capture) -> type[BaseHTTPRequestHandler]:
    sim = SimulatedRecommender("demo", seed=0)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            body = json.loads(raw)
            with cap.lock:
                cap.seen.append(Seen(path, {k.lower(): v for k, v in self.headers.items()}, body))
                throttle, cap.throttle = cap.throttle, None
            if throttle is not None:
                return self._send(429, {"error": {"message": "slow down"}}, throttle)
            if cap.delay:
                time.sleep(cap.delay)
            kind = _kind(path)
            if cap.status != 200 or not kind:
                return self._send(cap.status if kind else 404, {"error": {"message": "no"}})
            system, prompt = _prompt(kind, body)
            model = path.split("/models/")[-1].split(":")[0] if kind == "gemini" else body["model"]
            text = sim(prompt, system or None) + "\n" + "and more words " * (cap.pad // 15)
            self._send(200, _reply(kind, str(model), text))

        def _send(
            self, status: int, payload: object, headers: dict[str, str] | None = None
        ) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            for name, value in (headers or cap.headers).items():
                self.send_header(name, value)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def capture_server(**kwargs: Any) -> Iterator[Capture]:
    cap = Capture(**kwargs)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(cap))
    server.daemon_threads = True
    cap.port = int(server.server_port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield cap
    finally:
        server.shutdown()
        server.server_close()
