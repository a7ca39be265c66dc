"""The pacer (issue 24 point 1) on a fake clock: requests and tokens per minute as token
buckets shared by every worker, limits learned from replies, AIMD on 429."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import pytest

from pytest_recfair.providers import pacing
from pytest_recfair.providers.pacing import BURST_S, MARGIN, Endpoint, Pacer, Seen, Ticket


class FakeTime:
    """A clock that only moves when someone sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def fake() -> FakeTime:
    return FakeTime()


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    pacing._ENDPOINTS.clear()
    yield
    pacing._ENDPOINTS.clear()


def _pacer(fake: FakeTime, rpm: float | None = None, tpm: float | None = None) -> Pacer:
    endpoint = Endpoint(configured=(rpm, tpm))
    endpoint.retune(fake.now)
    return Pacer(endpoint, concurrency=8, clock=fake.clock, sleep=fake.sleep)


async def _send(pacer: Pacer, n: int, tokens: float = 0.0) -> list[float]:
    """Send ``n`` requests one after another; the times they go out."""
    times = []
    for _ in range(n):
        await pacer.acquire(tokens)
        times.append(pacer.clock())
        pacer.replied(200, None, None)
        await pacer.release()
    return times


def _most_in(times: list[float], seconds: float) -> int:
    """The most sends in any window of ``seconds``."""
    best, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= seconds:
            start += 1
        best = max(best, end - start + 1)
    return best


def test_requests_per_minute_hold_in_every_minute_and_take_no_longer(fake: FakeTime) -> None:
    pacer = _pacer(fake, rpm=600)
    times = asyncio.run(_send(pacer, 1500))
    assert _most_in(times, 60.0) <= 600
    rate = 600 / 60 * MARGIN
    burst = rate * BURST_S
    # any second: a second's worth plus the half-second burst, never a minute's worth
    assert _most_in(times, 1.0) <= burst + rate + 1
    assert _most_in(times[20:], 1.0) <= rate + 1  # once the burst is spent
    elapsed = times[-1] - times[0]
    assert (1500 - burst - 1) / rate <= elapsed <= 1500 / rate


def test_tokens_per_minute_pace_by_the_estimate(fake: FakeTime) -> None:
    pacer = _pacer(fake, tpm=6000)  # 100 tokens a second
    times = asyncio.run(_send(pacer, 200, tokens=50.0))  # at most 2 requests a second
    assert _most_in(times, 60.0) * 50 <= 6000
    assert times[-1] - times[0] == pytest.approx((200 * 50 - 48.5) / (100 * MARGIN), rel=0.02)


def test_concurrent_workers_queue_in_order_without_bursting(fake: FakeTime) -> None:
    """Forty workers asking at the same instant reserve consecutive slots."""
    pacer = _pacer(fake, rpm=600)
    pacer.concurrency = 64
    waits: list[float] = []

    async def one() -> None:
        ticket = await pacer.acquire(0.0)
        await pacer.release()
        assert ticket.debited == 0.0

    async def main() -> None:
        frozen = fake.now

        async def sleep(seconds: float) -> None:  # the clock stands still for all of them
            waits.append(seconds)

        pacer.sleep = sleep
        await asyncio.gather(*(one() for _ in range(40)))
        assert fake.now == frozen

    asyncio.run(main())
    due = sorted(waits)
    gaps = [b - a for a, b in itertools.pairwise(due)]
    assert gaps
    assert all(g == pytest.approx(1 / (10 * MARGIN)) for g in gaps)
    assert len(due) == 40 - int(10 * MARGIN * BURST_S)  # the burst goes at once


