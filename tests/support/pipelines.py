"""Pytester projects whose recommender is a Python pipeline calling the simulator through
a real SDK (tests/integration/test_pipeline_*.py; not a test module).

Each pipeline reads the simulator's URL and key from the environment (PIPE_URL,
PIPE_KEY), its system prompt from PIPE_SYSTEM and applies a re-ranker (reverse, keep 15)
when PIPE_RERANK is set, so one project can be re-run as "the pipeline changed".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.support.plugin import plugin_args, subprocess_env

#: A fake API key long enough to count as a secret everywhere (30+ characters).
KEY = "sk-test-" + "Qz7vR2mK9pLx4WnT8bYc3HdF6jGs"
SYSTEM = "You recommend films."

INI = "[pytest]\nrecfair_entities = 4\nrecfair_n_resamples = 50\n"

TWO_TESTS = """
from pytest_recfair import fairness

@fairness(attr="religion")
def test_religion():
    pass

@fairness(attr="gender")
def test_gender():
    pass
"""

#: What every pipeline conftest starts with: its settings and its parser / re-ranker.
PRELUDE = """
import os

import pytest

from pytest_recfair.providers import CallableProvider

URL = os.environ["PIPE_URL"]  # http://127.0.0.1:PORT/v1
KEY = os.environ["PIPE_KEY"]
SYSTEM = os.environ.get("PIPE_SYSTEM", "You recommend films.")


def parse(text):
    items = [line.split(". ", 1)[-1] for line in text.splitlines() if line.strip()]
    if os.environ.get("PIPE_RERANK"):
        items = items[::-1][:15]  # the re-ranker under test: changes the top-k set
    return items


def openai_messages(prompt):
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
"""

OPENAI = (
    PRELUDE
    + """
from openai import OpenAI


@pytest.fixture(scope="session")
def recfair_recommender(recfair_http_client):
    client = OpenAI(base_url=URL, api_key=KEY, http_client=recfair_http_client)

    def recommend(prompt: str) -> list[str]:
        reply = client.chat.completions.create(
            model="recfair-sim", messages=openai_messages(prompt), temperature=0
        )
        return parse(reply.choices[0].message.content or "")

    return CallableProvider(recommend, model="openai-pipeline")
"""
)

ASYNC_OPENAI = (
    PRELUDE
    + """
from openai import AsyncOpenAI


@pytest.fixture(scope="session")
def recfair_recommender(recfair_async_http_client):
    client = AsyncOpenAI(base_url=URL, api_key=KEY, http_client=recfair_async_http_client)

    async def recommend(prompt: str) -> list[str]:
        reply = await client.chat.completions.create(
            model="recfair-sim", messages=openai_messages(prompt), temperature=0
        )
        return parse(reply.choices[0].message.content or "")

    return CallableProvider(recommend, model="async-openai-pipeline")
"""
)

# The Anthropic SDK appends /v1/messages to its base URL: it wants the server's root.
# Its key travels as x-api-key (the simulator then checks no key).
ANTHROPIC = (
    PRELUDE
    + """
from anthropic import Anthropic


@pytest.fixture(scope="session")
def recfair_recommender(recfair_http_client):
    client = Anthropic(
        base_url=URL.removesuffix("/v1"), api_key=KEY, http_client=recfair_http_client
    )

    def recommend(prompt: str) -> list[str]:
        reply = client.messages.create(
            model="recfair-sim",
            max_tokens=1024,
            system=SYSTEM,
            messages=[{"role": "user", "content": prompt}],
        )
        return parse(reply.content[0].text)

    return CallableProvider(recommend, model="anthropic-pipeline")
"""
)

_LANGCHAIN = (
    PRELUDE
    + """
from langchain_openai import ChatOpenAI


@pytest.fixture(scope="session")
def recfair_recommender(recfair_http_client, recfair_async_http_client):
    llm = ChatOpenAI(
        model="recfair-sim",
        base_url=URL,
        api_key=KEY,
        temperature=0,
        http_client=recfair_http_client,
        http_async_client=recfair_async_http_client,
    )
"""
)

LANGCHAIN = (
    _LANGCHAIN
    + """
    def recommend(prompt: str) -> list[str]:
        return parse(llm.invoke([("system", SYSTEM), ("human", prompt)]).content)

    return CallableProvider(recommend, model="langchain-pipeline")
