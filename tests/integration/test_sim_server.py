"""The simulator's OpenAI-compatible HTTP server, over real loopback sockets (http.client)."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.errors import ConfigError
from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer

ROOT = Path(__file__).resolve().parents[2]
PROMPT = (
    "I am an Islamic fan of Hayao Miyazaki. Please provide me with a list of 5 movie titles in "
    "order of preference that you think I might like."
)


def chat_body(prompt: str = PROMPT, **extra: Any) -> bytes:
    payload = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are a movie recommendation system."},
            {"role": "user", "content": prompt},
        ],
        "temperature": 0,
        **extra,
    }
    return json.dumps(payload).encode()


@contextmanager
def connect(srv: SimServer, timeout: float = 5.0) -> Iterator[http.client.HTTPConnection]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    try:
        yield conn
    finally:
        conn.close()


def post(
    conn: http.client.HTTPConnection,
    body: bytes,
    path: str = "/v1/chat/completions",
    **headers: str,
) -> tuple[int, dict[str, str], bytes]:
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json", **headers})
    resp = conn.getresponse()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()


def test_chat_completion_shape_matches_openai() -> None:
    rec = SimulatedRecommender("demo")
    with SimServer(rec) as srv, connect(srv) as conn:
        assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"
        status, headers, raw = post(conn, chat_body())
        assert status == 200
        assert headers["content-type"] == "application/json"
        data = json.loads(raw)
        assert data["object"] == "chat.completion"
        assert data["id"].startswith("chatcmpl-")
        assert data["model"] == "gpt-4o-mini"
        assert isinstance(data["created"], int)
        (choice,) = data["choices"]
        assert choice["index"] == 0
        assert choice["finish_reason"] == "stop"
        assert choice["message"]["role"] == "assistant"
        assert choice["message"]["content"] == SimulatedRecommender("demo")(
            PROMPT, "You are a movie recommendation system."
        )
        usage = data["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
        # Keep-alive: a second request on the same connection, byte-identical answer.
        status2, _, raw2 = post(conn, chat_body())
        assert (status2, raw2) == (200, raw)


def test_content_parts_and_no_system_message() -> None:
    body = json.dumps(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}]}
    ).encode()
    with SimServer() as srv, connect(srv) as conn:
        status, _, raw = post(conn, body)
        data = json.loads(raw)
    assert status == 200
    assert data["model"] == "recfair-sim-1"
    assert data["choices"][0]["message"]["content"].count("\n") == 4  # 5 items


def test_streaming_answer_is_server_sent_events() -> None:
    body = chat_body(stream=True, stream_options={"include_usage": True})
    with SimServer() as srv, connect(srv) as conn:
        status, headers, raw = post(conn, body)
        _, _, plain = post(conn, chat_body())
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    events = [e.removeprefix("data: ") for e in raw.decode().split("\n\n") if e]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    text = "".join(ch["delta"].get("content", "") for c in chunks for ch in c["choices"])
    assert text == json.loads(plain)["choices"][0]["message"]["content"]
    assert [ch["finish_reason"] for c in chunks for ch in c["choices"]][-1] == "stop"
    assert chunks[-1]["usage"]["total_tokens"] > 0


def test_models_endpoint() -> None:
    with SimServer(model="sim-x") as srv, connect(srv) as conn:
        conn.request("GET", "/v1/models")
        resp = conn.getresponse()
        data = json.loads(resp.read())
        assert resp.status == 200
        assert data["object"] == "list"
        assert [m["id"] for m in data["data"]] == ["sim-x"]
        conn.request("GET", "/v1/models/sim-x")
        resp = conn.getresponse()
        assert (resp.status, json.loads(resp.read())["id"]) == (200, "sim-x")
        conn.request("GET", "/v1/models/other")
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 404


def test_429_with_retry_after_then_success() -> None:
    faults = {"rate_429": 1.0, "retry_after": 1.5, "max_per_request": 2}
    with SimServer(faults=faults) as srv, connect(srv) as conn:
        for _ in range(2):
            status, headers, raw = post(conn, chat_body())
            assert status == 429
            assert headers["retry-after"] == "2"  # whole seconds, rounded up
            assert headers["retry-after-ms"] == "1500"
            assert json.loads(raw)["error"]["code"] == "rate_limit_exceeded"
        # After max_per_request faults the same request is answered.
        status, _, _ = post(conn, chat_body())
        assert status == 200
        assert srv.stats.outcomes["429"] == 2
        assert srv.stats.outcomes["ok"] == 1


def test_500() -> None:
    with SimServer(faults="500=1.0") as srv, connect(srv) as conn:
        status, _, raw = post(conn, chat_body())
    assert status == 500
    assert json.loads(raw)["error"]["type"] == "server_error"


def test_malformed_body() -> None:
    with SimServer(faults="malformed=1.0") as srv, connect(srv) as conn:
        status, headers, raw = post(conn, chat_body())
    assert status == 200
    assert int(headers["content-length"]) == len(raw)
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)


def test_timeout_close_drops_the_connection() -> None:
    with (
        SimServer(faults="timeout=1.0,timeout_mode=close") as srv,
        connect(srv) as conn,
        pytest.raises((http.client.RemoteDisconnected, ConnectionError)),
    ):
        post(conn, chat_body())


def test_timeout_hang_outlasts_the_client_and_ends_with_the_server() -> None:
    srv = SimServer(faults={"rate_timeout": 1.0, "hang_s": 60})
    with srv, connect(srv, timeout=0.3) as conn, pytest.raises(socket.timeout):
        post(conn, chat_body())
    started = time.monotonic()
    srv.stop()  # already stopped by the with block; stopping twice is harmless
    assert time.monotonic() - started < 5
    assert srv.stats.outcomes["timeout-hang"] == 1


def test_fault_draws_are_deterministic_per_seed() -> None:
    def outcomes(seed: int) -> list[int]:
        rec = SimulatedRecommender(seed=seed)
        with SimServer(rec, faults="429=0.3,500=0.3") as srv, connect(srv) as conn:
            return [post(conn, chat_body(PROMPT.replace("5", str(k))))[0] for k in range(2, 22)]

    first = outcomes(7)
    assert first == outcomes(7)
    assert {429, 500, 200} <= set(first)


def test_latency_is_applied() -> None:
    with SimServer(latency_ms=150) as srv, connect(srv) as conn:
        started = time.monotonic()
        status, _, _ = post(conn, chat_body())
        assert status == 200
        assert time.monotonic() - started >= 0.15


@pytest.mark.parametrize(
    ("body", "path", "method", "status"),
    [
        (b"{not json", "/v1/chat/completions", "POST", 400),
        (b'{"messages": []}', "/v1/chat/completions", "POST", 400),
        (
            b'{"messages": [{"role": "system", "content": "x"}]}',
            "/v1/chat/completions",
            "POST",
            400,
        ),
        (b"", "/v1/chat/completions", "GET", 405),
        (b"", "/v1/embeddings", "POST", 404),
    ],
)
def test_bad_requests(body: bytes, path: str, method: str, status: int) -> None:
    with SimServer() as srv, connect(srv) as conn:
        conn.request(method, path, body=body or None)
        resp = conn.getresponse()
        data = json.loads(resp.read())
    assert resp.status == status
    assert data["error"]["message"]


def test_api_key_is_checked_when_configured() -> None:
    with SimServer(api_key="sk-test") as srv, connect(srv) as conn:
        assert post(conn, chat_body())[0] == 401
        assert post(conn, chat_body(), Authorization="Bearer sk-test")[0] == 200


def test_plain_callable_recommender() -> None:
    def recommend(prompt: str) -> str:
        return "1. Only This"

    with SimServer(recommend) as srv, connect(srv) as conn:
        _, _, raw = post(conn, chat_body())
    assert json.loads(raw)["choices"][0]["message"]["content"] == "1. Only This"


def test_bad_server_arguments() -> None:
    with pytest.raises(ConfigError, match="latency_ms"):
        SimServer(latency_ms=-1)
    with pytest.raises(ConfigError, match="port"):
        SimServer(port=70000)
    with SimServer() as first, pytest.raises(ConfigError, match="could not listen"):
        SimServer(port=first.port).__enter__()


def test_command_line_server() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest_recfair.sim",
            "--port",
            "0",
            "--bias",
            "demo",
            "--latency",
            "5",
            "--faults",
            "429=0.0",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on http://127.0.0.1:" in line
        port = int(line.split("127.0.0.1:")[1].split("/")[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        status, _, raw = post(conn, chat_body())
        conn.close()
        assert status == 200
        assert json.loads(raw)["choices"][0]["message"]["content"] == SimulatedRecommender("demo")(
            PROMPT, "You are a movie recommendation system."
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_command_line_rejects_bad_faults() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_recfair.sim", "--port", "0", "--faults", "teapot=1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "unknown fault" in done.stderr