def test_limits_learned_from_a_reply_pace_the_rest(fake: FakeTime) -> None:
    class Key:
        base_url, model, api_key_env = "https://api.example.com/v1", "m", "KEY"

    endpoint = pacing.endpoint_for(Key())
    pacer = Pacer(endpoint, concurrency=8, clock=fake.clock, sleep=fake.sleep)
    assert pacer._window() == 1  # nothing known: one request until the first reply
    assert pacing.known_limits(Key()) == (None, None)
    asyncio.run(pacer.acquire(10.0))
    pacer.replied(200, Seen(600, 599, 60_000, 59_000), None)
    assert pacer._window() == 8
    assert pacing.known_limits(Key()) == (600, 60_000)
    times = asyncio.run(_send(pacer, 300))
    assert _most_in(times, 1.0) <= 10 * MARGIN * (1 + BURST_S) + 1
    assert _most_in(times, 20.0) <= 20 * 10 + 5
    # the next run of the same endpoint (a new pacer, another chunk) knows it at once
    again = Pacer(pacing.endpoint_for(Key()), concurrency=8, clock=fake.clock)
    assert again.endpoint is endpoint
    assert again._window() == 8


def test_a_loopback_server_is_not_probed_with_one_request() -> None:
    class Local:
        base_url, model, api_key_env = "http://127.0.0.1:9/v1", "m", ""

    assert Pacer(pacing.endpoint_for(Local()), concurrency=8)._window() == 8


def test_configured_limits_and_the_replies_the_tighter_wins(fake: FakeTime) -> None:
    pacer = _pacer(fake, rpm=300)
    assert pacer._window() == 8  # a configured limit needs no first reply
    pacer.replied(200, Seen(requests_limit=600), None)
    assert pacer.endpoint.limits() == (300, None)
    pacer.replied(200, Seen(requests_limit=120), None)
    assert pacer.endpoint.limits() == (120, None)


def test_the_ini_limit_is_split_across_xdist_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    class Key:
        base_url, model, api_key_env = "http://127.0.0.1:9/v1", "m", ""

    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    assert pacing.endpoint_for(Key(), rpm=600, tpm=40_000).limits() == (150, 10_000)


def test_remaining_zero_stops_sending_until_the_bucket_refills(fake: FakeTime) -> None:
    pacer = _pacer(fake, rpm=600)
    asyncio.run(pacer.acquire(0))
    pacer.replied(200, Seen(600, 0), None)
    start = fake.now
    asyncio.run(pacer.acquire(0))
    assert fake.now - start == pytest.approx(1 / (10 * MARGIN * pacer.endpoint.factor))


def test_a_429_holds_everyone_cuts_the_rate_once_and_recovers_additively(
    fake: FakeTime,
) -> None:
    pacer = _pacer(fake, rpm=600)
    asyncio.run(_send(pacer, 5))
    pacer.endpoint.window = 8.0
    pacer.replied(429, None, 2.0)
    cut = pacer.endpoint.factor
    assert cut == pytest.approx(pacing.DECREASE)
    assert pacer.endpoint.window == 4.0
    pacer.replied(429, None, 2.0)  # the same burst: not cut again
    assert (pacer.endpoint.factor, pacer.endpoint.window) == (cut, 4.0)
    start = fake.now
    asyncio.run(pacer.acquire(0))
    assert fake.now - start >= 2.0  # Retry-After honoured by every request
    asyncio.run(_send(pacer, 10))
    assert pacer.endpoint.factor == pytest.approx(cut + 10 * pacing.INCREASE)
    assert 4.0 < pacer.endpoint.window <= 8.0


def test_without_any_limit_a_429_still_halves_the_window(fake: FakeTime) -> None:
    pacer = _pacer(fake)
    pacer.endpoint.window = 8.0
    pacer.replied(429, None, None)
    assert pacer._window() == 4
    start = fake.now
    asyncio.run(pacer.acquire(0))
    assert fake.now - start == pytest.approx(1.0)  # no Retry-After: a second


