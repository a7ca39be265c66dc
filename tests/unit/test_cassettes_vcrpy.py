"""Our cassettes are vcrpy cassettes: vcrpy replays ours, we replay vcrpy's and real ones."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import vcr
from vcr.serializers import yamlserializer

from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.cassettes.vcrfile import RecordedRequest, RecordedResponse, sanitize_name
from pytest_recfair.errors import CassetteError
from pytest_recfair.providers.transport import CassetteTransport
from tests.support.real_cassettes import REAL

TEST = "tests/test_fair.py::test_movies"
URL = "https://api.openai.com/v1/chat/completions"


def chat(prompt: str) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": [{"role": "user", "content": prompt}]}


def ours(tmp_path: Path, reply: dict[str, Any]) -> Path:
    store = CassetteStore(tmp_path, "new_episodes", secrets=["sk-live-abcdefghijkl"])
    store.record(
        TEST,
        "Christopher Nolan",
        RecordedRequest(
            "POST",
            URL,
            (
                ("authorization", "Bearer sk-live-abcdefghijkl"),
                ("content-type", "application/json"),
            ),
            json.dumps(chat("movies like Nolan")).encode(),
            repeat=2,
        ),
        RecordedResponse(
            200, (("content-type", "application/json"),), json.dumps(reply).encode(), "OK"
        ),
    )
    (path,) = store.flush()
    return path


def test_vcrpy_replays_our_cassette_through_real_httpx(tmp_path: Path) -> None:
    reply = {"choices": [{"message": {"content": "1. Memento\n2. Heat"}}]}
    path = ours(tmp_path, reply)
    my_vcr = vcr.VCR(serializer="json")
    with my_vcr.use_cassette(str(path), record_mode="none") as cassette:
        got = httpx.post(URL, json=chat("movies like Nolan"))
    assert got.status_code == 200
    assert got.json() == reply
    assert cassette.play_count == 1


def test_vcrpy_replays_our_cassette_through_async_httpx(tmp_path: Path) -> None:
    reply = {"choices": [{"message": {"content": "Inception"}}]}
    path = ours(tmp_path, reply)

    async def call() -> Any:
        async with httpx.AsyncClient() as client:
            return (await client.post(URL, json=chat("movies like Nolan"))).json()

    with vcr.VCR(serializer="json", record_mode="none").use_cassette(str(path)):
        assert asyncio.run(call()) == reply


def test_we_replay_a_cassette_vcrpy_recorded(tmp_path: Path) -> None:
    path = tmp_path / "vcrpy" / "nolan.json"
    calls: list[httpx.Request] = []

    def server(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        prompt = json.loads(request.content)["messages"][0]["content"]
        return httpx.Response(200, json={"choices": [{"message": {"content": f"re: {prompt}"}}]})

    recorder = vcr.VCR(serializer="json", record_mode="once")
    with (
        recorder.use_cassette(str(path)),
        httpx.Client(transport=httpx.MockTransport(server)) as client,
    ):
        client.post(URL, json=chat("first"))
        client.post(URL, json=chat("second"))
    assert len(calls) == 2

    # Put vcrpy's file where our layout expects it and replay both prompts offline.
    store = CassetteStore(tmp_path / "ours")
    target = store.path_for("nolan")
    target.parent.mkdir(parents=True)
    target.write_bytes(path.read_bytes())

    async def replay(prompt: str) -> Any:
        async with httpx.AsyncClient(transport=CassetteTransport(store, TEST)) as client:
            r = await client.post(URL, json=chat(prompt), extensions={"recfair_entity_id": "nolan"})
            return r.json()["choices"][0]["message"]["content"]

    assert asyncio.run(replay("second")) == "re: second"
    assert asyncio.run(replay("first")) == "re: first"


def _real(name: str) -> dict[str, Any]:
    path = REAL / name
    if not path.exists():
        pytest.skip(f"real cassettes not available at {REAL}")
    data: dict[str, Any] = yamlserializer.deserialize(path.read_text("utf-8"))
    return data["interactions"][0]


@pytest.mark.parametrize(
    "name",
    [
        "openai_chat_completions_gpt-4o.yaml",
        "anthropic_messages_claude-sonnet-4-0.yaml",
        "gemini_generatecontent_gemini-2.5-flash.yaml",
        "ollama_openai_compatible_gemma3-4b.yaml",
        "openai_chat_completions_gpt-4o_stream.yaml",
    ],
)
def test_real_recorded_reply_is_saved_decoded_scrubbed_and_replayed(
    tmp_path: Path, name: str
) -> None:
    interaction = _real(name)
    recorded_req, recorded_resp = interaction["request"], interaction["response"]
    raw_body = recorded_resp["body"]["string"]
    raw_body = raw_body if isinstance(raw_body, bytes) else raw_body.encode()
    headers = [(k, v) for k, vs in recorded_resp["headers"].items() for v in vs]

    def server(request: httpx.Request) -> httpx.Response:
        return httpx.Response(recorded_resp["status"]["code"], headers=headers, content=raw_body)

    body = recorded_req["body"]
    body = body if isinstance(body, bytes) else (body or "").encode()
    sent_headers = {k: v[0] for k, v in recorded_req["headers"].items() if k != "content-length"}
    sent_headers["x-goog-api-key"] = "AIza-planted-test-key-0000"

    async def send(store: CassetteStore, inner: httpx.AsyncBaseTransport | None) -> bytes:
        async with httpx.AsyncClient(transport=CassetteTransport(store, TEST, inner)) as c:
            r = await c.request(
                recorded_req["method"],
                recorded_req["uri"],
                content=body,
                headers=sent_headers,
                extensions={"recfair_entity_id": "us-states"},
            )
            return r.content

    store = CassetteStore(tmp_path, "once", secrets=["AIza-planted-test-key-0000"])
    live = asyncio.run(send(store, httpx.MockTransport(server)))
    (path,) = store.flush()
    written = path.read_bytes()
    saved = json.loads(written)["interactions"][0]
    resp_headers = {k.lower() for k in saved["response"]["headers"]}
    req_headers = {k.lower() for k in saved["request"]["headers"]}
    assert "content-encoding" not in resp_headers
    assert not resp_headers & {"set-cookie", "openai-organization", "openai-project"}
    assert not req_headers & {"cookie", "x-goog-api-key", "authorization"}
    assert b"__cf_bm" not in written
    assert b"AIza-planted" not in written
    assert saved["response"]["body"]["string"].encode() == live
    # The decoded reply is readable text (JSON, or server-sent events), not gzip bytes.
    if live.startswith(b"data:"):
        assert live.rstrip().endswith(b"data: [DONE]")
    else:
        json.loads(live)

    replayed = asyncio.run(send(CassetteStore(tmp_path), None))
    assert replayed == live


@pytest.mark.parametrize(
    "name",
    [
        "openai_chat_completions_gpt-4o.yaml",
        "anthropic_messages_claude-sonnet-4-0.yaml",
        "gemini_generatecontent_gemini-2.5-flash.yaml",
    ],
)
def test_a_vcrpy_yaml_cassette_is_replayed_through_vcrpys_loader(tmp_path: Path, name: str) -> None:
    """recfair_vcr_cassettes: a team's pytest-recording YAML (gzip bodies and all) is
    read by vcrpy's persister and replayed by the store, never copied or written."""
    interaction = _real(name)
    request, response = interaction["request"], interaction["response"]
    body = request["body"]
    body = body if isinstance(body, bytes) else (body or "").encode()
    store = CassetteStore(tmp_path / "ours", imports=[REAL / name])
    hit = store.lookup(TEST, "any-entity", request["method"], request["uri"], body, 0)
    assert hit is not None
    assert hit.status == response["status"]["code"]
    encoded = {k.lower(): v for k, v in response["headers"].items()}.get("content-encoding")
    if encoded:  # vcrpy's decode_response undid the compression
        assert not any(k.lower() == "content-encoding" for k, _ in hit.headers)
    if not hit.body.startswith(b"data:"):
        json.loads(hit.body)  # readable JSON text, not gzip bytes
    assert not (tmp_path / "ours").exists()  # imported cassettes are never written


