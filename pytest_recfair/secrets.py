"""The one scrubber: every output channel goes through :func:`scrub` or a typed sibling.
Registered values (plain, URL-encoded, JSON-escaped) and secrets by shape (an unregistered
key too) become :data:`FILTERED`. One process-wide :class:`Scrubber`: a key read on a
worker thread must leave the final summary too."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Final, TypeGuard, TypeVar, cast
from urllib.parse import quote, quote_plus

FILTERED: Final = "<filtered>"

# No real key is under 8 characters, and replacing a placeholder ("test") would mangle
# names people read; cassettes have always replaced 4 or more (their replay keys too).
MIN_SECRET_CHARS: Final = 8
MIN_CASSETTE_SECRET_CHARS: Final = 4

#: Credential headers, also dropped by the cassettes; x-request-id ties to the account.
SECRET_HEADERS: Final[frozenset[str]] = frozenset((
    "authorization", "proxy-authorization", "api-key", "x-api-key", "x-goog-api-key",
    "openai-organization", "openai-project", "cookie", "set-cookie", "x-auth-token", "x-request-id",
))  # fmt: skip
#: Credential query parameters (and JSON fields), also dropped from stored URLs.
SECRET_QUERY_PARAMS: Final[frozenset[str]] = frozenset((
    "key", "api_key", "api-key", "apikey", "access_token", "auth_token", "token", "secret",
    "client_secret", "password", "x-goog-api-key", "sig", "signature",
))  # fmt: skip
_SECRET_FIELDS: Final = SECRET_QUERY_PARAMS | SECRET_HEADERS
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
    # (b'set-cookie', b'...') in the header lists httpcore and h11 log at DEBUG
    (re.compile(rf"(?i)(\(b[\"'](?:{_HEADER_ALT})[\"'],\s*b[\"'])[^\"'\r\n]*"), r"\1"),
    # ?key=..., &api_key=..., ;access_token=... in URLs and form bodies
    (re.compile(rf"(?i)([?&;](?:{_PARAM_ALT})=)[^&#\s\"'<>;]*"), r"\1"),
    # "Bearer <token>": only a token-like word (a digit in it, 12+ chars), not "Basic Instinct"
    (re.compile(r"\b([Bb]earer|BEARER|Basic)\s+(?=[\w.~+/=-]*\d)[A-Za-z0-9._~+/=-]{12,}"), r"\1 "),
    # published key formats: OpenAI, Anthropic, Google API keys and OAuth tokens
    (re.compile(r"\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}"), ""),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), ""),
    (re.compile(r"\bya29\.[0-9A-Za-z_-]{16,}"), ""),
)


def _fewest(words: Iterable[str]) -> tuple[str, ...]:
    """``words`` without those containing another (a text holding it holds the other)."""
    unique = set(words)
    return tuple(sorted(w for w in unique if not any(o != w and o in w for o in unique)))


# Every shape rule needs one of these words: substring tests on the case-folded text skip
# the rules (one ignore-case regex of them took ~60 us per reply, more than the rules).
_SHAPE_HINTS: Final = _fewest(
    [
        *["sk-", "aiza", "ya29.", "bearer", "basic", "token", "="],
        *SECRET_HEADERS,
        *(q + p + q for p in SECRET_QUERY_PARAMS for q in "\"'"),
    ]
)
# re's ignore-case matches these to "i"; case-folding does not make them "i"
_FOLD_EXCEPTIONS: Final = ("\u0130", "\u0131")


def may_hold_shape(text: str) -> bool:
    """Whether ``text`` could match a shape rule (False: it certainly cannot)."""
    if any(c in text for c in _FOLD_EXCEPTIONS):
        return True
    folded = text.casefold()
    return any(h in folded for h in _SHAPE_HINTS)


T = TypeVar("T")


def is_secret_header(name: str) -> bool:
    """Is a header named ``name`` a credential (auth, key, token, cookie ...)?"""
    low = name.strip().lower()
    parts = low not in _HEADER_PART_EXCEPTIONS and any(p in low for p in _HEADER_PARTS)
    return low in SECRET_HEADERS or parts


def is_secret_value(value: str | None, *, minimum: int = MIN_SECRET_CHARS) -> TypeGuard[str]:
    """None, blanks and values under ``minimum`` characters (stripped) are not secrets."""
    return value is not None and len(value.strip()) >= minimum


def forms(value: str) -> set[str]:
    """The ways a value shows up in text: as is, URL-encoded, JSON-escaped."""
    return {
        value,
        quote(value, safe=""),
        quote_plus(value, safe=""),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
    }


# Texts up to this many characters are remembered scrubbed (at most _SHORT_KEPT of them).
_SHORT: Final = 200
_SHORT_KEPT: Final = 50_000


class Scrubber:
    """Thread-safe; registering is rare, scrubbing is frequent."""

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        # short texts scrubbed before (titles repeat across thousands of replies); cleared
        # when a value is added, so a text is never served as scrubbed of fewer values
        self._short: dict[str, str] = {}
        self.add(values)

    def add(self, values: Iterable[str | None]) -> None:
        """Register secret values; see :func:`is_secret_value`."""
        if isinstance(values, str):
            raise TypeError("Scrubber.add() takes a list of values, got one str; wrap it: [key]")
        with self._lock:
            for value in values:
                if value is not None and not isinstance(value, str):
                    raise TypeError(f"secret values must be str, got {type(value).__name__}")
                if is_secret_value(value):
                    self._values |= forms(value.strip())
            # longest first, so a secret containing another is replaced whole
            alts = sorted(self._values, key=len, reverse=True)
            self._pattern = re.compile("|".join(map(re.escape, alts))) if alts else None
            self._short = {}

    @property
    def values(self) -> frozenset[str]:
        """Every registered form of every value (for tests that grep written files)."""
        return frozenset(self._values)

    def scrub_text(self, text: str) -> str:
        if len(text) > _SHORT:
            return self._scrub(text)
        short = self._short
        done = short.get(text)
        if done is None:
            done = self._scrub(text)
            if len(short) >= _SHORT_KEPT:
                short.clear()
            short[text] = done
        return done

    def _scrub(self, text: str) -> str:
        pattern = self._pattern
        if pattern is not None:
            text = pattern.sub(FILTERED, text)
        if not may_hold_shape(text):
            return text
        for rule, keep in _RULES:
            text = rule.sub(keep + FILTERED if keep else FILTERED, text)
        return text

    def scrub_bytes(self, data: bytes, values_only: bool = False) -> bytes:
        """Bytes scrubbed as text; bytes that are not UTF-8 survive unchanged around it.
        ``values_only``: no shape rule, for data files (a field "key", a title "sk-8")."""
        text, pattern = data.decode("utf-8", "surrogateescape"), self._pattern
        if values_only:
            out = text if pattern is None else pattern.sub(FILTERED, text)
        else:
            out = self.scrub_text(text)
        return data if out == text else out.encode("utf-8", "surrogateescape")

    def scrub_headers(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        return [
            (name, FILTERED if is_secret_header(name) else self.scrub_text(value))
            for name, value in headers
        ]

    def scrub_json(self, value: T) -> T:
        """Every string scrubbed, every field named like a credential FILTERED."""
        return cast(T, self._json(value))

    def _json(self, value: object) -> object:
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, Mapping):
            secret = {k for k in value if isinstance(k, str) and k.lower() in _SECRET_FIELDS}
            return {
                self._json(k): FILTERED if k in secret and isinstance(v, str) else self._json(v)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return type(value)(self._json(v) for v in value)
        return value


# --------------------------------------------------------------------------- process-wide

_GLOBAL = Scrubber()
register = _GLOBAL.add
scrub = _GLOBAL.scrub_text
scrub_bytes = _GLOBAL.scrub_bytes
scrub_headers = _GLOBAL.scrub_headers
scrub_json = _GLOBAL.scrub_json


def scrub_values_bytes(data: bytes) -> bytes:
    """``data`` without any registered value (no shape rules: for data files)."""
    return _GLOBAL.scrub_bytes(data, values_only=True) if _GLOBAL.values else data


def registered() -> frozenset[str]:
    """Every registered form of every secret value (tests grep written files for them)."""
    return _GLOBAL.values


# --------------------------------------------------------------------------- logs

# httpx logs URLs at INFO, httpcore/h11/h2/hpack headers at DEBUG. A logger's filters see
# only records logged on it, so each existing descendant gets the filter too.
LOGGERS: Final = ("pytest_recfair", "httpx", "httpcore", "h11", "h2", "hpack")
# httpcore's loggers, named here because a filter cannot wait for them to be created.
_KNOWN: Final = tuple(
    f"httpcore.{name}" for name in ("connection", "http11", "http2", "proxy", "socks")
)


class LogScrubber(logging.Filter):
    """Scrubs a record's message and traceback before any handler sees it (only records
    of an enabled level reach a filter: a run without DEBUG logging pays nothing)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: logging reports it itself
            return True
        clean = scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
        return True


_LOG_FILTER = LogScrubber()
_log_lock = threading.Lock()
_log_users = 0
_log_installed: list[logging.Logger] = []


@contextlib.contextmanager
def scrubbed_logs() -> Iterator[None]:
    """Scrub every record of :data:`LOGGERS` and children; nests, across threads."""
    global _log_users
    with _log_lock:
        _log_users += 1
        if _log_users == 1:
            _log_installed[:] = _loggers()
            for logger in _log_installed:
                logger.addFilter(_LOG_FILTER)
    try:
        yield
    finally:
        with _log_lock:
            _log_users -= 1
            if not _log_users:
                for logger in _log_installed:
                    logger.removeFilter(_LOG_FILTER)
                _log_installed.clear()


def _loggers() -> list[logging.Logger]:
    prefixes = tuple(f"{name}." for name in LOGGERS)
    known = list(logging.root.manager.loggerDict.items())
    existing = [n for n, lg in known if isinstance(lg, logging.Logger) and n.startswith(prefixes)]
    names = dict.fromkeys([*LOGGERS, *_KNOWN, *existing])
    return [logging.getLogger(name) for name in names]
