"""The simulator's rate limits: requests and tokens per minute as token buckets, stated on
every chat reply in the services' own headers, and a 429 with ``Retry-After`` past them.

Each bucket holds ``burst_s`` seconds of its limit (at least one request; a request
larger than the whole tokens bucket passes only when the bucket is full) and refills
continuously, so over any stretch longer than the burst the server admits at most the
limit: 1,200 requests at 600 per minute take at least ~119 s. A request is charged its
reply's tokens (prompt plus completion, the usage the reply reports) when it arrives;
a refused request is charged nothing.

Headers: OpenAI's ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` (resets as Go
durations, the time until the bucket is full again) on ``/v1/chat/completions``,
Anthropic's ``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}`` (RFC 3339
times) on ``/v1/messages``. Stdlib only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pytest_recfair.errors import ConfigError

__all__ = ["Limiter", "go_duration"]


def go_duration(seconds: float) -> str:
    """Seconds as OpenAI writes a reset: ``20ms``, ``1.5s``, ``6m0s``."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes else text


@dataclass
class _Bucket:
    per_minute: float
    burst_s: float
    level: float = 0.0
    at: float = 0.0

    def __post_init__(self) -> None:
        self.level = self.capacity

    @property
    def rate(self) -> float:
        return self.per_minute / 60.0

    @property
    def capacity(self) -> float:
        return max(1.0, self.rate * self.burst_s)

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
        self.requests = _Bucket(float(rpm), burst_s, at=now) if rpm else None
        self.tokens = _Bucket(float(tpm), burst_s, at=now) if tpm else None

    def admit(self, tokens: int) -> float | None:
        """Charge one request of ``tokens``; None if admitted, else the seconds to wait."""
        now = self.clock()
        wait = 0.0
        for bucket, amount in ((self.requests, 1.0), (self.tokens, float(tokens))):
            if bucket is not None:
                bucket.refill(now)
                wait = max(wait, bucket.short(amount))
        if wait > 0:
            return wait
        if self.requests is not None:
            self.requests.level -= 1.0
        if self.tokens is not None:
            self.tokens.level -= float(tokens)
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
