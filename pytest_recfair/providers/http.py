"""HTTP providers: OpenAI-compatible chat, Anthropic messages, Gemini generateContent.
API keys come from the environment variable named in the configuration, and a missing one
is an error only when a request would go to the network, so CI can replay without keys.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar
from urllib.parse import urlsplit

import httpx

from pytest_recfair import secrets
from pytest_recfair.errors import ConfigError, ProviderError
from pytest_recfair.providers.base import (
    AnyReply,
    Completion,
    Usage,
    as_int,
    bad_value,
    is_event_stream,
    json_body,
    response_url,
    sse_payloads,
)


def is_loopback(base_url: str) -> bool:
    """True for localhost / 127.0.0.0/8 / ::1 URLs: local servers need no API key."""
    host = urlsplit(base_url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def unauthorized_hint(env: str | None, base: str) -> str:
    """What to do after a 401: a loopback URL gets no key unless one is named on purpose."""
    if env:
        return f"Check that the environment variable {env} holds a valid key for {base}."
    if base and is_loopback(base):
        return (
            f"The request carried no API key: a loopback base_url ({base}) gets none by "
            "default, so a local server never sees your provider key. For a local proxy "
            "that needs one (LiteLLM, an SSH tunnel), name the variable on purpose: "
            "recfair_api_key_env = OPENAI_API_KEY (or api_key_env= on the provider)."
        )
    return (
        "The request carried no API key: set recfair_api_key_env (api_key_env=) to the "
        "NAME of the environment variable that holds the key."
    )


# Compact and in insertion order, so the same case always gives the same bytes (cassette
# replay matches on the body). One encoder: json.dumps builds one per call with these options.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _given(**values: Any) -> dict[str, Any]:  # those set, in order (the body's bytes)
    return {name: value for name, value in values.items() if value is not None}


# A request: URL, JSON payload, auth headers (sent only with a key).
_Call = tuple[str, dict[str, Any], dict[str, str]]


class HTTPProvider(ABC):
    """What the three HTTP providers share: URL, key handling, headers, sampling options."""

    name: str = "http"
    default_base_url: str = ""
    default_key_env: str | None = None
    fixed_headers: ClassVar[Mapping[str, str]] = {}
    # variables named by recfair_extra_headers that are unset (see :func:`configure`)
    missing_header_envs: tuple[str, ...] = ()

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        temperature: float | None = 0.0,
        seed: int | None = None,
        max_tokens: int | None = None,
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        stream: bool = False,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise bad_value("model", "the model name the service knows (e.g. 'gpt-4o-mini')", model)
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise bad_value("max_tokens", "a positive integer or None", max_tokens)
        if temperature is not None and (
            not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2
        ):
            default = "(or None to leave the service default)"
            raise bad_value("temperature", f"a number between 0 and 2 {default}", temperature)
        base_url = base_url or self.default_base_url
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            url = "an http(s) URL such as 'http://127.0.0.1:8000/v1'"
            raise bad_value("base_url", url, base_url, " Give the full URL including the scheme.")
        self.model, self.base_url = model, base_url.rstrip("/")
        local = is_loopback(self.base_url)
        # None = the provider's usual variable, except for local servers which need none.
        # "" = send no key at all (a keyless gateway).
        usual = None if local else self.default_key_env
        self.api_key_env: str | None = (usual if api_key_env is None else api_key_env) or None
        self._api_key = os.environ.get(self.api_key_env) if self.api_key_env else None
        self._key_required = self.api_key_env is not None and not local
        self.temperature, self.seed, self.max_tokens = temperature, seed, max_tokens
        self.extra_headers, self.extra_body = dict(extra_headers or {}), dict(extra_body or {})
        self.stream, self._urls = stream, dict[str, httpx.URL]()
        given = [v for k, v in self.extra_headers.items() if secrets.is_secret_header(k)]
        # the one rule (secrets.py)
        self.secrets: tuple[str, ...] = tuple(v for v in (self._api_key, *given) if v)
        secrets.register(self.secrets)  # scrubbed from every message, file and line

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def check_credentials(self) -> None:
        """Raise ProviderError when a request is about to go out without a required key."""
        if self._key_required and not self._api_key:
            raise ProviderError(
                f"{self.name}: the environment variable {self.api_key_env} is not set, so "
                f"there is no API key for {self.base_url}. Export {self.api_key_env}=<your key> "
                "(keys are never read from config files), or replay recorded cassettes instead."
            )
        if self.missing_header_envs:
            env = self.missing_header_envs[0]
            raise ProviderError(
                f"recfair_extra_headers: the environment variable {env} is not set, so its "
                f"header cannot be sent to {self.base_url}. Export {env}=<value> (header "
                "values are never read from config files), or replay cassettes instead."
            )

    def build_request(self, system: str | None, prompt: str) -> httpx.Request:
        """The HTTP request asking for recommendations for ``prompt``."""
        url, payload, auth = self._call(system, prompt)
        headers = {"content-type": "application/json", "accept": "application/json"}
        headers.update(self.fixed_headers)
        if self._api_key:
            headers.update(auth)
        headers.update(self.extra_headers)
        content = self._body(payload).encode("utf-8")
        # Parsed once: most of a request's building cost (a paper-scale replay builds 31,000).
        parsed = self._urls.get(url)
        if parsed is None:
            parsed = self._urls[url] = httpx.URL(url)
        return httpx.Request("POST", parsed, headers=headers, content=content)

    def replay_key(self, system: str | None, prompt: str) -> tuple[str, str, str] | None:
        """(method, URL, body text) of ``build_request``'s request, unbuilt; None: a subclass."""
        if type(self) not in _BUILT_IN:
            return None
        url, payload, _ = self._call(system, prompt)
        return "POST", url, self._body(payload)

    @abstractmethod
    def _call(self, system: str | None, prompt: str) -> _Call: ...

    def parse_response(self, response: AnyReply) -> Completion:
        """Text, finish reason, usage and model of a 2xx response or a reply replayed by key."""
        if is_event_stream(response):
            return self._stream(sse_payloads(response, provider=self.name))
        return self._reply(json_body(response, provider=self.name), response)

    @abstractmethod
    def _reply(self, data: dict[str, Any], response: AnyReply) -> Completion: ...

    @abstractmethod
    def _stream(self, events: Iterator[dict[str, Any]]) -> Completion: ...

    def _body(self, payload: dict[str, Any]) -> str:
        """``payload`` with ``extra_body``: one place for the request and its replay key."""
        payload.update(self.extra_body)
        return _ENCODER.encode(payload)