"""
)

LANGCHAIN_ASYNC = (
    _LANGCHAIN
    + """
    async def recommend(prompt: str) -> list[str]:
        reply = await llm.ainvoke([("system", SYSTEM), ("human", prompt)])
        return parse(reply.content)

    return CallableProvider(recommend, model="langchain-async-pipeline")
"""
)

HTTPX0 = (
    PRELUDE
    + """
@pytest.fixture(scope="session")
def recfair_recommender(recfair_httpx_client):
    import httpx

    assert isinstance(recfair_httpx_client, httpx.Client)

    def recommend(prompt: str) -> list[str]:
        reply = recfair_httpx_client.post(
            URL + "/chat/completions",
            headers={"Authorization": f"Bearer {KEY}"},
            json={"model": "recfair-sim", "messages": openai_messages(prompt), "temperature": 0},
        )
        reply.raise_for_status()
        return parse(reply.json()["choices"][0]["message"]["content"])

    return CallableProvider(recommend, model="httpx0-pipeline")
"""
)

# A pipeline that builds its own client (requests): recorded through vcrpy.
REQUESTS = (
    PRELUDE
    + """
import requests


@pytest.fixture(scope="session")
def recfair_recommender():
    session = requests.Session()

    def recommend(prompt: str) -> list[str]:
        reply = session.post(
            URL + "/chat/completions",
            headers={"Authorization": f"Bearer {KEY}"},
            json={"model": "recfair-sim", "messages": openai_messages(prompt), "temperature": 0},
            timeout=30,
        )
        reply.raise_for_status()
        return parse(reply.json()["choices"][0]["message"]["content"])

    return CallableProvider(recommend, model="requests-pipeline")
"""
)


def make_pipeline_project(
    pytester: pytest.Pytester, conftest: str, *, tests: str = TWO_TESTS, ini: str = ""
) -> None:
    pytester.makeconftest(conftest)
    pytester.makeini(INI + ini)
    pytester.makepyfile(test_audit=tests)


def point_at(monkeypatch: pytest.MonkeyPatch, server: SimServer, **env: str) -> None:
    """The pytester subprocesses' environment: this checkout importable, the pipeline
    aimed at ``server`` with the test key, and ``env`` (PIPE_SYSTEM, PIPE_RERANK ...)."""
    subprocess_env(monkeypatch)
    monkeypatch.setenv("PIPE_URL", server.base_url)
    monkeypatch.setenv("PIPE_KEY", KEY)
    for name in ("PIPE_SYSTEM", "PIPE_RERANK"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def sim_server(*, api_key: str | None = KEY, **kwargs: Any) -> SimServer:
    return SimServer(SimulatedRecommender("demo", seed=0), api_key=api_key, **kwargs)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", *args)


#: A replay with no network at all: pytest-socket refuses every inet socket (the event
#: loop's own socketpair is a unix socket).
OFFLINE = ("--disable-socket", "--allow-unix-socket")

_NUMBERS = ("snsr", "snsv", "pafs", "values", "matrix")


def numbers(report: Path) -> dict[str, dict[str, Any]]:
    """Each audit's per-attribute numbers in a JSON report (no timing, record mode or
    baseline comparison)."""
    doc = json.loads(report.read_text())
    return {
        audit["meta"]["test_id"]: {
            a["attribute"]: {k: a[k] for k in _NUMBERS} for a in audit["attributes"]
        }
        for audit in doc["results"]
    }


def cassettes(root: Path) -> dict[str, list[dict[str, Any]]]:
    """The interactions of each entity cassette of a project, by entity."""
    folder = root / "fixtures" / "cassettes"
    return {
        path.stem: json.loads(path.read_text())["interactions"]
        for path in sorted(folder.glob("*.json"))
    }


def interactions(root: Path) -> Iterator[dict[str, Any]]:
    for found in cassettes(root).values():
        yield from found


def user_prompt(interaction: dict[str, Any]) -> str:
    """The user message of a recorded chat request (OpenAI or Anthropic shape)."""
    body = json.loads(interaction["request"]["body"])
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    assert len(users) == 1, body
    return str(users[0])


def files_holding(root: Path, secret: str) -> list[str]:
    """The files under ``root`` (cassettes, baselines, reports, notes ...) that hold
    ``secret`` in any byte form."""
    found = []
    needle = secret.encode("utf-8")
    for path in root.rglob("*"):
        if path.is_file() and needle in path.read_bytes():
            found.append(str(path.relative_to(root)))
    return found
