"""Scrub secrets from anything the plugin writes or prints.

Every output channel (terminal messages, JUnit properties, reports, baselines, cassettes,
error messages quoting a service's reply or a URL) goes through :func:`scrub` or one of
its typed siblings before it leaves the process. Two kinds of secret are removed:

* **configured values** -- the API keys the providers read from environment variables,
  registered with :func:`register` (plain, URL-encoded and JSON-escaped forms);
* **secrets by shape** -- whatever follows an auth header or cookie name (``Authorization:
  Bearer ...``, ``x-api-key: ...``, ``Cookie: ...``), key query parameters (``?key=``,
  ``api_key=``, ``access_token=`` ...), JSON fields named like keys (``"api_key": "..."``)
  and the published key formats of OpenAI (``sk-...``), Anthropic (``sk-ant-...``) and
  Google (``AIza...``), so a key nobody registered is still caught.

Each is replaced by :data:`FILTERED`. Pure: stdlib only (no pytest, httpx or vcr), so the
report and baseline writers can use it. A :class:`Scrubber` holds a set of values; the
module functions use one process-wide scrubber, because a key read by a provider on a
worker thread must also be removed from the summary the plugin prints at the end.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Final, TypeVar, cast
from urllib.parse import quote, quote_plus

__all__ = [
    "FILTERED",
    "MIN_SECRET_CHARS",
    "SECRET_HEADERS",
    "SECRET_QUERY_PARAMS",
    "Scrubber",
    "is_secret_header",
    "register",
    "register_env",
    "registered",
    "scrub",
    "scrub_bytes",
    "scrub_headers",
    "scrub_json",
    "scrub_values",
    "scrub_values_bytes",
]

FILTERED: Final = "<filtered>"
#: Shorter values are not registered: replacing "test" everywhere would mangle file and
#: test names, and no real API key is this short.
MIN_SECRET_CHARS: Final = 8

#: Header names whose value is a credential, whatever it looks like.
SECRET_HEADERS: Final[frozenset[str]] = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "api-key",
        "x-api-key",
        "x-goog-api-key",
        "openai-organization",
        "openai-project",
        "cookie",
        "set-cookie",
        "x-auth-token",
    }
)
#: Query parameter (and JSON field) names whose value is a credential.
SECRET_QUERY_PARAMS: Final[frozenset[str]] = frozenset(
    {
        "key",
        "api_key",
        "api-key",
        "apikey",
        "access_token",
        "auth_token",
        "token",
        "secret",
        "client_secret",
        "password",
        "x-goog-api-key",
        "sig",
        "signature",
    }
)
# Header names matched by part too: "x-custom-api-key", "x-session-token".
_HEADER_PARTS: Final = ("key", "token", "secret", "auth", "cookie", "password")
_HEADER_PART_EXCEPTIONS: Final = frozenset({"x-recfair-case", "keep-alive"})

_HEADER_ALT = "|".join(re.escape(h) for h in sorted(SECRET_HEADERS, key=len, reverse=True))
_PARAM_ALT = "|".join(re.escape(p) for p in sorted(SECRET_QUERY_PARAMS, key=len, reverse=True))
# (rule, replacement) pairs applied in order; each keeps the name and drops the value.
_RULES: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    # "Authorization: Bearer sk-..." / "x-api-key=..." up to the end of the line
    (
        re.compile(rf"(?i)(?<![\w-])((?:{_HEADER_ALT})[\"']?\s*[:=]\s*)[^\s\"',}}][^\r\n\"',}}]*"),
        r"\1",
    ),
    # {"authorization": "Bearer ..."} / 'x-api-key': '...' in a printed dict or JSON
    (
        re.compile(rf"(?i)([\"'](?:{_HEADER_ALT}|{_PARAM_ALT})[\"']\s*[:=]\s*[\"'])[^\"'\r\n]*"),
        r"\1",
    ),
    # ?key=..., &api_key=..., ;access_token=... in URLs and form bodies
    (re.compile(rf"(?i)([?&;](?:{_PARAM_ALT})=)[^&#\s\"'<>;]*"), r"\1"),
    # "Bearer <token>": only a token-like word (a digit in it, 12+ chars), not "Basic Instinct"
    (re.compile(r"\b([Bb]earer|BEARER|Basic)\s+(?=[\w.~+/=-]*\d)[A-Za-z0-9._~+/=-]{12,}"), r"\1 "),
    # published key formats: OpenAI, Anthropic, Google API keys and OAuth tokens
    (re.compile(r"\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}"), ""),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), ""),
    (re.compile(r"\bya29\.[0-9A-Za-z_-]{16,}"), ""),
)
# Cheap pre-check: text without any of these cannot match a shape rule.
_SHAPE_HINTS: Final = re.compile(
    rf"(?i)sk-|AIza|ya29\.|bearer|basic|token|=|{_HEADER_ALT}|\"(?:{_PARAM_ALT})\""
)

T = TypeVar("T")


def is_secret_header(name: str) -> bool:
    """Is a header named ``name`` a credential (auth, key, token, cookie ...)?"""
    low = name.strip().lower()
    if low in SECRET_HEADERS:
        return True
    return low not in _HEADER_PART_EXCEPTIONS and any(p in low for p in _HEADER_PARTS)


def _forms(value: str) -> set[str]:
    """The ways a value shows up in text: as is, URL-encoded, JSON-escaped."""
    return {
        value,
        quote(value, safe=""),
        quote_plus(value, safe=""),
        json.dumps(value)[1:-1],
    }


class Scrubber:
    """Removes registered secret values and secrets by shape from text, bytes, headers and
    JSON values. Thread-safe; registering is rare, scrubbing is frequent."""

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self.add(values)

    def add(self, values: Iterable[str | None]) -> None:
        """Register secret values; None, blanks and values under MIN_SECRET_CHARS are
        ignored (unset variables give None or "")."""
        if isinstance(values, str):
            raise TypeError("Scrubber.add() takes a list of values, got one str; wrap it: [key]")
        with self._lock:
            for value in values:
                if value is None:
                    continue
                if not isinstance(value, str):
                    raise TypeError(f"secret values must be str, got {type(value).__name__}")
                if len(value.strip()) >= MIN_SECRET_CHARS:
                    self._values |= _forms(value.strip())
            # longest first, so a secret containing another is replaced whole
            alts = sorted(self._values, key=len, reverse=True)
            self._pattern = re.compile("|".join(map(re.escape, alts))) if alts else None

    @property
    def values(self) -> frozenset[str]:
        """Every registered form of every value (for tests that grep written files)."""
        return frozenset(self._values)

    def scrub_text(self, text: str) -> str:
        """``text`` with every secret replaced by FILTERED."""
        pattern = self._pattern
        if pattern is not None:
            text = pattern.sub(FILTERED, text)
        if _SHAPE_HINTS.search(text) is None:
            return text
        for rule, keep in _RULES:
            text = rule.sub(keep + FILTERED if keep else FILTERED, text)
        return text

    def scrub_values(self, text: str) -> str:
        """``text`` with every registered value replaced, but no shape rule applied: for
        data files, where a field named "key" or a title like "sk-8" is data."""
        pattern = self._pattern
        return text if pattern is None else pattern.sub(FILTERED, text)

    def scrub_bytes(self, data: bytes) -> bytes:
        """Bytes scrubbed as text; bytes that are not UTF-8 survive unchanged around it."""
        text = data.decode("utf-8", "surrogateescape")
        out = self.scrub_text(text)
        return data if out == text else out.encode("utf-8", "surrogateescape")

    def scrub_headers(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Credential headers get FILTERED as value; other values are scrubbed as text."""
        return [
            (name, FILTERED if is_secret_header(name) else self.scrub_text(value))
            for name, value in headers
        ]

    def scrub_json(self, value: T) -> T:
        """A JSON-like value (dicts, lists, strings, numbers) with every string scrubbed and
        every field named like a credential replaced by FILTERED."""
        return cast(T, self._json(value))

    def _json(self, value: object) -> object:
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, Mapping):
            return {
                (self.scrub_text(k) if isinstance(k, str) else k): (
                    FILTERED if _secret_field(k) and isinstance(v, str) else self._json(v)
                )
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return type(value)(self._json(v) for v in value)
        return value


def _secret_field(name: object) -> bool:
    if not isinstance(name, str):
        return False
    low = name.lower()
    return low in SECRET_QUERY_PARAMS or low in SECRET_HEADERS


# --------------------------------------------------------------------------- process-wide

_GLOBAL = Scrubber()


def register(values: Iterable[str | None]) -> None:
    """Add secret values (API keys) to the process-wide scrubber."""
    _GLOBAL.add(values)


def register_env(names: Iterable[str | None], environ: Mapping[str, str]) -> None:
    """Add the values of the named environment variables (``environ`` is ``os.environ``)."""
    register(environ.get(n) for n in names if n)


def scrub(text: str) -> str:
    """``text`` without any registered secret or secret by shape."""
    return _GLOBAL.scrub_text(text)


def scrub_values(text: str) -> str:
    """``text`` without any registered secret value (no shape rules: for data files)."""
    return _GLOBAL.scrub_values(text)


def scrub_values_bytes(data: bytes) -> bytes:
    """``data`` without any registered secret value; other bytes unchanged."""
    if not _GLOBAL.values:
        return data
    text = data.decode("utf-8", "surrogateescape")
    out = _GLOBAL.scrub_values(text)
    return data if out == text else out.encode("utf-8", "surrogateescape")


def scrub_bytes(data: bytes) -> bytes:
    """``data`` scrubbed like text."""
    return _GLOBAL.scrub_bytes(data)


def scrub_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Header pairs with credential values FILTERED and others scrubbed."""
    return _GLOBAL.scrub_headers(headers)


def scrub_json(value: T) -> T:
    """A JSON-like value with every string scrubbed and credential fields FILTERED."""
    return _GLOBAL.scrub_json(value)


def registered() -> frozenset[str]:
    """Every registered form of every secret value (tests grep written files for them)."""
    return _GLOBAL.values
