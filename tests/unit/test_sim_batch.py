"""The simulator's batch engine (pytest_recfair.sim.batch), driven with a fake clock."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_recfair.errors import ConfigError
from pytest_recfair.sim.batch import BatchEngine, BatchOptions

BOUNDARY = "xyz"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def engine(clock: Clock, **options: Any) -> BatchEngine:
    return BatchEngine(
        lambda prompt, system: f"1. {prompt} ({system})",
        model="sim",
        options=BatchOptions(**options),
        clock=clock,
    )


def call(e: BatchEngine, method: str, path: str, body: object = b"", **headers: str) -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    reply = e.handle(method, path, {"host": "sim:1", **headers}, raw)
    status, data, ctype = reply.status, reply.body, reply.content_type
    if ctype == "application/json":
        return status, json.loads(data)
    return status, data


def upload(e: BatchEngine, lines: list[dict[str, Any]]) -> str:
    jsonl = "".join(json.dumps(x) + "\n" for x in lines).encode()
    body = (
        (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n'
            "Content-Type: application/jsonl\r\n\r\n"
        ).encode()
        + jsonl
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )
    status, obj = call(
        e,
        "POST",
        "/v1/files",
        body,
        **{"content-type": f"multipart/form-data; boundary={BOUNDARY}"},
    )
    assert status == 200, obj
    assert obj["object"] == "file"
    assert obj["bytes"] == len(jsonl)
    assert obj["purpose"] == "batch"
    return str(obj["id"])


def chat_line(i: int) -> dict[str, Any]:
    body = {
        "model": "m",
        "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": f"p{i}"}],
    }
    return {"custom_id": f"c{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}


def test_openai_batch_lifecycle_and_files() -> None:
    clock = Clock()
    e = engine(clock, delay_s=10.0, error_ids=frozenset({"c2"}))
    file_id = upload(e, [chat_line(i) for i in range(4)])
    status, batch = call(
        e,
        "POST",
        "/v1/batches",
        {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"},
    )
    assert status == 200
    assert batch["status"] == "validating"
    assert batch["object"] == "batch"
    assert batch["request_counts"] == {"total": 4, "completed": 0, "failed": 0}
    clock.now += 5
    _, batch = call(e, "GET", f"/v1/batches/{batch['id']}")
    assert batch["status"] == "in_progress"
    assert batch["request_counts"]["completed"] == 2
    assert batch["output_file_id"] is None
    clock.now += 5
    _, batch = call(e, "GET", f"/v1/batches/{batch['id']}")
    assert batch["status"] == "completed"
    assert batch["request_counts"] == {"total": 4, "completed": 3, "failed": 1}
    _, out = call(e, "GET", f"/v1/files/{batch['output_file_id']}/content")
    lines = [json.loads(x) for x in out.decode().splitlines()]
    assert [x["custom_id"] for x in lines] == ["c0", "c1", "c3"]
    first = lines[0]
    assert first["error"] is None
    assert first["response"]["status_code"] == 200
    assert first["response"]["body"]["choices"][0]["message"]["content"] == "1. p0 (S)"
    _, err = call(e, "GET", f"/v1/files/{batch['error_file_id']}/content")
    (line,) = [json.loads(x) for x in err.decode().splitlines()]
    assert line["custom_id"] == "c2"
    assert line["response"]["status_code"] == 500
    assert "error" in line["response"]["body"]


def test_openai_invalid_input_fails_the_batch_and_cancel() -> None:
    clock = Clock()
    e = engine(clock, delay_s=5.0)
    bad = {**chat_line(1), "url": "/v1/embeddings"}
    file_id = upload(e, [chat_line(0), bad])
    req = {"input_file_id": file_id, "endpoint": "/v1/chat/completions"}
    _, batch = call(e, "POST", "/v1/batches", req)
    assert batch["status"] == "failed"
    assert batch["errors"]["data"][0]["line"] == 2
    good = upload(e, [chat_line(0)])
    _, batch = call(e, "POST", "/v1/batches", {**req, "input_file_id": good})
    _, batch = call(e, "POST", f"/v1/batches/{batch['id']}/cancel")
    assert batch["status"] == "cancelled"
    assert call(e, "GET", "/v1/batches/batch_nope")[0] == 404
    assert call(e, "POST", "/v1/batches", {**req, "endpoint": "/v1/x"})[0] == 400


def test_anthropic_message_batch() -> None:
    clock = Clock()
    e = engine(clock, delay_s=2.0, error_ids=frozenset({"b"}))
    params = {
        "model": "claude",
        "max_tokens": 50,
        "system": "S",
        "messages": [{"role": "user", "content": "p"}],
    }
    reqs = [{"custom_id": c, "params": params} for c in ("a", "b")]
    status, batch = call(e, "POST", "/v1/messages/batches", {"requests": reqs})
    assert status == 200
    assert batch["type"] == "message_batch"
    assert batch["processing_status"] == "in_progress"
    assert batch["results_url"] is None
    assert call(e, "GET", f"/v1/messages/batches/{batch['id']}/results")[0] == 400
    clock.now += 2
    _, batch = call(e, "GET", f"/v1/messages/batches/{batch['id']}")
    assert batch["processing_status"] == "ended"
    assert batch["request_counts"] == {
        "processing": 0,
        "succeeded": 1,
        "errored": 1,
        "canceled": 0,
        "expired": 0,
    }
    assert batch["results_url"] == f"http://sim:1/v1/messages/batches/{batch['id']}/results"
    _, raw = call(e, "GET", f"/v1/messages/batches/{batch['id']}/results")
    a, b = (json.loads(x) for x in raw.decode().splitlines())
    assert a["result"]["type"] == "succeeded"
    assert a["result"]["message"]["content"] == [{"type": "text", "text": "1. p (S)"}]
    assert b["result"]["type"] == "errored"
    assert b["result"]["error"]["error"]["type"] == "api_error"
    bad = [{"custom_id": "has space", "params": params}]
    assert call(e, "POST", "/v1/messages/batches", {"requests": bad})[0] == 400


def test_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="delay_s must be >= 0"):
        BatchOptions(delay_s=-1)
    with pytest.raises(ConfigError, match="error_rate"):
        BatchOptions(error_rate=2)
