"""Shared provider types (Usage, Completion, Provider) and body helpers: gzip undone, SSE
split into JSON payloads, error messages, and the reply size cap (a runaway reply is cut
with a note before anything stores or parses it)."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

import httpx

from pytest_recfair import fileio
from pytest_recfair.errors import ConfigError, ProviderError

# What each service says when the reply hit max_tokens (OpenAI / Anthropic / Gemini).
TRUNCATED_FINISH_REASONS = frozenset({"length", "max_tokens", "MAX_TOKENS"})


class TruncatedReply(ProviderError):
    """The body ended before the JSON did: a dropped connection or proxy, worth a retry."""


class GarbledReply(ProviderError):
    """A 2xx whose body is not JSON at all (a proxy page, garbage): worth a retry."""


# Usage and Completion are not frozen (nothing assigns to them; unsafe_hash keeps them
# hashable): a frozen dataclass's __init__ is 3-4x a plain one's, ~0.7 us a replayed case.
@dataclass(slots=True, unsafe_hash=True)
class Usage:
    """Tokens billed for one or more requests."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )

    def cost(self, prices: tuple[float, float]) -> float:
        """USD for these tokens at ``prices`` = (USD per 1M prompt, per 1M completion tokens)."""
        return (self.prompt_tokens * prices[0] + self.completion_tokens * prices[1]) / 1_000_000


@dataclass(slots=True, unsafe_hash=True)
class Completion:
    """One reply; ``finish_reason`` is the service's own word (``stop``, ``end_turn``...)."""

    text: str
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str | None = None

    @property
    def truncated(self) -> bool:
        return self.finish_reason in TRUNCATED_FINISH_REASONS


@runtime_checkable
class Provider(Protocol):
    """An HTTP recommender; ``secrets``: the credentials it sends, scrubbed from cassettes."""

    name: str
    model: str
    secrets: tuple[str, ...]

    def build_request(self, system: str | None, prompt: str) -> httpx.Request: ...

    def parse_response(self, response: httpx.Response) -> Completion: ...


@dataclass(slots=True)
class RecordedReply:
    """A recorded 2xx reply for ``parse_response``: an httpx.Response cost as much to read as
    to parse. ``text``: the body as the cassette holds it (never gzip: those bytes are not
    UTF-8); ``headers``: lower-case name -> value, repeats joined by ", " (as httpx)."""

    text: str
    headers: Mapping[str, str]

    @property
    def request(self) -> httpx.Request:
        raise RuntimeError("a reply replayed by key carries no request")  # as httpx's


# What the body helpers read: a live (or transported) response, or a recorded reply.
AnyReply = httpx.Response | RecordedReply


def _raw(response: httpx.Response) -> bytes:
    data = response.content
    # A cassette may hand back the gzip bytes without the Content-Encoding header that
    # would have made httpx decode them; the magic number is unambiguous for JSON/SSE.
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise TruncatedReply(
                f"the response body from {response_url(response)} is gzip data that is cut "
                f"off or corrupt ({exc}); re-run, or re-record the cassette if it came from one"
            ) from None
    return data


def response_text(response: AnyReply) -> str:
    """The body as text (UTF-8, undoing a stray gzip layer)."""
    if isinstance(response, RecordedReply):
        return response.text
    return _raw(response).decode("utf-8", errors="replace")


def response_url(response: AnyReply) -> str:
    try:
        return str(response.request.url)
    except RuntimeError:  # a Response built by hand has no request
        return "the service"


