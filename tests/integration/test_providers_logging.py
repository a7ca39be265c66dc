"""No API key in the logs (issue 19): a recording run with DEBUG logging on, through the
loopback simulator and through a stub that echoes the key in its reply headers (which
httpcore logs at DEBUG), leaves the key in no log record.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from pytest_recfair import secrets
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.providers import from_config, run_cases
from pytest_recfair.sim.server import SimServer
from tests.integration import llm_stubs

KEY = "PlantedLogKey-3e9b1d7c5a2f4e60b8d6"
ENV = "RECFAIR_PLANTED_LOG_KEY"
ROUTES = {"openai": "/v1", "anthropic": "", "gemini": "/v1beta"}


@dataclass(frozen=True)
class Case:
    id: str
    entity_id: str
    repeat: int
    system: str | None
    prompt: str


CASES = [Case(f"c{i}", f"e{i % 2}", 0, "be brief", f"films for fan {i}") for i in range(6)]


def _leaks(caplog: pytest.LogCaptureFixture) -> list[str]:
    forms = {KEY, quote(KEY, safe=""), KEY[4:-4]}
    return [
        f"{record.name}: {text[:200]}"
        for record in caplog.records
        for text in (record.getMessage(), record.exc_text or "")
        if any(form in text for form in forms)
    ] + [form for form in forms if form in caplog.text]


@pytest.fixture
def leaky() -> Iterator[str]:
    server = llm_stubs.serve(0, leak=True, fail_every=3)
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("kind", sorted(ROUTES))
def test_a_key_echoed_in_reply_headers_stays_out_of_debug_logs(
    kind: str,
    leaky: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV, KEY)
    provider = from_config(kind, model="stub-model", base_url=leaky + ROUTES[kind], api_key_env=ENV)
    store = CassetteStore(tmp_path, "once")
    with caplog.at_level(logging.DEBUG):
        outcome = run_cases(
            provider, CASES, cassettes=store, test_id="t::logs", progress=False, backoff=0.001
        )
    assert len(outcome.completions) == len(CASES)
    assert outcome.retries  # failed first tries: their error bodies quote the key too
    # httpcore did log the reply headers the stub put the key in, scrubbed
    messages = [r.getMessage() for r in caplog.records]
    headers = [m for m in messages if m.startswith("receive_response_headers.complete")]
    assert len(headers) == outcome.requests
    assert all(f"(b'x-echo-key', b'{secrets.FILTERED}')" in message for message in headers)
    assert _leaks(caplog) == []


def test_a_recording_through_the_simulator_logs_no_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, KEY)
    with SimServer(api_key=KEY) as sim, caplog.at_level(logging.DEBUG):
        provider = from_config("openai", model="sim", base_url=sim.base_url, api_key_env=ENV)
        outcome = run_cases(
            provider,
            CASES,
            cassettes=CassetteStore(tmp_path, "once"),
            test_id="t::sim",
            progress=False,
        )
    assert len(outcome.completions) == len(CASES)
    assert any(r.name.startswith("httpcore") for r in caplog.records)
    assert _leaks(caplog) == []


def test_the_log_filter_is_there_only_while_a_run_sends() -> None:
    names = ("httpx", "httpcore.http11", "httpcore.connection", "pytest_recfair")

    def filtered() -> list[bool]:
        return [any(isinstance(f, secrets.LogScrubber) for f in logging.getLogger(n).filters)
                for n in names]  # fmt: skip

    assert filtered() == [False] * len(names)
    with secrets.scrubbed_logs():
        with secrets.scrubbed_logs():  # nested (a run inside a run's thread)
            assert filtered() == [True] * len(names)
        assert filtered() == [True] * len(names)
    assert filtered() == [False] * len(names)
    seen: list[list[bool]] = []
    run_cases(lambda prompt: (seen.append(filtered()), "1. A")[1], CASES[:1], progress=False)
    assert seen == [[True] * len(names)]
    assert filtered() == [False] * len(names)


def test_a_log_record_of_ours_is_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    secrets.register([KEY])
    logger = logging.getLogger("pytest_recfair.providers.test_child")
    with caplog.at_level(logging.DEBUG), secrets.scrubbed_logs():
        logger.debug("request headers %s", {"authorization": f"Bearer {KEY}"})
        try:
            raise ValueError(f"boom {KEY}")
        except ValueError:
            logger.exception("failed")
    assert _leaks(caplog) == []
    assert secrets.FILTERED in caplog.records[0].getMessage()
