"""CassetteTransport with httpx.MockTransport as the network: replay, record, modes."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_recfair.cassettes.miss import CassetteMiss
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.providers.transport import UNSCOPED_ENTITY, CassetteTransport
from pytest_recfair.vocab import RecordMode

TEST = "tests/test_fair.py::test_movies"
URL = "https://api.openai.com/v1/chat/completions"


class Server:
    """A fake recommender: replies echo the prompt; counts calls; can fail first."""

    def __init__(self, *, gzip_replies: bool = False, fail_first: int = 0) -> None:
        self.calls: list[httpx.Request] = []
        self.gzip_replies = gzip_replies
        self.fail_first = fail_first

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request)
        if len(self.calls) <= self.fail_first:
            return httpx.Response(503, json={"error": "overloaded"})
        prompt = json.loads(request.content)["messages"][-1]["content"]
        body = json.dumps(
            {"choices": [{"message": {"content": f"echo {prompt} #{len(self.calls)}"}}]}
        ).encode()
        headers = {"content-type": "application/json", "set-cookie": "sid=1"}
        if self.gzip_replies:
            headers["content-encoding"] = "gzip"
            body = gzip.compress(body)
        return httpx.Response(200, headers=headers, content=body)


def send_all(
    store: CassetteStore,
    inner: httpx.AsyncBaseTransport | None,
    requests: list[tuple[str, str, int]],
    *,
    transport_hook: Callable[[CassetteTransport], None] | None = None,
) -> list[httpx.Response]:
    """Send (entity, prompt, repeat) requests through a CassetteTransport, in order."""

    async def main() -> list[httpx.Response]:
        transport = CassetteTransport(store, TEST, inner)
        out = []
        async with httpx.AsyncClient(transport=transport) as client:
            for entity, prompt, repeat in requests:
                ext: dict[str, Any] = {"recfair_repeat": repeat, "recfair_case": f"{entity}-c"}
                if entity:
                    ext["recfair_entity_id"] = entity
                out.append(
                    await client.post(
                        URL,
                        json={"model": "m", "messages": [{"role": "user", "content": prompt}]},
                        headers={"authorization": "Bearer sk-test-key-123456"},
                        extensions=ext,
                    )
                )
            if transport_hook:
                transport_hook(transport)
        return out

    return asyncio.run(main())


def text(response: httpx.Response) -> str:
    return str(response.json()["choices"][0]["message"]["content"])


def record(tmp_path: Path, reqs: list[tuple[str, str, int]], mode: RecordMode = "once") -> Server:
    server = Server()
    store = CassetteStore(tmp_path, mode)
    send_all(store, httpx.MockTransport(server), reqs)
    store.flush()
    return server


def forbidden(request: httpx.Request) -> httpx.Response:
    raise AssertionError(f"network used during replay: {request.url}")


def test_record_then_replay_offline(tmp_path: Path) -> None:
    reqs = [("nolan", "neutral", 0), ("nolan", "muslim", 0), ("lynch", "neutral", 0)]
    server = record(tmp_path, reqs)
    assert len(server.calls) == 3
    replayed = send_all(CassetteStore(tmp_path), httpx.MockTransport(forbidden), reqs)
    assert [text(r) for r in replayed] == ["echo neutral #1", "echo muslim #2", "echo neutral #3"]
    assert all(r.status_code == 200 for r in replayed)
    assert all(r.headers["content-type"] == "application/json" for r in replayed)


def test_mode_none_never_creates_a_network_transport(tmp_path: Path) -> None:
    seen: list[CassetteTransport] = []
    with pytest.raises(CassetteMiss) as info:
        send_all(CassetteStore(tmp_path), None, [("nolan", "unrecorded prompt", 0)])
    assert "unrecorded prompt" in str(info.value)
    assert "'nolan'" in str(info.value)
    # A hit after a miss also stays offline: the inner transport is still never made.
    record(tmp_path, [("nolan", "p", 0)])
    send_all(CassetteStore(tmp_path), None, [("nolan", "p", 0)], transport_hook=seen.append)
    assert seen[0]._inner is None


def test_mode_none_does_not_call_a_given_inner(tmp_path: Path) -> None:
    with pytest.raises(CassetteMiss):
        send_all(CassetteStore(tmp_path), httpx.MockTransport(forbidden), [("nolan", "p", 0)])


def test_once_replays_what_is_recorded_and_asks_only_the_rest(tmp_path: Path) -> None:
    record(tmp_path, [("nolan", "p", 0)])
    server = Server()
    store = CassetteStore(tmp_path, "once")
    got = send_all(store, httpx.MockTransport(server), [("nolan", "p", 0), ("nolan", "q", 0)])
    assert len(server.calls) == 1
    assert [text(r) for r in got] == ["echo p #1", "echo q #1"]


def test_none_misses_a_prompt_not_recorded(tmp_path: Path) -> None:
    record(tmp_path, [("nolan", "p", 0)])
    with pytest.raises(CassetteMiss, match="new_episodes"):
        send_all(CassetteStore(tmp_path), None, [("nolan", "p", 0), ("nolan", "q", 0)])


def test_new_episodes_records_only_the_missing(tmp_path: Path) -> None:
    record(tmp_path, [("nolan", "p", 0)])
    server = Server()
    store = CassetteStore(tmp_path, "new_episodes")
    got = send_all(store, httpx.MockTransport(server), [("nolan", "p", 0), ("nolan", "q", 0)])
    store.flush()
    assert len(server.calls) == 1
    assert [text(r) for r in got] == ["echo p #1", "echo q #1"]
    replay = send_all(CassetteStore(tmp_path), None, [("nolan", "q", 0), ("nolan", "p", 0)])
    assert [text(r) for r in replay] == ["echo q #1", "echo p #1"]


@pytest.mark.parametrize("mode", ["all", "rewrite"])
def test_all_and_rewrite_always_hit_the_network(tmp_path: Path, mode: RecordMode) -> None:
    record(tmp_path, [("nolan", "p", 0)])
    server = Server()
    store = CassetteStore(tmp_path, mode)
    got = send_all(store, httpx.MockTransport(server), [("nolan", "p", 0)])
    store.flush()
    assert len(server.calls) == 1
    assert text(got[0]) == "echo p #1"


def test_repeats_replay_by_index(tmp_path: Path) -> None:
    reqs = [("nolan", "same", 0), ("nolan", "same", 1), ("nolan", "same", 2)]
    record(tmp_path, reqs)
    replay = send_all(CassetteStore(tmp_path), None, list(reversed(reqs)))
    assert [text(r) for r in replay] == ["echo same #3", "echo same #2", "echo same #1"]


def test_gzip_reply_is_saved_decoded_and_served_decoded(tmp_path: Path) -> None:
    server = Server(gzip_replies=True)
    store = CassetteStore(tmp_path, "once")
    live = send_all(store, httpx.MockTransport(server), [("nolan", "p", 0)])
    (path,) = store.flush()
    assert text(live[0]) == "echo p #1"
    saved = json.loads(path.read_text("utf-8"))["interactions"][0]
    headers = {k.lower(): v for k, v in saved["response"]["headers"].items()}
    assert "content-encoding" not in headers
    assert "set-cookie" not in headers
    assert json.loads(saved["response"]["body"]["string"])["choices"][0]["message"]["content"] == (
        "echo p #1"
    )
    assert "authorization" not in {k.lower() for k in saved["request"]["headers"]}
    assert b"sk-test-key-123456" not in path.read_bytes()
    assert saved["request"]["headers"]["x-recfair-case"] == ["nolan-c"]
    replay = send_all(CassetteStore(tmp_path), None, [("nolan", "p", 0)])
    assert "content-encoding" not in replay[0].headers
    assert text(replay[0]) == "echo p #1"


def test_transient_failures_are_not_recorded(tmp_path: Path) -> None:
    server = Server(fail_first=1)
    store = CassetteStore(tmp_path, "once")
    live = send_all(store, httpx.MockTransport(server), [("nolan", "p", 0), ("nolan", "p", 0)])
    (path,) = store.flush()
    assert [r.status_code for r in live] == [503, 200]
    saved = json.loads(path.read_text("utf-8"))["interactions"]
    assert [i["response"]["status"]["code"] for i in saved] == [200]


def test_request_without_entity_goes_to_the_unscoped_cassette(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path, "once")
    send_all(store, httpx.MockTransport(Server()), [("", "p", 0)])
    assert store.flush() == [store.path_for(UNSCOPED_ENTITY)]


def test_streamed_request_body_is_read(tmp_path: Path) -> None:
    async def chunks() -> Any:
        yield json.dumps({"messages": [{"role": "user", "content": "streamed"}]}).encode()

    async def main(store: CassetteStore, inner: httpx.AsyncBaseTransport | None) -> str:
        async with httpx.AsyncClient(transport=CassetteTransport(store, TEST, inner)) as c:
            r = await c.post(URL, content=chunks(), extensions={"recfair_entity_id": "e"})
            return text(r)

    store = CassetteStore(tmp_path, "once")
    assert asyncio.run(main(store, httpx.MockTransport(Server()))) == "echo streamed #1"
    store.flush()
    assert asyncio.run(main(CassetteStore(tmp_path), None)) == "echo streamed #1"


def test_transport_rejects_a_non_store() -> None:
    with pytest.raises(TypeError, match="CassetteStore"):
        CassetteTransport("cassettes/", TEST)  # type: ignore[arg-type]


def test_owned_network_transport_is_closed(tmp_path: Path) -> None:
    async def main() -> bool:
        transport = CassetteTransport(CassetteStore(tmp_path, "once"), TEST)
        inner = transport._network()
        assert isinstance(inner, httpx.AsyncHTTPTransport)
        async with transport:
            pass
        return transport._inner is None

    assert asyncio.run(main())


def test_given_inner_is_closed_with_the_transport(tmp_path: Path) -> None:
    closed: list[bool] = []

    class Inner(httpx.AsyncBaseTransport):
        async def aclose(self) -> None:
            closed.append(True)

    async def main() -> None:
        store = CassetteStore(tmp_path, "once")
        async with httpx.AsyncClient(transport=CassetteTransport(store, TEST, Inner())):
            pass

    asyncio.run(main())
    assert closed == [True]
