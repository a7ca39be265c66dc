"""Pacing to an endpoint's requests/tokens per minute, shared by its runs in this process:
the tighter of ``recfair_rpm``/``recfair_tpm`` (split across xdist workers) and what replies
state (headers; Gemini's 429 details; a value that does not parse is ignored). Token buckets
(reserve at once, sleep until due: no lock held across a wait) and an AIMD window."""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, NamedTuple, Protocol

from pytest_recfair.providers.http import is_loopback

MARGIN: Final = 0.97  # of a limit: arrival jitter must not tip a request over it
BURST_S: Final = 0.5  # the client's own burst, in seconds of the limit
DECREASE: Final = 0.7
FLOOR: Final = 0.25  # the paced rate never drops below this share of the limit
INCREASE: Final = 0.01
LEARN: Final = 0.2  # weight of one reply in the tokens-per-estimate ratio


class Gauge:
    """A token bucket for one limit (per minute); inactive while the limit is unknown."""

    __slots__ = ("at", "capacity", "level", "per_minute", "rate")

    def __init__(self) -> None:
        self.per_minute: float | None = None
        self.rate = self.capacity = self.level = self.at = 0.0

    def configure(
        self, per_minute: float | None, factor: float, now: float, *, full: bool = True
    ) -> None:
        """Pace to ``per_minute`` (None: stop). One from a reply's headers starts empty
        (``full=False``): requests already out are not in it."""
        if per_minute is None or per_minute <= 0:
            self.per_minute = None
            return
        fresh = self.per_minute is None
        self._refill(now)
        self.per_minute = per_minute
        self.rate = per_minute / 60.0 * MARGIN * factor
        self.capacity = max(1.0, self.rate * BURST_S)
        if fresh:
            self.level = self.capacity if full else 0.0
        self.level = min(self.level, self.capacity)

    def _refill(self, now: float) -> bool:  # False while inactive
        if self.per_minute is not None and now > self.at:
            self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = max(self.at, now)
        return self.per_minute is not None

    def take(self, amount: float, now: float) -> float:
        """Reserve ``amount``; the seconds until the reservation is due."""
        if not self._refill(now):
            return 0.0
        self.level -= amount
        return 0.0 if self.level >= 0 else -self.level / self.rate

    def give(self, amount: float, now: float) -> None:
        """Give back (negative: take more of) what a reservation over-estimated."""
        if self._refill(now):
            self.level = min(self.capacity, self.level + amount)

    def cap(self, remaining: float, now: float) -> None:
        """Only ``remaining`` is left now (negative: a debt of ``-remaining / rate`` seconds)."""
        if self._refill(now):
            self.level = min(self.level, remaining)


@dataclass
class Endpoint:
    """What this process knows about one endpoint's limits (shared by its runs)."""

    configured: tuple[float | None, float | None] = (None, None)  # rpm, tpm from settings
    seen: Seen | None = None
    requests: Gauge = field(default_factory=Gauge)
    tokens: Gauge = field(default_factory=Gauge)
    factor: float = 1.0  # AIMD share of the limit
    window: float | None = None  # requests in flight; None: no reply yet
    hold_until: float = 0.0
    cut_until: float = 0.0  # one decrease per Retry-After, not one per 429 of a burst
    ratio: float = 1.0  # reply tokens / estimated tokens
    probe: bool = True  # await the first reply alone (a remote endpoint)
    heeds: bool = True  # False: its headers stated a limit too low to pace to (ignored)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def limits(self) -> tuple[float | None, float | None]:
        """(requests, tokens) per minute: the tighter of the settings and the replies."""
        seen, (rpm, tpm) = self.seen or Seen(), self.configured
        return _tighter(rpm, seen.requests_limit), _tighter(tpm, seen.tokens_limit)

    def too_slow(self, debit: float, max_hold: float) -> tuple[str, float] | None:
        """(header, seconds) when a limit the replies state, alone, holds one request
        longer than ``max_hold``: a hostile or broken header, not a pace."""
        seen = self.seen
        if seen is None:
            return None
        for gauge, amount, stated, mine, name in (
            (self.requests, 1.0, seen.requests_limit, self.configured[0], seen.names[0]),
            (self.tokens, debit, seen.tokens_limit, self.configured[1], seen.names[1]),
        ):
            if not stated or stated == mine or gauge.per_minute != stated:
                continue  # not stated, or not what paces (the setting is tighter)
            if amount / gauge.rate > max_hold:
                return f"{name}: {stated}", amount / gauge.rate
        return None

    def retune(self, now: float) -> None:
        rpm, tpm = self.limits()
        rpm_set, tpm_set = self.configured
        self.requests.configure(rpm, self.factor, now, full=rpm_set is not None)
        self.tokens.configure(tpm, self.factor, now, full=tpm_set is not None)