class OpenAIProvider(HTTPProvider):
    """``POST {base_url}/chat/completions``: OpenAI, vLLM, Ollama /v1, LM Studio, Gemini's
    OpenAI-compatible endpoint and most gateways."""

    name = "openai"
    default_base_url = "https://api.openai.com/v1"
    default_key_env: str | None = "OPENAI_API_KEY"

    def _call(self, system: str | None, prompt: str) -> _Call:
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": prompt})
        payload: dict[str, Any] = {"model": self.model, "messages": messages}
        payload.update(
            _given(temperature=self.temperature, seed=self.seed, max_tokens=self.max_tokens)
        )
        if self.stream:
            payload["stream"] = True
            payload["stream_options"] = {"include_usage": True}
        auth = {"authorization": f"Bearer {self._api_key}"}
        return f"{self.base_url}/chat/completions", payload, auth

    def _reply(self, data: dict[str, Any], response: AnyReply) -> Completion:
        choices = data.get("choices")
        if not isinstance(choices, list):
            raise ProviderError(
                f"{self.name}: expected 'choices' in the reply from {response_url(response)}, "
                f"got keys {sorted(data)}. Is this an OpenAI-compatible /chat/completions URL?"
            )
        text, finish = "", None
        if choices:
            choice = choices[0]
            message = choice.get("message") or {}
            # A refusal comes as message.refusal with null content; keep its words so the
            # reply parser can classify it as REFUSED instead of EMPTY.
            text = message.get("content") or message.get("refusal") or ""
            finish = choice.get("finish_reason")
        return Completion(text, finish, _openai_usage(data.get("usage")), data.get("model"))

    def _stream(self, events: Iterator[dict[str, Any]]) -> Completion:
        parts: list[str] = []
        finish = model = None
        usage: Usage | None = None
        for chunk in events:
            model = chunk.get("model") or model
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    parts.append(delta["content"])
                finish = choice.get("finish_reason") or finish
            if chunk.get("usage"):
                usage = _openai_usage(chunk["usage"])
        return Completion("".join(parts), finish, usage, model)


