"""What a recorded pipeline promises (issue 32): its key is written nowhere, each prompt's
calls land in its own entity's cassette at full concurrency, a call that fails for good
fails its prompt (also when the pipeline swallows the error) and is never recorded, the
budget stops live calls before they are sent, and CallableProvider(record=True) replays
what the function returned without calling it.

Real pytest runs (pytester subprocesses), real HTTP to the simulator on loopback.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.support.pipelines import (
    ANTHROPIC,
    KEY,
    OFFLINE,
    OPENAI,
    PRELUDE,
    REQUESTS,
    cassettes,
    files_holding,
    interactions,
    make_pipeline_project,
    numbers,
    point_at,
    run,
    sim_server,
    user_prompt,
)
from tests.support.plugin import before_summary, subprocess_env

pytest_plugins = ["pytester"]

RECORD = ("--fairness", "--fairness-record=once", "--fairness-update")
RELIGION = """
from pytest_recfair import fairness

@fairness(attr="religion")
def test_religion():
    pass
"""


# --- secrets


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_the_sdk_key_is_in_no_file_written(
    sdk: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key the SDK sends (Authorization: Bearer, or Anthropic's x-api-key) is in no
    cassette, baseline, report, junit file or failure note; nor is it when a prompt's
    error message quotes it."""
    conftest = OPENAI if sdk == "openai" else ANTHROPIC
    # one prompt per entity fails with an error that quotes the key
    leaky = conftest.replace(
        "    def recommend(prompt: str) -> list[str]:\n",
        "    def recommend(prompt: str) -> list[str]:\n"
        "        if 'Buddhist' in prompt:\n"
        "            raise RuntimeError(f'rejected: Authorization: Bearer {KEY}')\n",
    )
    assert leaky != conftest
    make_pipeline_project(pytester, leaky)
    reports = ("--fairness-report=rec.json", "--fairness-report=rec.html")
    with sim_server(api_key=KEY if sdk == "openai" else None) as server:
        point_at(monkeypatch, server)
        recorded = run(pytester, *RECORD, "--junitxml=rec.xml", *reports)
        assert server.stats.outcomes["ok"] > 0
    recorded.assert_outcomes(passed=1, errors=1)  # religion: its Buddhist prompts failed
    # the error quoting the key was written (scrubbed) into the junit file
    assert "rejected: Authorization: " in (pytester.path / "rec.xml").read_text()
    replay = run(
        pytester, "--fairness", "--junitxml=rep.xml", "--fairness-report=rep.json", *OFFLINE
    )
    replay.assert_outcomes(passed=1, errors=1)  # failed as recorded, from the notes
    assert KEY not in recorded.stdout.str() + replay.stdout.str()
    written = {p.relative_to(pytester.path).parts[0] for p in pytester.path.rglob("*.json")}
    assert {"fixtures", "baselines", "rec.json", "rep.json"} <= written
    assert (pytester.path / "rec.html").exists()
    assert (pytester.path / "rep.xml").exists()
    assert files_holding(pytester.path, KEY) == []
    assert files_holding(pytester.path, KEY[8:]) == []  # nor the key without its prefix


# --- attribution at concurrency 8


TWO_CALLS = (
    PRELUDE
    + """
from openai import OpenAI


@pytest.fixture(scope="session")
def recfair_recommender(recfair_http_client):
    client = OpenAI(base_url=URL, api_key=KEY, http_client=recfair_http_client)

    def ask(messages):
        reply = client.chat.completions.create(model="recfair-sim", messages=messages)
        return reply.choices[0].message.content or ""

    def recommend(prompt: str) -> list[str]:
        # two model calls per prompt: a draft, then a second pass given the draft
        draft = ask(openai_messages(prompt))
        second = ask(openai_messages(prompt + " Avoid these: " + draft.splitlines()[0]))
        return parse(second)

    return CallableProvider(recommend, model="two-call-pipeline")
"""
)


def _slug(text: str) -> str:
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", plain.lower()).strip("-")