def test_a_missing_import_path_is_a_one_line_error(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path, imports=[tmp_path / "nope"])
    with pytest.raises(CassetteError, match=r"nope does not exist; fix recfair_vcr_cassettes"):
        store.lookup(TEST, "e", "POST", URL, json.dumps(chat("x")).encode(), 0)


def test_the_old_per_test_layout_is_read_by_vcrpy_and_migrated_on_save(tmp_path: Path) -> None:
    old = tmp_path / sanitize_name("tests/test_fair.py::test_movies") / "nolan.json"
    ours(tmp_path / "scratch", {"choices": [{"message": {"content": "Heat"}}]}).rename(
        tmp_path / "moved.json"
    )
    old.parent.mkdir()
    # the old layout: the same vcrpy JSON, one folder per test (the entity name differs)
    data = json.loads((tmp_path / "moved.json").read_text("utf-8"))
    old.write_text(json.dumps(data), encoding="utf-8")
    body = json.dumps(chat("movies like Nolan")).encode()
    hit = CassetteStore(tmp_path).lookup(TEST, "nolan", "POST", URL, body, 2)
    assert hit is not None
    assert json.loads(hit.body)["choices"][0]["message"]["content"] == "Heat"
    recording = CassetteStore(tmp_path, "new_episodes")
    recording.record(TEST, "nolan", RecordedRequest("POST", URL, (), b'{"p": 1}'),
                     RecordedResponse(200, (), b"{}", "OK"))  # fmt: skip
    recording.flush()
    assert not old.exists()
    assert not old.parent.exists()
    again = CassetteStore(tmp_path)
    assert again.lookup("sub/t.py::test_movies", "nolan", "POST", URL, body, 2) is not None
    assert len(json.loads((tmp_path / "nolan.json").read_text("utf-8"))["interactions"]) == 2
