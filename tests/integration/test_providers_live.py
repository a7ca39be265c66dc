"""run_cases over real sockets against the simulator's OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import socket
from dataclasses import dataclass

import pytest

from pytest_recfair.errors import ProviderError
from pytest_recfair.providers import from_config, run_cases
from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer


@dataclass(frozen=True)
class Case:
    id: str
    prompt: str
    entity_id: str
    repeat: int = 0
    system: str | None = "You are a movie recommender."


DIRECTORS = ["Akira Kurosawa", "Agnes Varda", "Spike Lee", "Sofia Coppola", "Satyajit Ray"]


def _cases(n: int) -> list[Case]:
    return [
        Case(
            f"c{i}",
            f"I am a fan of {DIRECTORS[i % len(DIRECTORS)]}. Please provide a list of 10 "
            f"movies (request {i}).",
            f"e{i % len(DIRECTORS)}",
        )
        for i in range(n)
    ]


def test_clean_run_collects_every_reply_and_usage() -> None:
    cases = _cases(30)
    with SimServer(SimulatedRecommender(seed=1), latency_ms=5) as server:
        provider = from_config("openai", model="recfair-sim-1", base_url=server.base_url)
        outcome = run_cases(provider, cases, concurrency=8, timeout=10)
        served = server.stats.requests
    assert outcome.errors == {}
    assert set(outcome.completions) == {c.id for c in cases}
    assert all(c.text.strip() for c in outcome.completions.values())
    assert outcome.usage.prompt_tokens > 0
    assert outcome.usage.completion_tokens > 0
    assert outcome.unknown_usage == 0
    assert outcome.requests == served == len(cases)


def test_faults_are_retried_until_every_case_succeeds() -> None:
    cases = _cases(40)
    faults = {
        "429": 0.15,
        "500": 0.1,
        "malformed": 0.1,
        "timeout": 0.05,
        "timeout_mode": "close",
        "retry_after": 0.01,
        "max_per_request": 2,
    }
    with SimServer(SimulatedRecommender(seed=2), faults=faults, seed=2) as server:
        provider = from_config("openai", model="recfair-sim-1", base_url=server.base_url)
        outcome = run_cases(provider, cases, concurrency=6, timeout=5, max_retries=3, backoff=0.01)
        outcomes = dict(server.stats.outcomes)
    assert outcome.errors == {}
    assert len(outcome.completions) == len(cases)
    faulted = sum(v for k, v in outcomes.items() if k != "ok")
    assert faulted > 0, outcomes  # the fault plan really fired
    assert outcome.retries == faulted


def test_wrong_api_key_aborts_with_the_variable_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECFAIR_LIVE_KEY", "sk-wrong")
    with SimServer(SimulatedRecommender(), api_key="sk-right") as server:
        provider = from_config(
            "openai", model="m", base_url=server.base_url, api_key_env="RECFAIR_LIVE_KEY"
        )
        with pytest.raises(ProviderError, match="RECFAIR_LIVE_KEY"):
            run_cases(provider, _cases(20), concurrency=4)
        assert server.stats.requests <= 4


def test_wrong_base_url_is_a_404_naming_base_url() -> None:
    with SimServer(SimulatedRecommender()) as server:
        base = server.base_url.removesuffix("/v1") + "/api"
        provider = from_config("openai", model="m", base_url=base)
        with pytest.raises(ProviderError, match="404") as info:
            run_cases(provider, _cases(3))
    assert base in str(info.value)


def test_unreachable_server_is_one_error() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = from_config("openai", model="m", base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ProviderError, match="cannot connect") as info:
        run_cases(provider, _cases(10), max_retries=1, backoff=0.01)
    assert f"127.0.0.1:{port}" in str(info.value)


def test_real_prompt_cases_through_the_simulator_parse_to_lists() -> None:
    from pytest_recfair.prompts.cases import build_cases
    from pytest_recfair.prompts.seeds import load_seeds
    from pytest_recfair.replies import parse

    entities = load_seeds("directors")[:2]
    cases = build_cases(entities=entities, k=10)
    with SimServer(SimulatedRecommender(seed=3)) as server:
        provider = from_config("openai", model="recfair-sim-1", base_url=server.base_url)
        outcome = run_cases(provider, cases, concurrency=4, timeout=10)
    assert outcome.errors == {}
    assert list(outcome.completions) == [c.id for c in cases]
    lengths = {len(parse.items(c.text, k=10)) for c in outcome.completions.values()}
    assert min(lengths) > 0
