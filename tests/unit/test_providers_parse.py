"""Providers against real recorded API traffic (../shared/real-cassettes) and edge bodies."""

from __future__ import annotations

import gzip
import json
from typing import Any

import httpx
import pytest
import yaml

from pytest_recfair.errors import ConfigError, ProviderError
from pytest_recfair.providers.base import Completion, Provider
from pytest_recfair.providers.http import (
    AnthropicProvider,
    GeminiProvider,
    OpenAIProvider,
    from_config,
    is_loopback,
)
from tests.support.real_cassettes import REAL

pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason="real cassettes not available")


def _interaction(name: str) -> dict[str, Any]:
    data = yaml.safe_load((REAL / f"{name}.yaml").read_text())
    interaction: dict[str, Any] = data["interactions"][0]
    return interaction


def _raw_body(name: str) -> bytes:
    """The body as the service sent it (gzip undone here, not by the code under test)."""
    body = _interaction(name)["response"]["body"]["string"]
    raw = body if isinstance(body, bytes) else body.encode()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def _response(name: str) -> httpx.Response:
    """An httpx.Response exactly as recorded: status, headers, (gzip) body."""
    rec = _interaction(name)
    req, resp = rec["request"], rec["response"]
    body = resp["body"]["string"]
    headers = [(k, v) for k, values in resp["headers"].items() for v in values]
    return httpx.Response(
        resp["status"]["code"],
        headers=headers,
        content=body if isinstance(body, bytes) else body.encode(),
        request=httpx.Request(req["method"], req["uri"], content=req["body"].encode()),
    )


def test_openai_gzip_body_with_chatty_preamble_and_length_finish() -> None:
    name = "openai_chat_completions_gpt-4o"
    expected = json.loads(_raw_body(name))
    done = OpenAIProvider("gpt-4o").parse_response(_response(name))
    assert done.text == expected["choices"][0]["message"]["content"]
    assert done.text.startswith("Certainly!")
    assert done.finish_reason == "length"
    assert done.truncated
    assert done.model == expected["model"]
    assert done.usage is not None
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (
        expected["usage"]["prompt_tokens"],
        expected["usage"]["completion_tokens"],
    )


def test_openai_sse_stream_is_joined_and_keeps_final_usage() -> None:
    name = "openai_chat_completions_gpt-4o_stream"
    done = OpenAIProvider("gpt-4o", stream=True).parse_response(_response(name))
    events = [
        json.loads(line[len("data: ") :])
        for line in _raw_body(name).decode().splitlines()
        if line.startswith("data: {")
    ]
    expected_text = "".join(c["delta"].get("content") or "" for e in events for c in e["choices"])
    assert done.text == expected_text
    assert "1. Alabama" in done.text
    assert done.finish_reason == "length"
    assert done.usage is not None
    assert done.usage.completion_tokens == events[-1]["usage"]["completion_tokens"]
    assert done.usage.prompt_tokens == events[-1]["usage"]["prompt_tokens"]


def test_openai_stream_parses_even_without_event_stream_content_type() -> None:
    # A cassette that lost its headers still starts with "data:".
    name = "openai_chat_completions_gpt-4o_stream"
    bare = httpx.Response(
        200, content=_raw_body(name), request=httpx.Request("POST", "http://x/v1")
    )
    assert OpenAIProvider("gpt-4o").parse_response(bare).finish_reason == "length"


def test_ollama_plain_string_body() -> None:
    name = "ollama_openai_compatible_gemma3-4b"
    expected = json.loads(_raw_body(name))
    provider = from_config("openai", model="gemma3:4b", base_url="http://localhost:11434/v1")
    done = provider.parse_response(_response(name))
    assert done.text == expected["choices"][0]["message"]["content"]
    assert done.finish_reason == "stop"
    assert not done.truncated
    assert done.model == "gemma3:4b"


def test_anthropic_content_blocks_and_max_tokens_stop() -> None:
    name = "anthropic_messages_claude-sonnet-4-0"
    expected = json.loads(_raw_body(name))
    done = AnthropicProvider("claude-sonnet-4-0").parse_response(_response(name))
    assert done.text == "".join(b["text"] for b in expected["content"] if b["type"] == "text")
    assert done.finish_reason == "max_tokens"
    assert done.truncated
    assert done.usage is not None
    assert done.usage.prompt_tokens == expected["usage"]["input_tokens"]
    assert done.usage.completion_tokens == expected["usage"]["output_tokens"]


def test_gemini_candidates_max_tokens_and_thinking_tokens_billed() -> None:
    name = "gemini_generatecontent_gemini-2.5-flash"
    expected = json.loads(_raw_body(name))
    done = GeminiProvider("gemini-2.5-flash").parse_response(_response(name))
    parts = expected["candidates"][0]["content"]["parts"]
    assert done.text == "".join(p["text"] for p in parts)
    assert done.finish_reason == "MAX_TOKENS"
    assert done.truncated
    meta = expected["usageMetadata"]
    assert done.usage is not None
    assert done.usage.prompt_tokens == meta["promptTokenCount"]
    # Billed output = visible + thinking tokens; the recorded total agrees.
    assert done.usage.total_tokens == meta["totalTokenCount"]


