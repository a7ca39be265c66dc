"""A callable recommender gets a readable model id (issue 11 point 7)."""

from __future__ import annotations

import json

import pytest

from tests.support.plugin import INI, plugin_args

pytest_plugins = ["pytester"]

CONFTEST = """
import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender

SIM = SimulatedRecommender()


@pytest.fixture(scope="session")
def recfair_recommender():
    return lambda prompt: SIM(prompt)
"""

TESTS = """
from pytest_recfair import fairness

@fairness(attr="religion")
def test_plain():
    pass

@fairness(attr="religion", model="my-ranker-v2")
def test_named():
    pass
"""


def _models(pytester: pytest.Pytester) -> dict[str, str]:
    pytester.makeconftest(CONFTEST)
    pytester.makeini(INI)
    pytester.makepyfile(test_audit=TESTS)
    report = pytester.path / "r.json"
    result = pytester.runpytest(
        *plugin_args(), "--fairness", "--fairness-update", f"--fairness-report={report}"
    )
    assert result.ret == 0, result.stdout.str()
    data = json.loads(report.read_text(encoding="utf-8"))
    return {r["meta"]["test_id"]: r["meta"]["model"] for r in data["results"]}


def test_a_lambda_is_named_after_its_fixture(pytester: pytest.Pytester) -> None:
    models = _models(pytester)
    assert models == {
        "test_audit.py::test_plain": "recfair_recommender",
        "test_audit.py::test_named": "my-ranker-v2",
    }
