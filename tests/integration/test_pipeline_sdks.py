"""A Python pipeline's own model calls, made through the real SDKs users pipe through
(openai, anthropic, langchain-openai, httpx 0.x, requests via vcrpy), recorded into the
entity cassettes over loopback HTTP and replayed with no network (issue 32).

Real pytest runs (pytester subprocesses), real HTTP to the simulator.
"""

from __future__ import annotations

import pytest

from tests.support.pipelines import (
    ANTHROPIC,
    ASYNC_OPENAI,
    HTTPX0,
    KEY,
    LANGCHAIN,
    LANGCHAIN_ASYNC,
    OFFLINE,
    OPENAI,
    REQUESTS,
    SYSTEM,
    interactions,
    make_pipeline_project,
    numbers,
    point_at,
    run,
    sim_server,
    user_prompt,
)
from tests.support.plugin import before_summary

pytest_plugins = ["pytester"]

RECORD = ("--fairness", "--fairness-record=once", "--fairness-update")
# 20 religion prompts + 12 gender prompts, the 4 neutral ones shared: 28 distinct
DISTINCT_PROMPTS = 28


def test_openai_pipeline_records_replays_offline_and_applies_a_new_reranker(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_pipeline_project(pytester, OPENAI)
    with sim_server() as server:
        point_at(monkeypatch, server)
        recorded = run(pytester, *RECORD, "--fairness-report=rec.json")
        recorded.assert_outcomes(passed=2)
        asked = server.stats.requests
        assert asked == DISTINCT_PROMPTS
        assert server.stats.outcomes["ok"] == asked
        assert len(list(interactions(pytester.path))) == asked
        # a replay with the server up: not one request reaches it
        replay = run(pytester, "--fairness", "--fairness-report=rep.json", *OFFLINE)
        replay.assert_outcomes(passed=2)
        assert server.stats.requests == asked
    assert numbers(pytester.path / "rep.json") == numbers(pytester.path / "rec.json")

    # the server is gone and sockets are refused: the pipeline's code still runs on the
    # recorded replies, so a new re-ranker is measured offline
    monkeypatch.setenv("PIPE_RERANK", "1")
    explore = ("--fairness", "--fairness-explore")  # the new numbers are not gated here
    reranked = run(pytester, *explore, "--fairness-report=rr.json", *OFFLINE)
    reranked.assert_outcomes(passed=2)
    before, after = numbers(pytester.path / "rec.json"), numbers(pytester.path / "rr.json")
    assert after.keys() == before.keys()
    for test_id in before:
        assert after[test_id] != before[test_id], test_id
    assert server.stats.requests == asked


def test_a_changed_system_prompt_is_one_miss_per_test_naming_the_difference(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_pipeline_project(pytester, OPENAI)
    with sim_server() as server:
        point_at(monkeypatch, server)
        run(pytester, *RECORD).assert_outcomes(passed=2)
        asked = server.stats.requests
        monkeypatch.setenv("PIPE_SYSTEM", "You recommend movies.")
        missed = run(pytester, "--fairness", *OFFLINE)
        assert server.stats.requests == asked
    missed.assert_outcomes(errors=2)
    out = before_summary(missed.stdout.str())
    difference = (
        "what differs from the recording of this prompt: messages[0] (system).content: "
        f"'{SYSTEM}' recorded, 'You recommend movies.' now"
    )
    assert out.count(difference) == 2, out
    for test in ("test_religion", "test_gender"):
        lines = [line for line in out.splitlines() if difference in line and test in line]
        assert len(lines) == 1, (test, out)
        assert lines[0].startswith("CassetteMiss: ")
        assert "entity '" in lines[0]
        assert "prompt 'I am " in lines[0]


PIPELINES = {
    "anthropic": (ANTHROPIC, ""),
    "langchain-invoke": (LANGCHAIN, ""),
    "langchain-ainvoke": (LANGCHAIN_ASYNC, ""),
    "async-openai": (ASYNC_OPENAI, ""),
    "httpx0": (HTTPX0, ""),
    "requests-vcr": (REQUESTS, "recfair_intercept = vcr\n"),
}


@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_sdk_pipeline_replays_its_recording_offline(
    pipeline: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    conftest, ini = PIPELINES[pipeline]
    make_pipeline_project(pytester, conftest, ini=ini)
    # the Anthropic SDK sends its key as x-api-key, which the simulator does not check
    with sim_server(api_key=None if pipeline == "anthropic" else KEY) as server:
        point_at(monkeypatch, server)
        recorded = run(pytester, *RECORD, "--fairness-report=rec.json")
        recorded.assert_outcomes(passed=2)
        asked = server.stats.requests
        assert asked == DISTINCT_PROMPTS
        kept = list(interactions(pytester.path))
        assert len(kept) == asked
        path = "/v1/messages" if pipeline == "anthropic" else "/v1/chat/completions"
        assert {item["request"]["uri"] for item in kept} == {server.base_url[:-3] + path}
        assert len({user_prompt(item) for item in kept}) == asked
        replay = run(pytester, "--fairness", "--fairness-report=rep.json", *OFFLINE)
        replay.assert_outcomes(passed=2)
        assert server.stats.requests == asked
    assert numbers(pytester.path / "rep.json") == numbers(pytester.path / "rec.json")