def _snippet(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def json_body(response: AnyReply, *, provider: str) -> dict[str, Any]:
    """Decode a JSON object body, with one clear ProviderError for non-JSON or cut-off bodies."""
    text = response_text(response)
    try:
        data = fileio.loads(text)
    except json.JSONDecodeError:
        if text.lstrip().startswith("{") and not text.rstrip().endswith("}"):
            raise TruncatedReply(
                f"{provider}: the JSON reply from {response_url(response)} is cut off after "
                f"{len(text)} characters: {_snippet(text, 80)!r}. The connection or a proxy "
                "dropped it; re-run (the runner retries this), or re-record the cassette."
            ) from None
        if not text.strip():
            what = "an empty body"
        else:
            ctype = response.headers.get("content-type", "no content-type")
            what = f"a body that is not JSON ({ctype}): {_snippet(text)!r}"
        raise GarbledReply(
            f"{provider}: expected a JSON reply from {response_url(response)}, got {what}. "
            "Check that base_url points at the API (not a web page or proxy login) and re-run."
        ) from None
    if not isinstance(data, dict):
        raise ProviderError(
            f"{provider}: expected a JSON object from {response_url(response)}, got "
            f"{type(data).__name__}: {_snippet(text)!r}. Check base_url and the provider kind."
        )
    _raise_embedded_error(data, provider, response)
    return data


def _raise_embedded_error(data: dict[str, Any], provider: str, response: AnyReply) -> None:
    # Gateways and streams report failures as {"error": {...}} even with status 200.
    if data.get("error") or data.get("type") == "error":
        raise ProviderError(
            f"{provider}: {response_url(response)} answered with an error: {_error_message(data)}. "
            "Fix the request options it names, or re-run if it says the service is overloaded."
        )


def _error_message(data: Any) -> str:
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("msg") or err.get("detail")
            if msg:
                kind = err.get("type") or err.get("status") or err.get("code")
                return f"{msg} ({kind})" if kind else str(msg)
        elif isinstance(err, str):
            return err
    return _snippet(json.dumps(data))


def error_detail(response: httpx.Response) -> str:
    """The service's own explanation of an error response, short enough for one line."""
    text = response_text(response)
    try:
        return _snippet(_error_message(json.loads(text)))
    except (json.JSONDecodeError, RecursionError):
        return _snippet(text) if text.strip() else "(empty body)"


def is_event_stream(response: AnyReply) -> bool:
    ctype = response.headers.get("content-type", "")
    if "text/event-stream" in ctype:
        return True
    if isinstance(response, RecordedReply):  # the bytes' whitespace: ASCII only
        return response.text[:64].lstrip(" \t\n\r\x0b\x0c").startswith(("data:", "event:"))
    return _raw(response)[:64].lstrip().startswith((b"data:", b"event:"))


def sse_payloads(response: AnyReply, *, provider: str) -> Iterator[dict[str, Any]]:
    """The JSON ``data:`` payloads of a server-sent event stream, in order, up to ``[DONE]``."""
    text = response_text(response).replace("\r\n", "\n")
    blocks = text.split("\n\n")
    for index, block in enumerate(blocks):
        data_lines = [
            line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")
        ]
        if not data_lines:
            continue
        data = "\n".join(data_lines)
        if data.strip() == "[DONE]":
            return
        try:
            payload = json.loads(data)
        except json.JSONDecodeError:
            if not "".join(blocks[index + 1 :]).strip():
                # The last event broke off: the connection dropped mid-stream.
                raise TruncatedReply(
                    f"{provider}: the event stream from {response_url(response)} is cut off "
                    f"in its last event: {_snippet(data, 80)!r}. Re-run (the runner retries "
                    "this), or re-record the cassette."
                ) from None
            raise ProviderError(
                f"{provider}: an event in the stream from {response_url(response)} is not "
                f"JSON: {_snippet(data)!r}. Check that base_url is the provider's API."
            ) from None
        if isinstance(payload, dict):
            _raise_embedded_error(payload, provider, response)
            yield payload


def bad_value(name: str, expected: str, value: object, then: str = "") -> ConfigError:
    return ConfigError(f"{name}: expected {expected}, got {value!r}.{then}")


def as_int(value: Any) -> int:
    """A token count from a usage block; absent, null or absurd (negative, a billion or
    more: no reply is that long, and the pacer's floats could not hold it) counts as 0."""
    return value if type(value) is int and 0 <= value < 10**9 else 0


_NOTE_MARK: Final = "[recfair: reply cut at "


def was_cut(text: str) -> bool:
    return _NOTE_MARK in text[-200:]


def cut_text(text: str, limit: int) -> tuple[str, bool]:
    """``(text, False)`` when it fits, else ``(first limit chars + note, True)``; the note
    is on its own line, so it never joins a title."""
    if len(text) <= limit:
        return text, False
    note = f"{_NOTE_MARK}{limit:,} of {len(text):,} characters; raise recfair_max_reply_chars"
    return f"{text[:limit]}\n{note} to keep more]", True


def cut_json(value: object, limit: int) -> tuple[object, int]:
    """A decoded JSON value with every string longer than ``limit`` cut (with the note),
    and how many were cut. Containers are copied only where something was cut."""
    if isinstance(value, str):
        out, cut = cut_text(value, limit)
        return out, int(cut)
    if not isinstance(value, dict | list):
        return value, 0
    pairs = value.items() if isinstance(value, dict) else enumerate(value)
    done = {k: cut_json(v, limit) for k, v in pairs}
    total = sum(n for _, n in done.values())
    if not total:
        return value, 0
    items = {k: v for k, (v, _) in done.items()}
    return (items if isinstance(value, dict) else list(items.values())), total
