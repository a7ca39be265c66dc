"""A role-play audit through --fairness-batch, judge included: the answers go through the
simulator's batch endpoints on loopback, the judge's calls follow for the answered Why
rounds, every call lands in the question's cassette, and an offline replay of those
cassettes gives the same round outcomes as the batch run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.support.plugin import plugin_args

pytest_plugins = ["pytester"]

TESTS = """
from pytest_recfair import fairness


@fairness(kind="roleplay", attr="religion")
def test_roles(fairness_result):
    pass
"""


@pytest.fixture
def server() -> Iterator[SimServer]:
    with SimServer(SimulatedRecommender(bias="demo", seed=3)) as srv:
        yield srv


def _questions(path: Path) -> list[dict[str, Any]]:
    (res,) = json.loads(path.read_text())["results"]
    questions: list[dict[str, Any]] = res["roleplay"]["result"]["questions"]
    return questions


def test_batch_with_judge_records_every_call_and_replays_the_same(
    pytester: pytest.Pytester, server: SimServer
) -> None:
    pytester.makeini(
        "[pytest]\nrecfair_provider = openai\nrecfair_model = recfair-sim-1\n"
        f"recfair_base_url = {server.base_url}\nrecfair_judge_model = sim-judge\n"
        "recfair_batch_poll = 0.05\nrecfair_questions = smoke\n"
    )
    pytester.makepyfile(test_audit=TESTS)
    args = (*plugin_args(), "-p", "no:cacheprovider", "--fairness")
    batch = pytester.runpytest_subprocess(
        *args, "--fairness-batch", "--fairness-record=once", "--fairness-update",
        "--fairness-report=batch.json",
    )  # fmt: skip
    batch.assert_outcomes(passed=1)
    batch.stdout.fnmatch_lines(["*144 to ask (incl. 72 judge calls)*", "*batch * 72/72*"])
    cassettes = list((pytester.path / "fixtures" / "cassettes").glob("*.json"))
    assert len(cassettes) == 24
    calls = {p.name: len(json.loads(p.read_text())["interactions"]) for p in cassettes}
    # 3 rounds a question; a Why question's 3 answered rounds add 3 judge calls each
    assert sorted(set(calls.values())) == [3, 12]
    assert sum(n == 12 for n in calls.values()) == 8
    replay = pytester.runpytest_subprocess(*args, "--fairness-report=replay.json")
    replay.assert_outcomes(passed=1)
    got = _questions(pytester.path / "replay.json")
    assert got == _questions(pytester.path / "batch.json")
    assert all("failed" not in q["outcomes"] for q in got)
