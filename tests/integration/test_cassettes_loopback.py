"""Record against a real loopback HTTP server, stop it, then replay offline."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from pytest_recfair.cassettes.miss import CassetteMiss
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.providers import from_config, run_cases
from pytest_recfair.providers.transport import CassetteTransport

TEST = "tests/integration/test_fair.py::test_directors[sim]"
KEY = "sk-loopback-secret-0123456789"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: fewer connections for the concurrent sends

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        prompt = json.loads(body)["messages"][-1]["content"]
        self.server.hits.append(prompt)  # type: ignore[attr-defined]
        n = len(self.server.hits)  # type: ignore[attr-defined]
        reply = json.dumps(
            {
                "choices": [
                    {
                        "message": {"role": "assistant", "content": f"1. Film for {prompt} #{n}"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 7},
                "model": "loopback-1",
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply)))
        self.send_header("set-cookie", f"session={KEY}")
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default 5 drops connections when 18 arrive at once


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.hits = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)


def _url(srv: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}/v1/chat/completions"


async def _send(store: CassetteStore, url: str, plan: list[tuple[str, str, int]]) -> list[str]:
    # inner=None: recording builds a real httpx.AsyncHTTPTransport; replay never does.
    async with httpx.AsyncClient(transport=CassetteTransport(store, TEST)) as client:

        async def one(entity: str, prompt: str, repeat: int) -> str:
            r = await client.post(
                url,
                json={"model": "m", "messages": [{"role": "user", "content": prompt}]},
                headers={"authorization": f"Bearer {KEY}"},
                extensions={"recfair_entity_id": entity, "recfair_repeat": repeat},
            )
            return str(r.json()["choices"][0]["message"]["content"])

        return list(await asyncio.gather(*(one(*p) for p in plan)))


PLAN = [
    (entity, prompt, repeat)
    for entity in ("Christopher Nolan", "Agnès Varda", "Bong Joon-ho")
    for prompt in (f"neutral {entity}", f"a Muslim fan of {entity}", f"a woman fan of {entity}")
    for repeat in (0, 1)
]


def test_record_over_http_then_replay_with_the_server_gone(
    tmp_path: Path, server: ThreadingHTTPServer
) -> None:
    url = _url(server)
    store = CassetteStore(tmp_path, "once", secrets=[KEY])
    live = asyncio.run(_send(store, url, PLAN))
    written = store.flush()
    assert len(server.hits) == len(PLAN)  # type: ignore[attr-defined]
    assert len(written) == 3  # one file per entity
    for path in written:
        assert KEY.encode() not in path.read_bytes()
    server.shutdown()
    server.server_close()

    replayed = asyncio.run(_send(CassetteStore(tmp_path), url, list(reversed(PLAN))))
    assert replayed == list(reversed(live))
    # Different prompts got different replies, and repeats kept their own reply.
    assert len(set(live)) == len(PLAN)


def test_replay_after_a_port_change_and_miss_on_a_new_prompt(
    tmp_path: Path, server: ThreadingHTTPServer
) -> None:
    store = CassetteStore(tmp_path, "new_episodes")
    asyncio.run(_send(store, _url(server), PLAN[:2]))
    store.flush()
    moved = "http://127.0.0.1:9/v1/chat/completions"  # nothing listens on port 9
    assert len(asyncio.run(_send(CassetteStore(tmp_path), moved, PLAN[:2]))) == 2
    with pytest.raises(CassetteMiss, match="a never recorded prompt"):
        asyncio.run(
            _send(CassetteStore(tmp_path), moved, [(PLAN[0][0], "a never recorded prompt", 0)])
        )


@dataclass(frozen=True)
class _Case:
    id: str
    system: str | None
    prompt: str
    entity_id: str
    repeat: int


def test_run_cases_records_and_replays_through_the_store(
    tmp_path: Path, server: ThreadingHTTPServer
) -> None:
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    provider = from_config("openai", model="m", base_url=base, api_key_env="")
    cases = [
        _Case(f"c{i}", "You recommend films.", prompt, entity, repeat)
        for i, (entity, prompt, repeat) in enumerate(PLAN)
    ]
    store = CassetteStore(tmp_path, "once")
    recorded = run_cases(provider, cases, cassettes=store, test_id=TEST, progress=False)
    store.flush()
    assert recorded.errors == {}
    hits = len(server.hits)  # type: ignore[attr-defined]
    assert hits == len(cases)
    server.shutdown()
    server.server_close()

    replayed = run_cases(
        provider, cases, cassettes=CassetteStore(tmp_path), test_id=TEST, progress=False
    )
    assert replayed.errors == {}
    assert {k: c.text for k, c in replayed.completions.items()} == {
        k: c.text for k, c in recorded.completions.items()
    }
    assert len(server.hits) == hits  # type: ignore[attr-defined]


def test_simulator_audit_records_once_and_replays_identically(tmp_path: Path) -> None:
    from pytest_recfair.sim.server import SimServer

    cases = [
        _Case(
            f"{entity}-{who or 'neutral'}-{repeat}",
            None,
            f"I am {who + ' ' if who else ''}a fan of {entity}. Please provide me with a list "
            "of 10 movie titles in order of preference that you think I might like.",
            entity.lower().replace(" ", "-"),
            repeat,
        )
        for entity in ("Christopher Nolan", "Greta Gerwig")
        for who in ("", "a Muslim", "an African American")
        for repeat in (0, 1)
    ]
    with SimServer(api_key=KEY) as srv:
        store = CassetteStore(tmp_path, "once")
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("SIMKEY", KEY)
            provider = from_config(
                "openai", model="sim", base_url=srv.base_url, api_key_env="SIMKEY"
            )
            recorded = run_cases(provider, cases, cassettes=store, test_id=TEST, progress=False)
        sent = srv.stats.requests
    assert recorded.errors == {}
    assert sent == len(cases)
    files = sorted(p.name for p in store.root.rglob("*.json"))
    assert files == ["christopher-nolan.json", "greta-gerwig.json"]
    for path in store.root.rglob("*.json"):
        assert KEY.encode() not in path.read_bytes()

    # The simulator is gone and no key is set: replay only.
    offline = from_config("openai", model="sim", base_url=srv.base_url, api_key_env="")
    replayed = run_cases(
        offline, cases, cassettes=CassetteStore(tmp_path), test_id=TEST, progress=False
    )
    assert replayed.errors == {}
    assert {k: c.text for k, c in replayed.completions.items()} == {
        k: c.text for k, c in recorded.completions.items()
    }
