"""A small HTTP server on loopback speaking the OpenAI, Anthropic and Gemini wire formats
(as recorded in /work/shared/real-cassettes), answering with the simulated recommender.

It can leak the API key it receives back into everything a careless client might print
or store: the reply's ``model`` field, response headers, cookies, the reply text, and the
error body of failed attempts (with the request URL, ``?key=`` included). Tests use it to
check that the key never leaves the process.

Run standalone (for pytester subprocesses):  python llm_stubs.py PORT [--leak] [--fail-every N]
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pytest_recfair.sim.recommender import SimulatedRecommender

_GEMINI = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):generateContent$")


class _State:
    def __init__(
        self, leak: bool, fail_every: int, dead_every: int = 0, garbage: bool = False
    ) -> None:
        self.leak = leak
        self.garbage = garbage  # dead prompts get a 200 with a body that is not JSON
        self.fail_every = fail_every
        self.dead_every = dead_every
        self.sim = SimulatedRecommender("demo", seed=0)
        self.lock = threading.Lock()
        self.seen: dict[str, int] = {}
        self.order: dict[str, int] = {}  # prompt -> its number, in order of first arrival
        self.requests = 0


def _prompt(kind: str, body: dict[str, Any]) -> tuple[str, str]:
    if kind == "gemini":
        text = body["contents"][-1]["parts"][0]["text"]
        system = ((body.get("systemInstruction") or {}).get("parts") or [{}])[0].get("text", "")
        return system, text
    content = body["messages"][-1]["content"]
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content)
    system = body.get("system") or ""
    if kind == "openai":
        system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
    return str(system), str(content)


def _key(kind: str, handler: BaseHTTPRequestHandler) -> str:
    if kind == "openai":
        return (handler.headers.get("authorization") or "").removeprefix("Bearer ").strip()
    if kind == "anthropic":
        return handler.headers.get("x-api-key") or ""
    query = parse_qs(urlsplit(handler.path).query)
    return handler.headers.get("x-goog-api-key") or (query.get("key") or [""])[0]


def _reply(kind: str, model: str, text: str) -> dict[str, Any]:
    usage_in, usage_out = 40, 120
    if kind == "openai":
        return {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": 1700000000,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": usage_in,
                "completion_tokens": usage_out,
                "total_tokens": usage_in + usage_out,
            },
        }
    if kind == "anthropic":
        return {
            "id": "msg_stub",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": usage_in, "output_tokens": usage_out},
        }
    return {
        "candidates": [
            {"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP"}
        ],
        "usageMetadata": {
            "promptTokenCount": usage_in,
            "candidatesTokenCount": usage_out,
            "totalTokenCount": usage_in + usage_out,
        },
        "modelVersion": model,
    }


def make_handler(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            gem = _GEMINI.match(path)
            kind = (
                "openai"
                if path.endswith("/chat/completions")
                else "anthropic"
                if path.endswith("/v1/messages")
                else "gemini"
                if gem
                else ""
            )
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            if not kind:
                return self._send(404, {"error": {"message": f"no route {path}"}}, {})
            body = json.loads(raw)
            key = _key(kind, self)
            model = gem.group("model") if gem else str(body.get("model"))
            system, prompt = _prompt(kind, body)
            with state.lock:
                state.requests += 1
                tries = state.seen[prompt] = state.seen.get(prompt, 0) + 1
                text = state.sim(prompt, system or None)
                number = state.order.setdefault(prompt, len(state.order) + 1)
            leak = key if state.leak else ""
            headers = {"x-request-id": "req-stub"}
            if leak:
                headers["x-echo-key"] = leak
                headers["set-cookie"] = f"session={leak}; Path=/"
                model = f"{model}-{leak}"
                text = f"{text}\n\nAccount {leak}"
            dead = state.dead_every and number % state.dead_every == 0
            if dead or (state.fail_every and tries == 1 and number % state.fail_every == 0):
                message = (
                    f"internal error for key {leak} at http://{self.headers['host']}{self.path}"
                )
                if kind == "gemini":
                    message += f"?key={leak}"
                if dead and state.garbage:
                    return self._raw(200, f"<html>proxy error {message}</html>".encode())
                return self._send(500, {"error": {"message": message, "key": leak}}, headers)
            return self._send(200, _reply(kind, model, text), headers)

        def _raw(self, status: int, data: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _send(self, status: int, payload: object, headers: dict[str, str]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler


def serve(
    port: int,
    *,
    leak: bool = False,
    fail_every: int = 0,
    dead_every: int = 0,
    garbage: bool = False,
) -> ThreadingHTTPServer:
    """Start serving in a daemon thread; ``server.server_port`` is the port.

    Every ``fail_every``-th new prompt fails its first attempt (HTTP 500); every
    ``dead_every``-th fails every attempt (HTTP 500, or with ``garbage`` a 200 whose body
    is not JSON)."""
    state = _State(leak, fail_every, dead_every, garbage)
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(state))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--leak", action="store_true")
    ap.add_argument("--fail-every", type=int, default=0)
    ap.add_argument("--dead-every", type=int, default=0)
    args = ap.parse_args()
    server = ThreadingHTTPServer(
        ("127.0.0.1", args.port), make_handler(_State(args.leak, args.fail_every, args.dead_every))
    )
    server.daemon_threads = True
    print(f"listening on {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
