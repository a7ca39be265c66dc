"""What the sim server says on the wire: bodies in the services' shapes, and rate limits.

Shared by ``server`` and ``batch``, so a batch reply is byte for byte the synchronous one.
Rate limits are token buckets of ``burst_s`` seconds of the limit (at least one request),
refilled continuously; a request is charged its reply's tokens when it arrives, a refused
one nothing. They are stated in OpenAI's ``x-ratelimit-*`` headers (resets as Go
durations) or, on ``/v1/messages``, Anthropic's ``anthropic-ratelimit-*`` (RFC 3339).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from pytest_recfair.errors import ConfigError

# Fixed so that recorded cassettes are byte-identical from run to run.
CREATED: Final = 1_767_225_600  # 2026-01-01T00:00:00Z


def content_text(content: object) -> str:
    """Message content as text: a string, or a list of ``{"type": "text"}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def prompt_parts(payload: dict[str, Any]) -> tuple[str | None, list[str]]:
    """(system text or None, user message texts) of an OpenAI or Anthropic request body."""
    messages = payload.get("messages")
    if not isinstance(messages, list):
        return None, []
    systems = [
        content_text(m.get("content"))
        for m in messages
        if isinstance(m, dict) and m.get("role") in ("system", "developer")
    ]
    if payload.get("system") is not None:  # Anthropic: a top-level field
        systems.insert(0, content_text(payload["system"]))
    users = [
        content_text(m.get("content"))
        for m in messages
        if isinstance(m, dict) and m.get("role") == "user"
    ]
    return "\n".join(systems) or None, users


def reply_body(
    body: bytes, payload: dict[str, Any], text: str, default_model: str, *, anthropic: bool
) -> dict[str, Any]:
    """The OpenAI ``chat.completion`` (or Anthropic ``message``) answering ``payload``."""
    system, users = prompt_parts(payload)
    prompt_tokens = sum(len(u.split()) for u in users) + len((system or "").split())
    completion_tokens = len(text.split())
    digest = hashlib.blake2b(body, digest_size=12).hexdigest()
    model = str(payload.get("model") or default_model)
    if anthropic:
        return {
            "id": f"msg_sim_{digest}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens},
        }
    message = {"role": "assistant", "content": text, "refusal": None}
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    return {
        "id": f"chatcmpl-sim-{digest}",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [choice],
        "usage": usage | {"total_tokens": prompt_tokens + completion_tokens},
        "system_fingerprint": "fp_recfair_sim",
    }


def go_duration(seconds: float) -> str:
    """Seconds as OpenAI writes a reset: ``20ms``, ``1.5s``, ``6m0s``."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes else text


class _Bucket:
    """``burst_s`` seconds of a per-minute limit (at least one unit), full at first."""

    def __init__(self, per_minute: float, burst_s: float, at: float) -> None:
        self.per_minute, self.rate, self.at = per_minute, per_minute / 60.0, at
        self.capacity = self.level = max(1.0, self.rate * burst_s)

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + max(0.0, now - self.at) * self.rate)
        self.at = max(self.at, now)

    def short(self, amount: float) -> float:
        """Seconds until ``amount`` fits (0: now)."""
        need = min(amount, self.capacity)  # larger than the bucket: wait until it is full
        return 0.0 if self.level >= need else (need - self.level) / self.rate

    def full_in(self) -> float:
        return max(0.0, (self.capacity - self.level) / self.rate)


class Limiter:
    """Requests- and tokens-per-minute limits of one simulated key (None: no limit)."""

    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        *,
        burst_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        for name, value in (("rpm", rpm), ("tpm", tpm), ("burst_s", burst_s)):
            if value is not None and not (isinstance(value, int | float) and value > 0):
                raise ConfigError(
                    f"SimServer({name}=...): expected a number > 0 (per minute; burst in "
                    f"seconds), got {value!r}; leave rpm/tpm None for no limit."
                )
        self.clock = clock
        now = clock()
        self.requests = _Bucket(float(rpm), burst_s, now) if rpm else None
        self.tokens = _Bucket(float(tpm), burst_s, now) if tpm else None

    def admit(self, tokens: int) -> float | None:
        """Charge one request of ``tokens``; None if admitted, else the seconds to wait."""
        now = self.clock()
        pairs = ((self.requests, 1.0), (self.tokens, float(tokens)))
        charged = [(bucket, amount) for bucket, amount in pairs if bucket is not None]
        for bucket, _ in charged:
            bucket.refill(now)
        wait = max((bucket.short(amount) for bucket, amount in charged), default=0.0)
        if wait > 0:
            return wait
        for bucket, amount in charged:
            bucket.level -= amount
        return None

    def headers(self, *, anthropic: bool = False) -> dict[str, str]:
        """The limits as the service states them on a reply."""
        now = self.clock()
        out: dict[str, str] = {}
        for name, bucket in (("requests", self.requests), ("tokens", self.tokens)):
            if bucket is None:
                continue
            bucket.refill(now)
            limit, left = str(int(bucket.per_minute)), str(max(0, math.floor(bucket.level)))
            if anthropic:
                when = datetime.now(UTC) + timedelta(seconds=bucket.full_in())
                out[f"anthropic-ratelimit-{name}-limit"] = limit
                out[f"anthropic-ratelimit-{name}-remaining"] = left
                out[f"anthropic-ratelimit-{name}-reset"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
            else:
                out[f"x-ratelimit-limit-{name}"] = limit
                out[f"x-ratelimit-remaining-{name}"] = left
                out[f"x-ratelimit-reset-{name}"] = go_duration(bucket.full_in())
        return out
