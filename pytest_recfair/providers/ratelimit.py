"""What a provider says about its rate limits, read from a reply (headers or a 429 body).

- OpenAI (and compatible servers, the simulator): ``x-ratelimit-{limit,remaining,reset}-
  {requests,tokens}``; resets are Go durations (``12ms``, ``1s``, ``6m0s``).
- Anthropic: ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
  {limit,remaining,reset}``; resets are RFC 3339 times. The combined ``tokens`` limit is
  used when sent, else the input-tokens one (the tighter of the two on a recommender's
  short replies is the one that counts prompts).
- Gemini: no headers; a 429's ``error.details`` carry a ``RetryInfo`` (``retryDelay``
  ``"37s"``) and a ``QuotaFailure`` whose violations name the per-minute quota and its value.

Limits are per minute (what the services' first tiers state); a value that does not parse
is ignored, never guessed. Pure: stdlib only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = ["Seen", "gemini_quota", "parse_duration", "parse_reset", "read_headers"]

_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|us|µs|ns|h|m|s)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@dataclass(frozen=True, slots=True)
class Seen:
    """The limits one reply states (None: not stated). Resets are seconds from now."""

    requests_limit: int | None = None
    requests_remaining: int | None = None
    requests_reset: float | None = None
    tokens_limit: int | None = None
    tokens_remaining: int | None = None
    tokens_reset: float | None = None


def parse_duration(text: str) -> float | None:
    """A Go duration (``6m0s``, ``20ms``, ``1.5s``) or plain seconds (``37``) in seconds."""
    text = text.strip()
    if not text:
        return None
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    total, end = 0.0, 0
    for match in _DURATION.finditer(text):
        if match.start() != end:
            return None
        total += float(match.group(1)) * _UNIT[match.group(2)]
        end = match.end()
    return total if end == len(text) and end else None


def parse_reset(text: str, *, now: datetime | None = None) -> float | None:
    """Seconds until a reset given as a duration or an RFC 3339 time (Anthropic)."""
    seconds = parse_duration(text)
    if seconds is not None:
        return seconds
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _count(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        number = int(float(value.strip()))
    except ValueError:
        return None
    return number if number >= 0 else None


def read_headers(headers: Mapping[str, str], *, now: datetime | None = None) -> Seen | None:
    """The limits in a reply's headers (OpenAI or Anthropic names), None if it states none.
    ``headers`` is looked up by lower-case name (``httpx.Headers`` or a lower-cased dict)."""

    def reset(name: str) -> float | None:
        value = headers.get(name)
        return None if value is None else parse_reset(value, now=now)

    openai = headers.get("x-ratelimit-limit-requests") or headers.get("x-ratelimit-limit-tokens")
    if openai is not None:
        seen = Seen(
            _count(headers.get("x-ratelimit-limit-requests")),
            _count(headers.get("x-ratelimit-remaining-requests")),
            reset("x-ratelimit-reset-requests"),
            _count(headers.get("x-ratelimit-limit-tokens")),
            _count(headers.get("x-ratelimit-remaining-tokens")),
            reset("x-ratelimit-reset-tokens"),
        )
    else:
        tokens = next(
            (
                f"anthropic-ratelimit-{name}"
                for name in ("tokens", "input-tokens")
                if f"anthropic-ratelimit-{name}-limit" in headers
            ),
            None,
        )
        if tokens is None and "anthropic-ratelimit-requests-limit" not in headers:
            return None
        seen = Seen(
            _count(headers.get("anthropic-ratelimit-requests-limit")),
            _count(headers.get("anthropic-ratelimit-requests-remaining")),
            reset("anthropic-ratelimit-requests-reset"),
            _count(headers.get(f"{tokens}-limit")) if tokens else None,
            _count(headers.get(f"{tokens}-remaining")) if tokens else None,
            reset(f"{tokens}-reset") if tokens else None,
        )
    return seen if seen.requests_limit is not None or seen.tokens_limit is not None else None


def gemini_quota(body: bytes | str) -> tuple[float | None, Seen | None]:
    """(retryDelay seconds, the per-minute quotas named) from a Gemini 429 error body."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None, None
    error = data.get("error") if isinstance(data, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    if not isinstance(details, list):
        return None, None
    delay: float | None = None
    requests = tokens = None
    for item in details:
        if not isinstance(item, dict):
            continue
        kind = str(item.get("@type", ""))
        if kind.endswith("RetryInfo") and isinstance(item.get("retryDelay"), str):
            delay = parse_duration(item["retryDelay"])
        for violation in item.get("violations") or () if kind.endswith("QuotaFailure") else ():
            requests, tokens = _violation(violation, requests, tokens)
    seen = Seen(requests_limit=requests, tokens_limit=tokens) if requests or tokens else None
    return delay, seen


def _violation(item: Any, requests: int | None, tokens: int | None) -> tuple[int | None, ...]:
    """A QuotaFailure violation's per-minute quota (``quotaId`` names what it counts)."""
    if not isinstance(item, dict):
        return requests, tokens
    name = f"{item.get('quotaId', '')} {item.get('quotaMetric', '')}".lower()
    value = _count(str(item.get("quotaValue", "")))
    if value is None or "perminute" not in name.replace("_", "").replace("-", ""):
        return requests, tokens
    if "token" in name:
        return requests, value if tokens is None else min(tokens, value)
    if "request" in name:
        return value if requests is None else min(requests, value), tokens
    return requests, tokens
