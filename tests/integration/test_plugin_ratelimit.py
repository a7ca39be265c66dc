"""Recording at the provider's limit (issue 24 point 1), over real HTTP on loopback.

The simulator keeps requests- and tokens-per-minute limits, states them in OpenAI's (and
Anthropic's) rate-limit headers on every reply and answers 429 with Retry-After past
them. A pytest run records against it: the runner learns the limit from the headers (or
takes ``recfair_rpm``) and paces to it, a 429 is never recorded, and prompts that stay
refused after their retries are failures that count against ``max_failed``.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import httpcore  # noqa: F401  (kept across pytester's in-process runs)
import httpx
import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.integration.capture_stub import capture_server
from tests.support.plugin import before_summary, plugin_args

pytest_plugins = ["pytester"]

_TEST = """
from pytest_recfair import fairness

@fairness(attr="religion")
def test_religion(fairness_result):
    assert fairness_result.meta.n_entities == 8
"""


def _statuses(root: Path) -> list[int]:
    """The HTTP status of every interaction in every cassette under ``root``."""
    out = []
    for path in sorted(root.rglob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        out += [int(i["response"]["status"]["code"]) for i in data["interactions"]]
    return out


def _project(pytester: pytest.Pytester, base_url: str, **ini: str) -> None:
    lines = [
        "[pytest]",
        "recfair_entities = 8",
        "recfair_n_resamples = 50",
        "recfair_concurrency = 8",
        "recfair_max_unusable = 0.6",
        "recfair_provider = openai",
        "recfair_model = recfair-sim",
        f"recfair_base_url = {base_url}",
        *(f"{k} = {v}" for k, v in ini.items()),
    ]
    pytester.makeini("\n".join(lines) + "\n")
    pytester.makepyfile(test_audit=_TEST)


def _chat(client: httpx.Client, url: str, text: str) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 50}
    return client.post(url, json=body)


def test_the_limited_simulator_states_its_limits_and_answers_429_past_them() -> None:
    with SimServer(rpm=60, tpm=100_000) as srv, httpx.Client() as client:
        first = _chat(client, f"{srv.base_url}/chat/completions", "List 3 films by Sofia Coppola.")
        assert first.status_code == 200
        assert first.headers["x-ratelimit-limit-requests"] == "60"
        assert first.headers["x-ratelimit-remaining-requests"] == "0"  # a 1 s burst: one
        assert first.headers["x-ratelimit-limit-tokens"] == "100000"
        assert first.headers["x-ratelimit-reset-requests"].endswith("s")
        refused = _chat(client, f"{srv.base_url}/chat/completions", "List 3 films by Agnès Varda.")
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "1"
        assert 900 <= int(refused.headers["retry-after-ms"]) <= 1000
        assert refused.json()["error"]["code"] == "rate_limit_exceeded"
        assert "x-ratelimit-remaining-requests" in refused.headers
        time.sleep(int(refused.headers["retry-after-ms"]) / 1000)
        anthropic = _chat(client, f"{srv.base_url}/messages", "List 3 films by Agnès Varda.")
        assert anthropic.status_code == 200
        assert anthropic.headers["anthropic-ratelimit-requests-limit"] == "60"
        assert "x-ratelimit-limit-requests" not in anthropic.headers
        assert srv.stats.outcomes["429-limit"] == 1
        assert srv.stats.outcomes["ok"] == 2


def test_recording_learns_the_limit_from_the_headers_and_paces_to_it(
    pytester: pytest.Pytester,
) -> None:
    rpm = 600  # 10 a second, a burst of 10
    with SimServer(SimulatedRecommender("demo", seed=0), latency_ms=20, rpm=rpm) as srv:
        _project(pytester, srv.base_url)
        started = time.monotonic()
        run = pytester.runpytest(
            *plugin_args(), "--fairness", "--fairness-record=once", "--fairness-update"
        )
        took = time.monotonic() - started
        stats = dict(srv.stats.outcomes)
    run.assert_outcomes(passed=1)
    sent = stats["ok"]
    assert sent > 20
    # at most a 1 s burst above the limit, so no faster than it allows
    assert took >= (sent - rpm / 60) / (rpm / 60)
    assert stats.get("429-limit", 0) <= max(1, sent // 100)
    statuses = _statuses(pytester.path / "fixtures" / "cassettes")
    assert len(statuses) == sent
    assert set(statuses) == {200}  # a 429 is never a recording


def test_recfair_rpm_paces_a_server_that_states_no_limit(pytester: pytest.Pytester) -> None:
    rpm = 600
    with SimServer(SimulatedRecommender("demo", seed=0), latency_ms=20) as srv:
        _project(pytester, srv.base_url, recfair_rpm=str(rpm))
        started = time.monotonic()
        run = pytester.runpytest(
            *plugin_args(), "--fairness", "--fairness-record=once", "--fairness-update"
        )
        took = time.monotonic() - started
        sent = srv.stats.outcomes["ok"]
    run.assert_outcomes(passed=1)
    burst = rpm / 60 * 0.5
    assert took >= (sent - burst - 1) / (rpm / 60)
    # the plan of re-recording them all at a limit slower than the requests' own time
    # (8 in flight, ~4 s each) says the limit sets the duration: one a second
    planned = pytester.runpytest(
        *plugin_args(),
        "--fairness",
        "--fairness-plan",
        "--fairness-record=all",
        "-o",
        "recfair_rpm=60",
    )
    planned.assert_outcomes(skipped=1)
    assert f"{sent} to ask" in planned.stdout.str()
    assert f"~{sent} s (paced to 60 requests/min)" in planned.stdout.str()


def test_prompts_refused_to_the_end_fail_and_are_never_recorded(
    pytester: pytest.Pytester,
) -> None:
    # every other attempt answers 429 with no cap per request, one retry: about a quarter
    # of the prompts are refused twice and fail; none of the 429s is recorded
    faults = "429=0.5,retry_after=0.05,max_per_request=none"
    with SimServer(SimulatedRecommender("demo", seed=0), faults=faults, seed=5) as srv:
        _project(pytester, srv.base_url, recfair_max_retries="1")
        run = pytester.runpytest(
            *plugin_args(), "--fairness", "--fairness-record=once", "--fairness-update"
        )
        refused = srv.stats.outcomes["429"]
    run.assert_outcomes(errors=1)
    out = run.stdout.str()
    assert refused > 0
    assert "got no valid response after their retries (no failure is allowed)" in out
    assert "HTTP 429" in out
    assert "max_failed" in out
    statuses = _statuses(pytester.path / "fixtures" / "cassettes")
    assert statuses
    assert set(statuses) == {200}


def _record(pytester: pytest.Pytester) -> tuple[pytest.RunResult, float]:
    started = time.monotonic()
    run = pytester.runpytest(
        *plugin_args(), "-p", "no:cacheprovider", "--fairness", "--fairness-record=once",
        "--fairness-update",
    )  # fmt: skip
    return run, time.monotonic() - started


@pytest.mark.parametrize("retry_after", ["86400", "a day ahead", "inf"])
def test_a_429_asking_a_day_holds_the_run_no_longer_than_max_retry_after(
    pytester: pytest.Pytester, retry_after: str
) -> None:
    """Issue 33 point 1: one 429 saying "a day" held the endpoint's pacer that long (the
    run sent 1 request in 150 s); the wait is max_retry_after at most, said in one line."""
    if retry_after == "a day ahead":  # an HTTP date
        retry_after = format_datetime(datetime.now(UTC) + timedelta(days=1), usegmt=True)
    with capture_server(throttle={"Retry-After": retry_after}) as cap:
        _project(pytester, f"{cap.base}/v1", recfair_max_retry_after="1")
        run, took = _record(pytester)
        sent = len(cap.seen)
    run.assert_outcomes(passed=1)
    assert took < 60, f"{took:.0f} s"
    statuses = _statuses(pytester.path / "fixtures" / "cassettes")
    assert statuses == [200] * (sent - 1)
    assert sent == 8 * 5 + 1
    said = re.findall(
        r"a 429's Retry-After asked to wait [\d,]+ s; .*", before_summary(run.stdout.str())
    )
    if retry_after == "inf":  # states no wait: the back-off's own
        assert said == []
    else:
        assert len(said) == 1
        assert re.search(r"wait 86,[34]\d\d s; the run waits 1 s at most", said[0])


@pytest.mark.parametrize("value", ["inf", "1e999", "nan", "-5", "garbage", "1"])
def test_replies_stating_hostile_rate_limits_are_recorded_and_paced_in_time(
    pytester: pytest.Pytester, value: str
) -> None:
    """Issue 33 point 1: ``x-ratelimit-limit-requests: inf`` raised OverflowError and the
    paid reply was lost; a limit so low that one request would wait past
    max_retry_after ("1" a minute) is given up in one line naming the header."""
    headers = {
        f"x-ratelimit-{what}-{of}": value
        for what in ("limit", "remaining", "reset")
        for of in ("requests", "tokens")
    }
    with capture_server(headers=headers) as cap:
        _project(pytester, f"{cap.base}/v1", recfair_max_retry_after="1")
        run, took = _record(pytester)
        sent = len(cap.seen)
    run.assert_outcomes(passed=1)
    assert took < 60, f"{took:.0f} s"
    assert _statuses(pytester.path / "fixtures" / "cassettes") == [200] * sent == [200] * 40
    out = before_summary(run.stdout.str())
    assert "Traceback" not in out
    assert "OverflowError" not in out
    gave_up = re.findall(r"recfair: the replies' (.*) would hold a request .*", out)
    assert gave_up == (["x-ratelimit-limit-requests: 1"] if value == "1" else [])