def _openai_usage(usage: Any) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    return Usage(as_int(usage.get("prompt_tokens")), as_int(usage.get("completion_tokens")))


class AnthropicProvider(HTTPProvider):
    """``POST {base_url}/v1/messages`` (Anthropic's Messages API)."""

    name = "anthropic"
    default_base_url = "https://api.anthropic.com"
    default_key_env = "ANTHROPIC_API_KEY"
    fixed_headers: ClassVar[Mapping[str, str]] = {"anthropic-version": "2023-06-01"}
    # The Messages API requires max_tokens; 25 titles fit easily in this.
    default_max_tokens = 1024

    def _call(self, system: str | None, prompt: str) -> _Call:
        payload: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens or self.default_max_tokens,
            "messages": [{"role": "user", "content": prompt}],
        }
        # Anthropic has no seed parameter: self.seed is deliberately not sent.
        payload.update(
            _given(system=system or None, temperature=self.temperature, stream=self.stream or None)
        )
        return f"{self.base_url}/v1/messages", payload, {"x-api-key": self._api_key or ""}

    def _reply(self, data: dict[str, Any], response: AnyReply) -> Completion:
        content = data.get("content")
        if not isinstance(content, list):
            raise ProviderError(
                f"{self.name}: expected a 'content' list in the reply from "
                f"{response_url(response)}, got keys {sorted(data)}. Is base_url the Anthropic API?"
            )
        # Only text blocks are the answer; thinking / tool_use blocks are not.
        text = "".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
        usage = data.get("usage")
        usage = _anthropic_usage(usage) if isinstance(usage, dict) else None
        return Completion(text, data.get("stop_reason"), usage, data.get("model"))

    def _stream(self, events: Iterator[dict[str, Any]]) -> Completion:
        parts: list[str] = []
        finish = model = None
        usage: Usage | None = None
        for event in events:
            kind = event.get("type")
            if kind == "message_start":
                message = event.get("message") or {}
                model = message.get("model")
                if isinstance(message.get("usage"), dict):
                    usage = _anthropic_usage(message["usage"])
            elif kind == "content_block_delta":
                delta = event.get("delta") or {}
                if delta.get("type") == "text_delta":
                    parts.append(delta.get("text", ""))
            elif kind == "message_delta":
                finish = (event.get("delta") or {}).get("stop_reason") or finish
                if isinstance(event.get("usage"), dict):
                    # output_tokens in message_delta is cumulative for the message.
                    done = as_int(event["usage"].get("output_tokens"))
                    usage = Usage(usage.prompt_tokens if usage else 0, done)
        return Completion("".join(parts), finish, usage, model)


def _anthropic_usage(usage: dict[str, Any]) -> Usage:
    # Cached prompt tokens are reported apart from input_tokens; all of them were sent.
    prompt = (
        as_int(usage.get("input_tokens"))
        + as_int(usage.get("cache_creation_input_tokens"))
        + as_int(usage.get("cache_read_input_tokens"))
    )
    return Usage(prompt, as_int(usage.get("output_tokens")))