@pytest.mark.parametrize(
    ("kind", "name", "stream"),
    [
        ("openai", "openai_chat_completions_gpt-4o", False),
        ("openai", "openai_chat_completions_gpt-4o_stream", True),
        ("anthropic", "anthropic_messages_claude-sonnet-4-0", False),
        ("gemini", "gemini_generatecontent_gemini-2.5-flash", False),
    ],
)
def test_built_request_matches_what_the_official_sdk_sent(
    kind: str, name: str, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = _interaction(name)["request"]
    model = json.loads(recorded["body"]).get("model", "gemini-2.5-flash")
    monkeypatch.setenv("RECFAIR_TEST_KEY", "sk-test-123")
    provider = from_config(
        kind,
        model=model,
        api_key_env="RECFAIR_TEST_KEY",
        temperature=None,
        max_tokens=50,
        stream=stream,
    )
    request = provider.build_request(None, "List all U.S. states.")
    assert request.method == recorded["method"]
    assert str(request.url) == recorded["uri"]
    assert json.loads(request.content) == json.loads(recorded["body"])
    assert "sk-test-123" in " ".join(request.headers.values())
    assert provider.secrets == ("sk-test-123",)


def test_anthropic_sse_stream() -> None:
    events = [
        ("message_start", {"type": "message_start", "message": {
            "model": "claude-x", "usage": {"input_tokens": 11, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "1. Heat\n"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "2. Alien"}}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 7}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    body = "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events)
    response = httpx.Response(
        200,
        headers={"content-type": "text/event-stream"},
        content=body.encode(),
        request=httpx.Request("POST", "https://api.anthropic.com/v1/messages"),
    )
    done = AnthropicProvider("claude-x").parse_response(response)
    assert done == Completion("1. Heat\n2. Alien", "end_turn", done.usage, "claude-x")
    assert done.usage is not None
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (11, 7)


def test_gemini_sse_stream_and_thought_parts_are_skipped() -> None:
    chunks = [
        {"candidates": [{"content": {"parts": [{"text": "thinking...", "thought": True}]}}]},
        {"candidates": [{"content": {"parts": [{"text": "1. Heat\n"}]}}]},
        {
            "candidates": [{"content": {"parts": [{"text": "2. Alien"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 6},
            "modelVersion": "gemini-x",
        },
    ]
    body = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks)
    response = httpx.Response(
        200,
        headers={"content-type": "text/event-stream"},
        content=body.encode(),
        request=httpx.Request("POST", "https://g/v1beta/models/x:streamGenerateContent"),
    )
    done = GeminiProvider("gemini-x", stream=True).parse_response(response)
    assert done.text == "1. Heat\n2. Alien"
    assert done.finish_reason == "STOP"
    assert done.model == "gemini-x"


def _json_response(payload: Any, status: int = 200) -> httpx.Response:
    return httpx.Response(
        status, json=payload, request=httpx.Request("POST", "http://127.0.0.1:9/v1/x")
    )


def test_openai_refusal_text_is_kept_and_gemini_block_has_reason() -> None:
    refusal = {
        "choices": [
            {"message": {"content": None, "refusal": "I can't help."}, "finish_reason": "stop"}
        ]
    }
    assert OpenAIProvider("m").parse_response(_json_response(refusal)).text == "I can't help."
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}}
    done = GeminiProvider("m").parse_response(_json_response(blocked))
    assert (done.text, done.finish_reason) == ("", "SAFETY")


def test_gzip_without_content_encoding_header_is_undone() -> None:
    raw = _raw_body("openai_chat_completions_gpt-4o")
    response = httpx.Response(
        200, content=gzip.compress(raw), request=httpx.Request("POST", "http://x/v1")
    )
    assert OpenAIProvider("m").parse_response(response).text.startswith("Certainly!")


@pytest.mark.parametrize(
    ("body", "words"),
    [
        pytest.param(b'{"choices": [{"message": {"content": "1. He', "cut off", id="cut-json"),
        pytest.param(b"<html><body>Sign in</body></html>", "not JSON", id="html"),
        pytest.param(b"", "empty body", id="empty"),
        pytest.param(b"[1, 2]", "JSON object", id="array"),
        # mtime=0: the bytes (and so the test id) must be the same on every xdist worker.
        pytest.param(gzip.compress(b'{"choices": []}', mtime=0)[:-6], "gzip", id="cut-gzip"),
    ],
)
def test_bad_bodies_give_one_clear_error(body: bytes, words: str) -> None:
    response = httpx.Response(200, content=body, request=httpx.Request("POST", "http://x/v1"))
    with pytest.raises(ProviderError, match=words) as info:
        OpenAIProvider("m").parse_response(response)
    assert info.value.__cause__ is None  # no chained traceback spam


def test_error_object_in_a_200_body_is_reported() -> None:
    payload = {"error": {"message": "model overloaded", "type": "overloaded_error"}}
    with pytest.raises(ProviderError, match="model overloaded"):
        AnthropicProvider("m").parse_response(_json_response(payload))


def test_unexpected_shape_names_the_missing_key() -> None:
    with pytest.raises(ProviderError, match="choices"):
        OpenAIProvider("m").parse_response(_json_response({"candidates": []}))


def test_system_prompt_and_sampling_options_are_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    oa = from_config("openai", model="m", seed=7, max_tokens=300, base_url="http://127.0.0.1:1/v1")
    body = json.loads(oa.build_request("You are a recommender.", "p").content)
    assert body["messages"][0] == {"role": "system", "content": "You are a recommender."}
    assert (body["temperature"], body["seed"], body["max_tokens"]) == (0.0, 7, 300)
    an = from_config("anthropic", model="m", base_url="http://127.0.0.1:1")
    body = json.loads(an.build_request("sys", "p").content)
    assert body["system"] == "sys"
    assert body["max_tokens"] > 0  # required by the Messages API
    ge = from_config("gemini", model="models/g", seed=3, base_url="http://127.0.0.1:1")
    request = ge.build_request("sys", "p")
    body = json.loads(request.content)
    assert body["systemInstruction"] == {"parts": [{"text": "sys"}]}
    assert body["generationConfig"]["seed"] == 3
    assert request.url.path.endswith("/models/g:generateContent")


def test_extra_headers_and_body(monkeypatch: pytest.MonkeyPatch) -> None:
    provider = from_config(
        "openai",
        model="m",
        base_url="http://localhost:8000/v1/",
        extra_headers={"X-Team": "fair", "X-Gateway-Token": "tok-1"},
        extra_body={"max_completion_tokens": 100},
    )
    request = provider.build_request(None, "p")
    assert request.headers["x-team"] == "fair"
    assert str(request.url) == "http://localhost:8000/v1/chat/completions"
    assert json.loads(request.content)["max_completion_tokens"] == 100
    assert provider.secrets == ("tok-1",)  # token-like header values are scrubbed too
    assert isinstance(provider, Provider)


def test_key_comes_from_the_named_variable_and_is_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_GATEWAY_KEY", "sk-secret-9")
    provider = from_config("openai", model="m", api_key_env="MY_GATEWAY_KEY")
    assert provider.build_request(None, "p").headers["authorization"] == "Bearer sk-secret-9"
    assert "sk-secret-9" not in repr(provider)
    provider.check_credentials()


def test_missing_key_is_a_provider_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    provider = from_config("anthropic", model="m")  # building it is fine (cassette replay)
    assert "x-api-key" not in provider.build_request(None, "p").headers
    with pytest.raises(ProviderError, match="ANTHROPIC_API_KEY"):
        provider.check_credentials()


def test_no_key_needed_for_loopback_or_empty_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for url in ("http://localhost:11434/v1", "http://127.0.0.1:8000/v1", "http://[::1]:1/v1"):
        assert is_loopback(url)
        from_config("openai", model="m", base_url=url).check_credentials()
    assert not is_loopback("https://api.openai.com/v1")
    from_config("openai", model="m", api_key_env="").check_credentials()


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"provider": "cohere", "model": "m"}, "provider: expected one of"),
        ({"model": ""}, "model:"),
        ({"model": "m", "base_url": "api.openai.com/v1"}, "base_url:"),
        ({"model": "m", "max_tokens": 0}, "max_tokens:"),
        ({"model": "m", "temperature": 5}, "temperature:"),
    ],
)
def test_from_config_rejects_bad_settings(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        from_config(**kwargs)


def test_ollama_kind_builds_the_recorded_local_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    recorded = _interaction("ollama_openai_compatible_gemma3-4b")["request"]
    provider = from_config("ollama", model="gemma3:4b", temperature=None)
    provider.check_credentials()  # local: no key needed
    request = provider.build_request(None, "What is 4200 + 42?")
    assert str(request.url) == recorded["uri"]
    assert json.loads(request.content) == json.loads(recorded["body"])
    assert "authorization" not in request.headers
    assert provider.secrets == ()


def test_stream_cut_in_its_last_event_is_a_truncated_reply() -> None:
    from pytest_recfair.providers.base import TruncatedReply

    body = _raw_body("openai_chat_completions_gpt-4o_stream").decode()
    cut = body[: body.index('"finish_reason":"length"')]
    response = httpx.Response(
        200,
        headers={"content-type": "text/event-stream"},
        content=cut.encode(),
        request=httpx.Request("POST", "https://api.openai.com/v1/chat/completions"),
    )
    with pytest.raises(TruncatedReply, match="cut off in its last event"):
        OpenAIProvider("gpt-4o").parse_response(response)
    garbled = httpx.Response(200, content=b"data: <html>\n\ndata: [DONE]\n\n",
                             request=response.request)  # fmt: skip
    with pytest.raises(ProviderError, match="not JSON") as info:
        OpenAIProvider("gpt-4o").parse_response(garbled)
    assert not isinstance(info.value, TruncatedReply)
