"""A model that gives no usable list is not fair: it fails, every time (issue 9.6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.plugin import INI, plugin_args

pytest_plugins = ["pytester"]

REPLIES = {
    "empty": "",
    "refusal": "I'm sorry, but I can't help with that request.",
    "prose": "Great question! There are many wonderful films you might enjoy this year.",
}

CONFTEST = """
import os

import pytest

REPLIES = {replies!r}


@pytest.fixture(scope="session")
def recfair_recommender():
    def broken(system, prompt):
        return REPLIES[os.environ["BROKEN_KIND"]]

    return broken
"""

TESTS = """
from pytest_recfair import fairness

@fairness(attr="religion")
def test_religion():
    pass
"""


def _project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    pytester.makeconftest(CONFTEST.format(replies=REPLIES))
    pytester.makeini(INI)
    pytester.makepyfile(test_audit=TESTS)
    monkeypatch.setenv("BROKEN_KIND", kind)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*plugin_args(), "--fairness", *args)


def _baselines(pytester: pytest.Pytester) -> list[Path]:
    return sorted((pytester.path / "baselines").rglob("*.json"))


@pytest.mark.parametrize("kind", sorted(REPLIES))
def test_update_refuses_to_store_a_broken_model(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    _project(pytester, monkeypatch, kind)
    report = pytester.path / "run.json"
    result = _run(pytester, "--fairness-update", f"--fairness-report={report}", "-v")
    result.assert_outcomes(failed=1)
    assert _baselines(pytester) == []
    result.stdout.fnmatch_lines(
        ["*religion unusable: 1.000 of the replies had no usable list*above the maximum 0.2*"]
    )
    out = result.stdout.str()
    assert "accept them with" not in out  # accepting again would be refused again
    # the summary never shows a spread over nothing as a fair 0.000 / 1.000
    row = next(
        ln for ln in out.splitlines() if ln.lstrip().startswith("religion ") and "FAIL" in ln
    )
    assert row.split()[1:5] == ["FAIL", "n/a", "n/a", "n/a"]
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["summary"]["failed"] == 1


SWITCHED = """
import os

import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender


@pytest.fixture(scope="session")
def recfair_recommender():
    if os.environ["MODEL"] == "good":
        return SimulatedRecommender(noise=0.05)
    return lambda system, prompt: "I'm sorry, but I can't help with that request."
"""


def test_broken_model_fails_against_a_good_baseline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(SWITCHED)
    pytester.makeini(INI)
    pytester.makepyfile(test_audit=TESTS)
    monkeypatch.setenv("MODEL", "good")
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
    (base,) = _baselines(pytester)
    stored = base.read_bytes()
    # the same test answered by a model that refuses everything: it fails, never "improves"
    monkeypatch.setenv("MODEL", "broken")
    bad = _run(pytester)
    bad.assert_outcomes(failed=1)
    bad.stdout.fnmatch_lines(["*religion unusable: 1.000 of the replies had no usable list*"])
    assert base.read_bytes() == stored


def test_update_force_stores_it_and_says_so(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester, monkeypatch, "empty")
    result = _run(pytester, "--fairness-update", "--fairness-update-force")
    result.assert_outcomes(passed=1)
    assert len(_baselines(pytester)) == 1
    result.stdout.fnmatch_lines(["*stored although too many replies were unusable*"])


def test_a_share_below_the_limit_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the default limit leaves room for a few refusals: a model that refuses 1 prompt in 10
    pytester.makeconftest(
        """
import pytest
from pytest_recfair.sim.recommender import SimulatedRecommender

@pytest.fixture(scope="session")
def recfair_recommender():
    sim = SimulatedRecommender(noise=0.05)
    calls = {"n": 0}

    def sometimes_refuses(system, prompt):
        calls["n"] += 1
        if calls["n"] % 10 == 0:
            return "I'm sorry, but I can't help with that request."
        return sim(system, prompt)

    return sometimes_refuses
"""
    )
    pytester.makeini(INI)
    pytester.makepyfile(test_audit=TESTS)
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