class GeminiProvider(HTTPProvider):
    """``POST {base_url}/models/{model}:generateContent`` (Google Gemini API)."""

    name = "gemini"
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"
    default_key_env = "GEMINI_API_KEY"

    def _call(self, system: str | None, prompt: str) -> _Call:
        payload: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": prompt}]}]}
        if system:
            payload["systemInstruction"] = {"parts": [{"text": system}]}
        config = _given(
            temperature=self.temperature, seed=self.seed, maxOutputTokens=self.max_tokens
        )
        if config:
            payload["generationConfig"] = config
        model = self.model.removeprefix("models/")
        method = "streamGenerateContent?alt=sse" if self.stream else "generateContent"
        auth = {"x-goog-api-key": self._api_key or ""}
        return f"{self.base_url}/models/{model}:{method}", payload, auth

    def _stream(self, events: Iterator[dict[str, Any]]) -> Completion:
        chunks = [self._reply(c, None) for c in events]
        usages = [c.usage for c in chunks if c.usage is not None]
        return Completion(
            "".join(c.text for c in chunks),
            next((c.finish_reason for c in reversed(chunks) if c.finish_reason), None),
            usages[-1] if usages else None,  # usageMetadata in a stream is cumulative
            next((c.model for c in reversed(chunks) if c.model), None),
        )

    def _reply(self, data: dict[str, Any], response: AnyReply | None) -> Completion:
        candidates = data.get("candidates") or []
        text, finish = "", None
        if candidates:
            candidate = candidates[0]
            parts = (candidate.get("content") or {}).get("parts") or []
            # Gemini 2.5 may return its reasoning as parts marked thought=true.
            text = "".join(
                p.get("text", "") for p in parts if isinstance(p, dict) and not p.get("thought")
            )
            finish = candidate.get("finishReason")
        else:
            # A blocked prompt has no candidates, only promptFeedback.blockReason.
            finish = (data.get("promptFeedback") or {}).get("blockReason")
        meta = data.get("usageMetadata")
        usage = None
        if isinstance(meta, dict):  # thinking tokens are billed as output tokens
            n = [as_int(meta.get(f"{k}TokenCount")) for k in ("prompt", "candidates", "thoughts")]
            usage = Usage(n[0], n[1] + n[2])
        return Completion(text, finish, usage, data.get("modelVersion"))


class OllamaProvider(OpenAIProvider):
    """Ollama's OpenAI-compatible endpoint: local, so no key by default."""

    name = "ollama"
    default_base_url = "http://localhost:11434/v1"
    default_key_env = None


_KINDS: dict[str, type[HTTPProvider]] = {
    "openai": OpenAIProvider,
    "ollama": OllamaProvider,
    "anthropic": AnthropicProvider,
    "gemini": GeminiProvider,
}
# The classes whose requests and replies replay may look up by key (``replay_key``).
_BUILT_IN = frozenset(_KINDS.values())


def from_config(provider: str = "openai", *, model: str, **settings: Any) -> HTTPProvider:
    """An HTTP provider from plain settings (:class:`HTTPProvider`'s keyword arguments).
    ``api_key_env`` NAMES the key's variable; None: the provider's usual one (none for a
    loopback base_url); "": never send a key."""
    cls = _KINDS.get(provider.strip().lower() if isinstance(provider, str) else "")
    if cls is None:
        raise ConfigError(
            f"provider: expected one of {sorted(_KINDS)}, got {provider!r}. Any OpenAI-"
            "compatible server (vLLM, Ollama, LM Studio, gateways) uses 'openai' with its base_url."
        )
    return cls(model, **settings)


def configure(
    recommender: Any,
    *,
    temperature: float | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
    header_envs: Mapping[str, str] | None = None,
) -> Any:
    """``recommender`` with the settings that are given (None: keep its own)."""
    if not isinstance(recommender, HTTPProvider):
        return recommender
    changes = _given(temperature=temperature, max_tokens=max_tokens, seed=seed)
    if not changes and not header_envs:
        return recommender
    out = copy.copy(recommender)
    vars(out).update(changes)
    if header_envs:
        values = {h: os.environ[v] for h, v in header_envs.items() if os.environ.get(v)}
        out.extra_headers = {**recommender.extra_headers, **values}
        # Every value is treated as a secret: scrubbed from cassettes and messages.
        out.secrets = tuple(dict.fromkeys([*recommender.secrets, *values.values()]))
        secrets.register(out.secrets)
        out.missing_header_envs = tuple(v for v in header_envs.values() if not os.environ.get(v))
    return out
