"""Replay by key: a built-in provider's cases are looked up without httpx objects, and
must give exactly what building the request and parsing the response gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.cassettes.vcrfile import RecordedRequest, RecordedResponse
from pytest_recfair.errors import ProviderError
from pytest_recfair.providers import from_config, run_cases
from pytest_recfair.providers.base import Completion, RecordedReply
from pytest_recfair.providers.http import HTTPProvider, OpenAIProvider
from pytest_recfair.providers.replay import _Pass
from pytest_recfair.providers.transport import CassetteTransport
from tests.support.cases import Case

BASE = "http://127.0.0.1:8000/v1"  # loopback: no API key needed


@pytest.mark.parametrize("kind", ["openai", "ollama", "anthropic", "gemini"])
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"seed": 3, "max_tokens": 50, "temperature": None},
        {"stream": True, "extra_body": {"top_p": 0.5, "note": "é ü"}},
    ],
)
@pytest.mark.parametrize("system", [None, "You recommend films."])
def test_replay_key_is_the_request_build_request_builds(
    kind: str, options: dict[str, Any], system: str | None
) -> None:
    provider = from_config(kind, model="m-1", base_url=BASE, **options)
    request = provider.build_request(system, "Films like Heat? «25»")
    assert provider.replay_key(system, "Films like Heat? «25»") == (
        request.method,
        str(request.url),
        request.content.decode("utf-8"),
    )


@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize(
    "extra_body", [{}, {"note": "\x00recfair prompt\x00"}, {"messages": [], "contents": []}]
)
def test_the_replay_pass_keys_every_case_as_replay_key_does(
    kind: str, extra_body: dict[str, Any], tmp_path: Path
) -> None:
    # the pass swaps each prompt into its system's body: the same text for any prompt,
    # and replay_key itself where the prompt is not in the body once
    provider = from_config(kind, model="m-1", base_url=BASE, extra_body=extra_body)
    pass_ = _Pass(provider, CassetteTransport(CassetteStore(tmp_path), "t::a"), run=None)  # type: ignore[arg-type]
    for system in (None, 'say "films"\n', "\x00recfair prompt\x00"):
        for prompt in ("Heat? «25»", 'a "quoted" \\ line\n\t', "\x00recfair prompt\x00", ""):
            case = Case(id="c", prompt=prompt, system=system)
            assert pass_.key(case) == provider.replay_key(system, prompt)


class Shouting(OpenAIProvider):
    """A user's subclass: its own parsing must be what replay runs."""

    def parse_response(self, response: httpx.Response) -> Completion:
        done = super().parse_response(response)
        return Completion(done.text.upper(), done.finish_reason, done.usage, done.model)


def _record(root: Path, provider: HTTPProvider, case: Case, body: bytes) -> None:
    request = provider.build_request(case.system, case.prompt)
    store = CassetteStore(root, "once")
    sent = RecordedRequest("POST", str(request.url), tuple(request.headers.multi_items()),
                           request.content, case.repeat, case.id)  # fmt: skip
    store.record("t::a", case.entity_id, sent, RecordedResponse(200, (), body, "OK"))
    store.flush()


def _reply(text: str) -> bytes:
    choice = {"message": {"content": text}, "finish_reason": "stop"}
    return json.dumps({"model": "m-1", "choices": [choice]}).encode()


def _replay(root: Path, provider: HTTPProvider, case: Case) -> Any:
    store = CassetteStore(root, "none")
    return run_cases(provider, [case], cassettes=store, test_id="t::a", progress=False)


def test_a_subclass_is_replayed_through_its_own_parsing(tmp_path: Path) -> None:
    case = Case("c0", "films like Heat", system="You recommend films.")
    shouting = Shouting("m-1", base_url=BASE)
    assert shouting.replay_key(case.system, case.prompt) is None
    _record(tmp_path, shouting, case, _reply("1. heat"))
    assert _replay(tmp_path, shouting, case).completions["c0"].text == "1. HEAT"


def test_a_bad_recorded_reply_is_reported_as_a_live_one_is(tmp_path: Path) -> None:
    case = Case("c0", "films like Heat", system="You recommend films.")
    provider = from_config("openai", model="m-1", base_url=BASE)
    _record(tmp_path, provider, case, b'{"object": "list"}')
    error = _replay(tmp_path, provider, case).errors["c0"]
    request = provider.build_request(case.system, case.prompt)
    live = httpx.Response(200, content=b'{"object": "list"}', request=request)
    with pytest.raises(ProviderError) as expected:
        provider.parse_response(live)
    assert error == str(expected.value)
    assert f"{BASE}/chat/completions" in error


_STREAM = (
    b'data: {"choices":[{"delta":{"content":"1. Heat"},"finish_reason":"length"}],'
    b'"model":"m-2"}\n\ndata: [DONE]\n\n'
)
_ANTHROPIC = (
    b'{"content":[{"type":"text","text":"1. Heat"}],"stop_reason":"end_turn",'
    b'"usage":{"input_tokens":3,"output_tokens":4}}'
)
_GEMINI = (
    b'{"candidates":[{"content":{"parts":[{"text":"1. Heat"}]},"finishReason":"STOP"}],'
    b'"modelVersion":"g-1"}'
)


@pytest.mark.parametrize(
    ("kind", "ctype", "body"),
    [
        ("openai", "application/json", _reply("1. Heat\n2. Ronin")),
        ("openai", "text/event-stream", _STREAM),
        ("anthropic", "application/json", _ANTHROPIC),
        ("gemini", "application/json; charset=UTF-8", _GEMINI),
    ],
)
def test_parse_response_reads_a_recording_as_it_reads_the_response(
    kind: str, ctype: str, body: bytes
) -> None:
    provider = from_config(kind, model="m-1", base_url=BASE)
    response = httpx.Response(200, headers={"content-type": ctype}, content=body)
    parsed = provider.parse_response(RecordedReply(body.decode("utf-8"), {"content-type": ctype}))
    assert parsed == provider.parse_response(response)
    assert parsed.text.startswith("1. Heat")