def _tighter(a: float | None, b: float | None) -> float | None:
    known = [x for x in (a, b) if x]
    return min(known) if known else None


_ENDPOINTS: dict[tuple[str, ...], Endpoint] = {}
_REGISTRY = threading.Lock()


def _key(provider: Any) -> tuple[str, ...]:
    names = ("base_url", "model", "api_key_env")
    return (type(provider).__name__, *(str(getattr(provider, n, "")) for n in names))


def _share(limit: float | None) -> float | None:
    """An ini limit is the whole key's: each of N xdist workers gets 1/N of it."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    n = int(workers) if workers.isdigit() and int(workers) > 0 else 1
    return None if limit is None else limit / n


def endpoint_for(provider: Any, rpm: float | None = None, tpm: float | None = None) -> Endpoint:
    """The shared state of ``provider``'s endpoint, with the configured limits applied."""
    with _REGISTRY:
        endpoint = _ENDPOINTS.setdefault(_key(provider), Endpoint())
    base_url = getattr(provider, "base_url", None)
    with endpoint.lock:
        endpoint.probe = not (isinstance(base_url, str) and is_loopback(base_url))
        endpoint.configured = (_share(rpm), _share(tpm))
        endpoint.retune(time.monotonic())
    return endpoint


def known_limits(provider: Any) -> tuple[float | None, float | None]:
    """(requests, tokens) per minute this process knows for ``provider`` (for the plan)."""
    with _REGISTRY:
        endpoint = _ENDPOINTS.get(_key(provider))
    return endpoint.limits() if endpoint is not None else (None, None)


class Ticket(NamedTuple):  # one request's reservation: its tokens estimated and debited
    estimate: float
    debited: float


