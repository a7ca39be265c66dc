"""The simulator's rate limits (issue 24 point 1) on a fake clock: token buckets for
requests and tokens per minute, the headers they state, the wait past them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pytest_recfair.errors import ConfigError
from pytest_recfair.providers.pacing import read_headers
from pytest_recfair.sim.__main__ import build_parser
from pytest_recfair.sim.server import Limiter, go_duration


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_requests_per_minute_admit_a_burst_then_the_rate() -> None:
    clock = Clock()
    limiter = Limiter(rpm=600, clock=clock)  # 10 a second, a second's burst
    assert [limiter.admit(1) for _ in range(10)] == [None] * 10
    wait = limiter.admit(1)
    assert wait == pytest.approx(0.1)
    clock.now += 0.1
    assert limiter.admit(1) is None
    admitted = 0
    for _ in range(600):  # a minute at 50 ms steps, asking twice as fast as allowed
        clock.now += 0.05
        admitted += limiter.admit(1) is None
    assert admitted == pytest.approx(300, abs=1)


def test_tokens_per_minute_charge_each_replys_tokens() -> None:
    clock = Clock()
    limiter = Limiter(tpm=6000, clock=clock)  # 100 tokens a second
    assert limiter.admit(60) is None
    assert limiter.admit(60) == pytest.approx(0.2)  # 40 left, 20 short at 100/s
    clock.now += 0.2
    assert limiter.admit(60) is None
    clock.now += 10
    assert limiter.admit(500) is None  # larger than the bucket: passes when it is full
    assert limiter.admit(1) == pytest.approx(4.01)


def test_the_headers_say_limit_remaining_and_reset_in_each_services_shape() -> None:
    clock = Clock()
    limiter = Limiter(rpm=600, tpm=60_000, clock=clock)
    assert limiter.admit(400) is None
    openai = limiter.headers()
    assert openai == {
        "x-ratelimit-limit-requests": "600",
        "x-ratelimit-remaining-requests": "9",
        "x-ratelimit-reset-requests": "100ms",
        "x-ratelimit-limit-tokens": "60000",
        "x-ratelimit-remaining-tokens": "600",
        "x-ratelimit-reset-tokens": "400ms",
    }
    seen = read_headers(openai)  # what the runner reads back
    assert seen is not None
    assert (seen.requests_limit, seen.tokens_remaining) == (600, 600)
    anthropic = limiter.headers(anthropic=True)
    assert anthropic["anthropic-ratelimit-requests-limit"] == "600"
    assert anthropic["anthropic-ratelimit-tokens-remaining"] == "600"
    reset = datetime.fromisoformat(anthropic["anthropic-ratelimit-tokens-reset"])
    assert abs((reset - datetime.now(UTC)).total_seconds()) < 2
    assert Limiter(rpm=60).headers(anthropic=True).keys() == {
        "anthropic-ratelimit-requests-limit",
        "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-requests-reset",
    }


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.012, "12ms"), (0.0, "0ms"), (1.0, "1s"), (360.0, "6m0s"), (90.5, "1m30.5s")],
)
def test_resets_are_written_as_openai_writes_them(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


@pytest.mark.parametrize("bad", [{"rpm": 0}, {"tpm": -5}, {"rpm": "fast"}, {"burst_s": 0}])
def test_a_bad_limit_is_a_one_line_error(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=r"SimServer\(\w+=\.\.\.\): expected a number > 0"):
        Limiter(**bad)  # type: ignore[arg-type]


def test_the_cli_takes_the_limits() -> None:
    args = build_parser().parse_args(["--port", "0", "--rpm", "600", "--tpm", "90000"])
    assert (args.rpm, args.tpm, args.burst) == (600.0, 90000.0, 1.0)