def test_the_replys_usage_corrects_the_tokens_debited_and_the_estimate(fake: FakeTime) -> None:
    pacer = _pacer(fake, tpm=6000)
    level = pacer.endpoint.tokens.level
    held: list[float] = []

    async def frozen(seconds: float) -> None:  # the clock stands still
        held.append(seconds)

    pacer.sleep = frozen
    ticket = asyncio.run(pacer.acquire(300.0))
    assert pacer.endpoint.tokens.level == pytest.approx(level - 300.0)
    assert held == [pytest.approx((300.0 - level) / (100 * MARGIN))]
    pacer.used(ticket, 100)  # the reply used a third of the estimate: 200 given back
    assert pacer.endpoint.tokens.level == pytest.approx(level - 100.0)
    pacer.sleep = fake.sleep
    assert pacer.endpoint.ratio == pytest.approx(1 + pacing.LEARN * (1 / 3 - 1))

    async def reply(tokens: int) -> Ticket:
        ticket = await pacer.acquire(300.0)
        await pacer.release()
        pacer.used(ticket, tokens)
        return ticket

    for _ in range(40):
        asyncio.run(reply(100))
    assert pacer.endpoint.ratio == pytest.approx(1 / 3, rel=0.01)
    assert asyncio.run(reply(100)).debited == pytest.approx(100.0, rel=0.01)
    pacer.used(Ticket(300.0, 300.0), None)  # no usage in the reply: nothing learned
    assert pacer.endpoint.ratio == pytest.approx(1 / 3, rel=0.01)


def test_the_window_holds_workers_until_a_request_is_done(fake: FakeTime) -> None:
    pacer = _pacer(fake)
    pacer.endpoint.window = 2.0
    order: list[str] = []

    async def worker(name: str) -> None:
        await pacer.acquire(0)
        order.append(f"{name}+")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        order.append(f"{name}-")
        await pacer.release()

    async def main() -> None:
        await asyncio.gather(*(worker(n) for n in "abc"))

    asyncio.run(main())
    assert order.index("c+") > min(order.index("a-"), order.index("b-"))
    assert pacer.in_flight == 0


def test_a_limit_learned_from_headers_starts_empty_and_refunds_nothing_earlier(
    fake: FakeTime,
) -> None:
    """Requests sent before the limit was known are not in the new bucket: it starts
    empty, and their replies' usage gives nothing back into it."""
    pacer = _pacer(fake)
    pacer.endpoint.probe = False  # four out at once, before any reply

    async def four() -> list[Ticket]:
        return list(await asyncio.gather(*(pacer.acquire(300.0) for _ in range(4))))

    early = asyncio.run(four())
    assert pacer.in_flight == 4
    assert all(t.debited == 0.0 for t in early)
    pacer.replied(200, Seen(600, 5, 60_000, 50_000), None)
    assert (pacer.endpoint.requests.level, pacer.endpoint.tokens.level) == (0.0, 0.0)
    for ticket in early:
        pacer.used(ticket, 100)
    assert pacer.endpoint.tokens.level == 0.0
    configured = _pacer(fake, rpm=600)  # a configured limit starts with its burst
    assert configured.endpoint.requests.level == pytest.approx(10 * MARGIN * BURST_S)


def test_a_header_limit_too_low_to_pace_to_is_given_up_and_no_wait_passes_the_cap(
    fake: FakeTime,
) -> None:
    """Issue 33 point 1: ``x-ratelimit-limit-tokens: 1`` held each request ~an hour; a
    limit that alone holds one request longer than max_hold is given up, said once."""
    said: list[str] = []
    endpoint = Endpoint()
    pacer = Pacer(
        endpoint, concurrency=1, max_hold=5.0, clock=fake.clock, sleep=fake.sleep, say=said.append
    )
    names = ("x-ratelimit-limit-requests", "x-ratelimit-limit-tokens")
    seen = Seen(10_000, None, 1, None, names)
    asyncio.run(pacer.acquire(60))
    pacer.replied(200, seen, None)
    asyncio.run(pacer.release())
    for _ in range(3):  # later replies state it again: ignored
        asyncio.run(pacer.acquire(60))
        pacer.replied(200, seen, None)
        asyncio.run(pacer.release())
    assert fake.sleeps == []
    assert len(said) == 1
    assert said[0].startswith("recfair: the replies' x-ratelimit-limit-tokens: 1 would hold")
    assert "waits 5 s at most" in said[0]
    # a configured limit is kept, and no wait is longer than max_hold
    pacer = Pacer(Endpoint(configured=(0.5, None)), concurrency=1, max_hold=5.0,
                  clock=fake.clock, sleep=fake.sleep)  # fmt: skip
    pacer.endpoint.retune(fake.now)
    asyncio.run(_send(pacer, 4))
    assert fake.sleeps
    assert max(fake.sleeps) == 5.0