class Pacer:
    """One run's view of an endpoint: its in-flight window and waits (clock, sleep: tests)."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        concurrency: int,
        max_hold: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.endpoint, self.concurrency = endpoint, concurrency
        self.clock, self.sleep, self.in_flight = clock, sleep, 0
        self.say = say  # the run's output, for a capped header (once)
        self.max_hold = max_hold  # as a retry's (max_retry_after): "a day" must not stall
        self._said: set[str] = set()
        self._freed: asyncio.Condition | None = None

    def _window(self) -> int:
        ep = self.endpoint
        if ep.window is None:  # the first reply tells the limits, unless they were given
            return 1 if ep.probe and not any(ep.configured) else self.concurrency
        return max(1, min(self.concurrency, int(ep.window)))

    async def acquire(self, estimate: float) -> Ticket:
        """Wait for a place in the window and for the request's share of the limits."""
        if self.in_flight >= self._window():
            if self._freed is None:
                self._freed = asyncio.Condition()
            async with self._freed:
                await self._freed.wait_for(lambda: self.in_flight < self._window())
        self.in_flight += 1
        ep, now = self.endpoint, self.clock()
        with ep.lock:
            # nothing is debited while no tokens limit is known, so nothing is given back
            debit = estimate * ep.ratio if ep.tokens.per_minute is not None else 0.0
            wait = max(ep.requests.take(1.0, now), ep.tokens.take(debit, now), ep.hold_until - now)
            hostile = ep.too_slow(debit, self.max_hold) if ep.heeds else None
            if hostile is not None:  # stop pacing to the replies' limits: 429s still hold
                ep.heeds, ep.seen = False, None
                ep.retune(now)
                wait = ep.hold_until - now  # not this request's wait for that limit either
        if hostile is not None:
            self._tell(
                "headers",
                f"recfair: the replies' {hostile[0]} would hold a request "
                f"{hostile[1]:,.0f} s; the run stops pacing to the rate-limit headers "
                f"(waits {self.max_hold:g} s at most, max_retry_after)",
            )
        wait = min(wait, self.max_hold)  # whatever a header or a setting says
        if wait > 0:
            try:
                await self.sleep(wait)
            except BaseException:
                await self.release()
                raise
        return Ticket(estimate, debit)

    async def release(self) -> None:
        self.in_flight -= 1
        if self._freed is not None:
            async with self._freed:
                self._freed.notify_all()

    def replied(
        self, status: int, seen: Seen | None, retry_after: float | None, header: str = "Retry-After"
    ) -> None:
        """What one reply says: its limits, a 429 (``header``: what stated its wait)."""
        ep, now = self.endpoint, self.clock()
        with ep.lock:
            if seen is not None and ep.heeds:
                ep.seen = seen
                ep.retune(now)
                if seen.requests_remaining is not None:
                    ep.requests.cap(seen.requests_remaining, now)
                if seen.tokens_remaining is not None:
                    ep.tokens.cap(seen.tokens_remaining, now)
            if status == 429:
                pause = min(retry_after if retry_after is not None else 1.0, self.max_hold)
                if now >= ep.cut_until:
                    ep.factor = max(FLOOR, ep.factor * DECREASE)
                    ep.window = max(1.0, (ep.window or float(self.concurrency)) / 2)
                    ep.cut_until = now + max(pause, 1.0)
                    ep.retune(now)
                ep.hold_until = max(ep.hold_until, now + pause)
                for gauge in (ep.requests, ep.tokens):
                    gauge.cap(-gauge.rate * pause, now)
            elif 200 <= status < 300:
                ep.factor = min(1.0, ep.factor + INCREASE)
                window = ep.window or float(self.concurrency)
                ep.window = min(float(self.concurrency), window + 1.0 / window)
                ep.retune(now)
        if status == 429 and retry_after is not None and retry_after > self.max_hold:
            self._tell(
                "retry",
                f"recfair: a 429's {header} asked to wait {retry_after:,.0f} s; the run "
                f"waits {self.max_hold:g} s at most (max_retry_after) and retries",
            )

    def _tell(self, what: str, line: str) -> None:  # each ``what`` once per run
        if self.say is not None and what not in self._said:
            self._said.add(what)
            self.say(line)

    def used(self, ticket: Ticket, tokens: int | None) -> None:
        """The reply's usage: what was over-debited goes back, and the estimate learns."""
        if tokens is None or ticket.estimate <= 0:
            return
        ep, now = self.endpoint, self.clock()
        with ep.lock:
            if ticket.debited:
                ep.tokens.give(ticket.debited - tokens, now)
            ep.ratio += LEARN * (tokens / ticket.estimate - ep.ratio)


# A request's tokens before it is sent (the plan's estimate, the pacer's debit): ~4 chars
# per prompt token plus a per-message overhead; for the reply max_tokens when set, else
# ~12 tokens per asked item (a numbered title with its year).
CHARS_PER_TOKEN: Final = 4.0
MESSAGE_OVERHEAD_TOKENS: Final = 8
TOKENS_PER_ITEM: Final = 12


class CaseText(Protocol):
    @property
    def system(self) -> str | None: ...
    @property
    def prompt(self) -> str: ...


def prompt_tokens(case: CaseText) -> int:
    chars = len(case.prompt) + len(case.system or "")
    return math.ceil(chars / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS * (2 if case.system else 1)


def request_tokens(case: CaseText, max_tokens: int | None) -> int:
    """Tokens one request may use, prompt plus reply (the plan's count, the pacer's debit)."""
    return prompt_tokens(case) + (max_tokens or TOKENS_PER_ITEM * getattr(case, "k", 1))


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|us|µs|ns|h|m|s)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@dataclass(frozen=True, slots=True)
class Seen:
    """The limits one reply states (None: not stated); reset times are not kept (unused)."""

    requests_limit: int | None = None
    requests_remaining: int | None = None
    tokens_limit: int | None = None
    tokens_remaining: int | None = None
    # what stated the requests and the tokens limit (for the line giving it up)
    names: tuple[str, str] = field(default=("", ""), compare=False)