def test_each_entity_cassette_holds_only_its_own_prompts_at_concurrency_8(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_pipeline_project(pytester, TWO_CALLS)
    # latency with jitter: replies come back out of order across the 8 workers
    with sim_server(latency_ms=40, jitter_ms=35) as server:
        point_at(monkeypatch, server)
        plan = run(pytester, "--fairness", "--fairness-plan")
        plan.stdout.fnmatch_lines(["*pipeline model calls per prompt: unknown before the first*"])
        assert server.stats.requests == 0
        run(pytester, *RECORD).assert_outcomes(passed=2)
        asked = server.stats.requests
    assert asked == 2 * 28
    by_entity = cassettes(pytester.path)
    assert len(by_entity) == 4
    cases: dict[str, str] = {}
    for entity, found in by_entity.items():
        for item in found:
            prompt = user_prompt(item)
            assert entity in _slug(prompt.split(" fan of ")[1].split(". Please")[0]), (
                entity,
                prompt,
            )
            (case,) = item["request"]["headers"]["x-recfair-case"]
            assert cases.setdefault(case, entity) == entity, (case, entity)
    assert sum(len(found) for found in by_entity.values()) == asked
    # each case holds its two calls: the draft and the second pass
    assert len(cases) == 28
    plan = run(pytester, "--fairness", "--fairness-plan")
    plan.stdout.fnmatch_lines(["*pipeline model calls per prompt: 2.0 recorded*"])
    replay = run(pytester, "--fairness", *OFFLINE)
    replay.assert_outcomes(passed=2)


# --- failures


def _failing_server() -> SimServer:
    """Every request of a prompt naming Muslim gets a 500 (so the SDK's retries fail
    too); other requests get a 500 now and then, answered on the retry."""
    sim = SimulatedRecommender("demo", seed=0)

    def model(prompt: str, system: str | None = None) -> str:
        if "Muslim" in prompt:
            raise RuntimeError("simulated outage")
        return sim(prompt, system)

    return SimServer(model, api_key=KEY, faults="500=0.3,max_per_request=1")


SWALLOWS = OPENAI.replace(
    "    def recommend(prompt: str) -> list[str]:\n"
    "        reply = client.chat.completions.create(\n"
    '            model="recfair-sim", messages=openai_messages(prompt), temperature=0\n'
    "        )\n",
    "    def recommend(prompt: str) -> list[str]:\n"
    "        try:\n"
    "            reply = client.chat.completions.create(\n"
    '                model="recfair-sim", messages=openai_messages(prompt), temperature=0\n'
    "            )\n"
    "        except Exception:\n"
    "            return [f'Fallback film {i}' for i in range(25)]\n",
)


@pytest.mark.parametrize("pipeline", ["raises", "swallows"])
def test_a_request_failed_for_good_fails_its_prompt_and_is_not_recorded(
    pipeline: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert SWALLOWS != OPENAI
    make_pipeline_project(pytester, OPENAI if pipeline == "raises" else SWALLOWS)
    with _failing_server() as server:
        point_at(monkeypatch, server)
        recorded = run(pytester, *RECORD, "--fairness-report=rec.json")
        stats = server.stats
    out = recorded.stdout.str()
    # the SDK retried: transient 500s were answered on a retry, the outage never was
    assert stats.outcomes["500"] > 4
    assert stats.requests > 28
    # the four Muslim prompts (one per entity) failed for good: the religion audit is an
    # error naming them (none is scored); the gender audit is whole
    recorded.assert_outcomes(passed=1, errors=1)
    failed = "4 of 20 prompts (20.0%) got no valid response"
    assert before_summary(out).count(failed) == 1, out
    assert "Failed per value: religion=Muslim 4." in out
    if pipeline == "swallows":  # its fallback list was not taken for an answer
        assert "the pipeline answered case" in out
        assert "answered HTTP 500 and was not answered on a retry" in out
    else:
        assert "raised InternalServerError: Error code: 500" in out
    kept = list(interactions(pytester.path))
    assert len(kept) == 28 - 4
    assert not [item for item in kept if "Muslim" in user_prompt(item)]
    assert {json.loads(item["response"]["body"]["string"])["object"] for item in kept} == {
        "chat.completion"
    }
    # a replay-only run (no network) fails the same prompts, from the failure notes
    replay = run(pytester, "--fairness", "--fairness-report=rep.json", *OFFLINE)
    replay.assert_outcomes(passed=1, errors=1)
    again = replay.stdout.str()
    assert before_summary(again).count(failed) == 1, again
    assert "Failed per value: religion=Muslim 4." in again
    assert "CassetteMiss" not in again
    assert numbers(pytester.path / "rep.json") == numbers(pytester.path / "rec.json")
    assert list(numbers(pytester.path / "rep.json")) == ["test_audit.py::test_gender"]


REQUESTS_SWALLOWS = REQUESTS.replace(
    "        reply = session.post(\n",
    "        try:\n            reply = session.post(\n",
).replace(
    "        reply.raise_for_status()\n",
    "        except requests.RequestException:\n"
    "            return [f'Fallback film {i}' for i in range(25)]\n"
    "        reply.raise_for_status()\n",
)


@pytest.mark.parametrize("client", ["recfair_http_client", "vcr"])
def test_a_transport_error_the_pipeline_swallows_still_fails_its_prompt(
    client: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server drops every connection: the pipeline returns a fallback list for each
    prompt, and not one of those is scored or recorded."""
    if client == "vcr":
        assert REQUESTS_SWALLOWS.count("Fallback film") == 1
        make_pipeline_project(
            pytester, REQUESTS_SWALLOWS, tests=RELIGION, ini="recfair_intercept = vcr\n"
        )
    else:
        make_pipeline_project(pytester, SWALLOWS, tests=RELIGION)
    faults = "timeout=1,timeout_mode=close,max_per_request=none"
    with sim_server(faults=faults) as server:
        point_at(monkeypatch, server)
        result = run(pytester, *RECORD)
        assert server.stats.outcomes["timeout-close"] >= 20
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "20 of 20 prompts (100.0%) got no valid response" in out, out
    assert not list(interactions(pytester.path))


# --- the budget


def test_a_recording_past_the_budget_is_refused_before_a_request_is_sent(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_pipeline_project(pytester, OPENAI, tests=RELIGION, ini="recfair_max_requests = 5\n")
    with sim_server() as server:
        point_at(monkeypatch, server)
        result = run(pytester, *RECORD)
        sent = server.stats.requests
    result.assert_outcomes(errors=1)
    assert sent == 0  # the plan (20 prompts) is past the budget: nothing is sent
    out = result.stdout.str()
    lines = [line for line in out.splitlines() if line.startswith("BudgetExceeded: ")]
    assert len(lines) == 1, out
    assert "recfair_max_requests = 5" in lines[0]
    assert "nothing was sent for it" in lines[0]
    assert not list(interactions(pytester.path))


def test_a_pipeline_calling_more_than_planned_stops_at_the_budget_as_it_sends(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before its first recording the plan counts one call per prompt (20); the pipeline
    makes two, so the budget of 30 is reached while it runs: request 31 is not sent."""
    ini = "recfair_max_requests = 30\n"
    make_pipeline_project(pytester, TWO_CALLS, tests=RELIGION, ini=ini)
    with sim_server() as server:
        point_at(monkeypatch, server)
        result = run(pytester, *RECORD)
        sent = server.stats.requests
    assert 20 < sent <= 30
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    lines = [line for line in out.splitlines() if "recfair_max_requests" in line]
    budget = [line for line in lines if line.startswith("BudgetStop: ")]
    assert len(budget) == 1, out
    assert "past this audit's share of the budget (30); it was not sent" in budget[0]
    # what was recorded is whole prompts' calls (two each), none past the budget
    kept = list(interactions(pytester.path))
    assert len(kept) % 2 == 0
    assert len(kept) <= sent


# --- output-level recording


OUTPUT_RECORDED = """
import os

import pytest

from pytest_recfair.providers import CallableProvider
from pytest_recfair.sim.recommender import SimulatedRecommender

SIM = SimulatedRecommender("demo", seed=0)


@pytest.fixture(scope="session")
def recfair_recommender():
    def recommend(prompt: str) -> str:
        if os.environ.get("PIPE_FORBIDDEN"):
            raise AssertionError("the replay called the recommender")
        return SIM(prompt)

    return CallableProvider(recommend, model="local-model", record=True)
"""


def test_record_true_replays_the_outputs_without_calling_the_function(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    subprocess_env(monkeypatch)
    monkeypatch.delenv("PIPE_FORBIDDEN", raising=False)
    make_pipeline_project(pytester, OUTPUT_RECORDED)
    recorded = run(pytester, *RECORD, "--fairness-report=rec.json")
    recorded.assert_outcomes(passed=2)
    kept = list(interactions(pytester.path))
    assert len(kept) == 28
    assert {item["request"]["uri"] for item in kept} == {"https://recfair.callable/local-model"}
    monkeypatch.setenv("PIPE_FORBIDDEN", "1")
    replay = run(pytester, "--fairness", "--fairness-report=rep.json", *OFFLINE)
    replay.assert_outcomes(passed=2)
    assert "the replay called the recommender" not in replay.stdout.str()
    assert numbers(pytester.path / "rep.json") == numbers(pytester.path / "rec.json")
    # the forbidden function does raise: a run that must call it fails

    again = run(pytester, "--fairness", "--fairness-record=all")
    again.assert_outcomes(errors=2)
    assert "the replay called the recommender" in again.stdout.str()


RELIGION_ONLY = """
from pytest_recfair import fairness

@fairness(attr="religion")
def test_religion():
    pass
"""

RETRYING_REQUESTS = REQUESTS.replace(
    "        reply.raise_for_status()\n",
    "        if reply.status_code >= 500:  # the pipeline's own retry, as SDKs do\n"
    "            reply = session.post(reply.request.url, data=reply.request.body,\n"
    "                                 headers=dict(reply.request.headers), timeout=30)\n"
    "        reply.raise_for_status()\n"
    "        if os.environ.get('PIPE_SECOND'):  # a second call, added after the recording\n"
    "            again = session.post(URL + '/chat/completions',\n"
    "                headers={'Authorization': f'Bearer {KEY}'}, timeout=30,\n"
    "                json={'model': 'recfair-sim', 'temperature': 0,\n"
    "                      'messages': openai_messages('again: ' + prompt)})\n"
    "            if again.status_code >= 500:\n"
    "                again = session.post(again.request.url, data=again.request.body,\n"
    "                                     headers=dict(again.request.headers), timeout=30)\n"
    "            again.raise_for_status()\n",
)


def test_vcr_sends_the_retry_of_a_failed_request_live_beside_recorded_ones(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under intercept="vcr", a prompt that already has recordings (new_episodes) and a
    new request that gets a 500: the pipeline's retry goes to the network and its 2xx is
    recorded; the 500 is not kept in vcrpy's cassette, where it would answer the retry."""
    assert RETRYING_REQUESTS != REQUESTS
    make_pipeline_project(
        pytester, RETRYING_REQUESTS, tests=RELIGION_ONLY, ini="recfair_intercept = vcr\n"
    )
    with sim_server() as server:
        point_at(monkeypatch, server)
        run(pytester, *RECORD).assert_outcomes(passed=1)
        first = len(list(interactions(pytester.path)))
    # every request fails once, then is answered: each new second call needs its retry
    with sim_server(faults="500=1.0,max_per_request=1") as server:
        point_at(monkeypatch, server, PIPE_SECOND="1")
        again = run(pytester, "--fairness", "--fairness-record=new_episodes")
        stats = server.stats
    again.assert_outcomes(passed=1)
    assert stats.outcomes["500"] == first  # one 500 per new second call
    assert stats.requests == 2 * first  # each retried live once, none answered from vcrpy
    kept = list(interactions(pytester.path))
    assert len(kept) == 2 * first
    assert all(item["response"]["status"]["code"] == 200 for item in kept)


# --- one request sent twice within one prompt's answer

SAME_TWICE = (
    PRELUDE
    + """
from openai import OpenAI


@pytest.fixture(scope="session")
def recfair_recommender(recfair_http_client):
    client = OpenAI(base_url=URL, api_key=KEY, http_client=recfair_http_client)

    def ask(prompt):
        reply = client.chat.completions.create(
            model="recfair-sim", messages=openai_messages(prompt), temperature=1
        )
        return parse(reply.choices[0].message.content or "")

    def recommend(prompt: str) -> list[str]:
        # the same request twice (a sampled model): the first answer's head, then the second's
        first, second = ask(prompt), ask(prompt)
        return first[:10] + [t for t in second if t not in first[:10]]

    return CallableProvider(recommend, model="same-twice")
"""
)


def test_a_request_repeated_within_one_answer_is_replayed_in_its_order(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two identical requests in one prompt's answer got two different (sampled) replies:
    the replay hands them back in the order they were recorded, so the pipeline's answer,
    and every number, is the recording's."""
    make_pipeline_project(pytester, SAME_TWICE)
    sampled = SimServer(SimulatedRecommender("demo", noise=0.3, seed=0), api_key=KEY)
    with sampled as server:
        point_at(monkeypatch, server)
        run(pytester, *RECORD, "--fairness-report=rec.json").assert_outcomes(passed=2)
        asked = server.stats.requests
    assert asked == 2 * 28
    by_case: dict[str, list[dict[str, object]]] = {}
    for item in interactions(pytester.path):
        case = item["request"]["headers"]["x-recfair-case"][0]
        by_case.setdefault(case, []).append(item)
    assert len(by_case) == 28
    assert all(len(pair) == 2 for pair in by_case.values())
    assert all(
        pair[0]["request"]["body"] == pair[1]["request"]["body"] for pair in by_case.values()
    )
    differ = [p for p in by_case.values() if p[0]["response"] != p[1]["response"]]
    assert len(differ) > 20  # the sampled replies differ: their order matters
    replay = run(pytester, "--fairness", "--fairness-report=rep.json", *OFFLINE)
    replay.assert_outcomes(passed=2)
    assert numbers(pytester.path / "rep.json") == numbers(pytester.path / "rec.json")
    # the order is what the numbers rest on: each pair swapped in the files moves them
    for path in (pytester.path / "fixtures" / "cassettes").glob("*.json"):
        doc = json.loads(path.read_text())
        doc["interactions"] = [
            item for pair in _pairs(doc["interactions"]) for item in reversed(pair)
        ]
        path.write_text(json.dumps(doc))
    swapped = run(pytester, "--fairness", "--fairness-report=swapped.json", *OFFLINE)
    assert "CassetteMiss" not in swapped.stdout.str()
    assert numbers(pytester.path / "swapped.json") != numbers(pytester.path / "rec.json")


def _pairs(items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The interactions of a cassette grouped by prompt case, in file order."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        groups.setdefault(item["request"]["headers"]["x-recfair-case"][0], []).append(item)
    return list(groups.values())
