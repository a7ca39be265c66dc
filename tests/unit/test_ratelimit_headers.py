"""Rate limits as the providers state them (issue 24 point 1): OpenAI's and Anthropic's
headers and Gemini's 429 details, in the shapes real services send. The header values
are those of the real recordings in the project's shared real-cassettes (Mirascope's
vcrpy cassettes of gpt-4o and claude-sonnet-4-0); the Gemini body is Google's documented
``RESOURCE_EXHAUSTED`` error with its QuotaFailure and RetryInfo details."""

from __future__ import annotations

import json

import httpx
import pytest

from pytest_recfair.providers.base import Provider
from pytest_recfair.providers.http import GeminiProvider
from pytest_recfair.providers.pacing import (
    Seen,
    gemini_quota,
    parse_duration,
    read_headers,
)
from pytest_recfair.providers.retry import Retryable, judge, limits_of

# openai_chat_completions_gpt-4o.yaml, reply headers
OPENAI = {
    "x-ratelimit-limit-requests": "5000",
    "x-ratelimit-limit-tokens": "800000",
    "x-ratelimit-remaining-requests": "4999",
    "x-ratelimit-remaining-tokens": "799992",
    "x-ratelimit-reset-requests": "12ms",
    "x-ratelimit-reset-tokens": "0s",
}
# anthropic_messages_claude-sonnet-4-0.yaml, reply headers
ANTHROPIC = {
    "anthropic-ratelimit-input-tokens-limit": "2000000",
    "anthropic-ratelimit-input-tokens-remaining": "2000000",
    "anthropic-ratelimit-input-tokens-reset": "2025-12-18T23:33:04Z",
    "anthropic-ratelimit-output-tokens-limit": "400000",
    "anthropic-ratelimit-output-tokens-remaining": "400000",
    "anthropic-ratelimit-output-tokens-reset": "2025-12-18T23:33:04Z",
    "anthropic-ratelimit-requests-limit": "4000",
    "anthropic-ratelimit-requests-remaining": "3999",
    "anthropic-ratelimit-requests-reset": "2025-12-18T23:33:03Z",
    "anthropic-ratelimit-tokens-limit": "2400000",
    "anthropic-ratelimit-tokens-remaining": "2400000",
    "anthropic-ratelimit-tokens-reset": "2025-12-18T23:33:04Z",
}

GEMINI_429 = {
    "error": {
        "code": 429,
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [
                    {
                        "quotaMetric": "generativelanguage.googleapis.com/"
                        "generate_content_free_tier_requests",
                        "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                        "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"},
                        "quotaValue": "10",
                    },
                    {
                        "quotaMetric": "generativelanguage.googleapis.com/"
                        "generate_content_free_tier_input_token_count",
                        "quotaId": "GenerateContentInputTokensPerModelPerMinute-FreeTier",
                        "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"},
                        "quotaValue": "250000",
                    },
                    {
                        "quotaMetric": "generativelanguage.googleapis.com/"
                        "generate_content_free_tier_requests",
                        "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                        "quotaValue": "250",
                    },
                ],
            },
            {
                "@type": "type.googleapis.com/google.rpc.Help",
                "links": [{"description": "Learn more", "url": "https://ai.google.dev/"}],
            },
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"},
        ],
    }
}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("12ms", 0.012),
        ("0s", 0.0),
        ("1s", 1.0),
        ("20ms", 0.02),
        ("6m0s", 360.0),
        ("1m30.5s", 90.5),
        ("1h2m3s", 3723.0),
        ("37s", 37.0),
        ("2.5", 2.5),
    ],
)
def test_go_durations_as_openai_and_gemini_write_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "6m0", "1x", "s", "-1s", "1s2"])
def test_a_duration_that_does_not_parse_is_none_never_a_guess(text: str) -> None:
    assert parse_duration(text) is None


def test_openai_headers_of_a_real_reply() -> None:
    seen = read_headers(httpx.Headers(OPENAI))
    assert seen == Seen(5000, 4999, 800000, 799992)


def test_anthropic_headers_of_a_real_reply_prefer_the_combined_tokens_limit() -> None:
    seen = read_headers(httpx.Headers(ANTHROPIC))
    assert seen == Seen(4000, 3999, 2400000, 2400000)


def test_anthropic_without_a_combined_tokens_limit_counts_input_tokens() -> None:
    headers = {k: v for k, v in ANTHROPIC.items() if "-ratelimit-tokens-" not in k}
    seen = read_headers(httpx.Headers(headers))
    assert seen is not None
    assert (seen.tokens_limit, seen.tokens_remaining) == (2000000, 2000000)


def test_a_reply_without_rate_limit_headers_states_nothing() -> None:
    assert read_headers(httpx.Headers({"content-type": "application/json"})) is None
    broken = httpx.Headers({"x-ratelimit-limit-requests": "many"})
    assert read_headers(broken) is None


def test_gemini_429_details_give_the_delay_and_the_per_minute_quotas() -> None:
    delay, seen = gemini_quota(json.dumps(GEMINI_429))
    assert delay == 37.0
    # the per-day quota is not a per-minute limit: left out
    assert seen == Seen(requests_limit=10, tokens_limit=250000)
    assert gemini_quota(b"<html>busy</html>") == (None, None)
    assert gemini_quota(json.dumps({"error": {"code": 429}})) == (None, None)


def _gemini_429() -> tuple[Provider, httpx.Response]:
    provider = GeminiProvider(model="gemini-2.5-flash", api_key_env="")
    request = provider.build_request(None, "List 3 films.")
    return provider, httpx.Response(429, json=GEMINI_429, request=request)


def test_a_gemini_429_is_retried_after_its_retry_delay() -> None:
    provider, response = _gemini_429()

    class Case:
        id, entity_id, repeat = "c1", "e1", 0

    with pytest.raises(Retryable) as caught:
        judge(provider, response, Case())
    assert caught.value.retry_after == 37.0
    quota = Seen(requests_limit=10, tokens_limit=250000)
    assert limits_of(response) == (quota, 37.0, "error details (RetryInfo)")


def test_a_429_with_headers_prefers_retry_after_over_the_body() -> None:
    request = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
    response = httpx.Response(
        429, headers={**OPENAI, "retry-after-ms": "250"}, json=GEMINI_429, request=request
    )
    seen, wait, said = limits_of(response)
    assert (wait, said) == (0.25, "retry-after-ms")
    assert seen is not None
    assert seen.requests_limit == 5000
    ok = httpx.Response(200, headers=OPENAI, request=request)
    assert limits_of(ok) == (Seen(5000, 4999, 800000, 799992), None, "")