def parse_duration(text: str) -> float | None:
    """A Go duration (``6m0s``, ``20ms``, ``1.5s``) or plain seconds (``37``) in seconds."""
    text = text.strip()
    if not text:
        return None
    try:
        return _finite(float(text))
    except ValueError:
        pass
    total, end = 0.0, 0
    for match in _DURATION.finditer(text):
        if match.start() != end:
            return None
        total += float(match.group(1)) * _UNIT[match.group(2)]
        end = match.end()
    return total if end == len(text) and end and math.isfinite(total) else None


def _finite(value: float) -> float | None:
    """A wait the server stated; None for "inf", "1e999" or "nan" (no usable wait)."""
    return max(0.0, value) if math.isfinite(value) else None


def retry_after_seconds(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    for name, scale in (("retry-after-ms", 1000), ("retry-after", 1)):
        value = headers.get(name)
        if value:
            try:
                return _finite(float(value) / scale)
            except ValueError:
                pass
    try:
        when = email.utils.parsedate_to_datetime((headers.get("retry-after") or "").strip())
    except (TypeError, ValueError, IndexError):
        return None
    when = when if when.tzinfo else when.replace(tzinfo=UTC)  # UTC unless it says
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _count(value: str | None) -> int | None:
    try:
        number = float((value or "").strip())
    except ValueError:  # none stated, or not a number
        return None
    # "inf" or "1e999" (int() of it raises OverflowError) states no usable count
    return int(number) if math.isfinite(number) and number >= 0 else None


def read_headers(headers: Mapping[str, str]) -> Seen | None:
    """The limits in a reply's headers (OpenAI or Anthropic names), None if it states none.
    ``headers`` is looked up by lower-case name (``httpx.Headers`` or a lower-cased dict)."""

    openai = headers.get("x-ratelimit-limit-requests") or headers.get("x-ratelimit-limit-tokens")
    if openai is not None:
        names = [f"x-ratelimit-{{}}-{what}" for what in ("requests", "tokens")]
    else:
        named = (f"anthropic-ratelimit-{n}-{{}}" for n in ("tokens", "input-tokens"))
        tokens = next((n for n in named if n.format("limit") in headers), None)
        if tokens is None and "anthropic-ratelimit-requests-limit" not in headers:
            return None
        names = ["anthropic-ratelimit-requests-{}", tokens or ""]

    fields = ("limit", "remaining")
    a, b, c, d = (_count(headers.get(n.format(f))) if n else None for n in names for f in fields)
    seen = Seen(a, b, c, d, (names[0].format("limit"), names[1].format("limit")))
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
    quota: dict[str, int] = {}  # "request" / "token": the tightest per-minute quota named
    for item in details:
        if not isinstance(item, dict):
            continue
        kind = str(item.get("@type", ""))
        if kind.endswith("RetryInfo") and isinstance(item.get("retryDelay"), str):
            delay = parse_duration(item["retryDelay"])
        for violation in item.get("violations") or () if kind.endswith("QuotaFailure") else ():
            if not isinstance(violation, dict):
                continue
            # quotaId names what the quota counts
            name = f"{violation.get('quotaId', '')} {violation.get('quotaMetric', '')}".lower()
            value = _count(str(violation.get("quotaValue", "")))
            if value is None or "perminute" not in name.replace("_", "").replace("-", ""):
                continue
            what = "token" if "token" in name else "request" if "request" in name else ""
            if what:
                quota[what] = min(quota.get(what, value), value)
    requests, tokens = quota.get("request"), quota.get("token")
    names = ("the 429's QuotaFailure", "the 429's QuotaFailure")
    seen = Seen(requests, None, tokens, None, names) if requests or tokens else None
    return delay, seen
