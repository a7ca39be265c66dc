"""Under pytest-xdist, results reach the controller: one summary, one report, all baselines."""

from __future__ import annotations

import json

import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.support.plugin import (
    RELIGION_TEST,
    before_summary,
    make_project,
    plugin_args,
    subprocess_env,
)

pytest_plugins = ["pytester"]

TESTS = "\n".join(
    f"""
@fairness(attr="{attr}")
def test_{attr}():
    pass
"""
    for attr in ("religion", "gender", "age", "race")
)


def test_xdist_two_workers(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    subprocess_env(monkeypatch)
    make_project(pytester, "from pytest_recfair import fairness\n" + TESTS)
    report = pytester.path / "fairness.json"
    junit = pytester.path / "junit.xml"
    args = (*plugin_args(), "-n", "2", "--fairness", f"--fairness-report={report}")
    result = pytester.runpytest_subprocess(*args, "--fairness-update", f"--junitxml={junit}")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*= fairness summary =*"])
    assert "xdist:" not in result.stdout.str()  # 4 audits asked live: the workers pay
    # one summary, listing every audit exactly once
    assert result.stdout.str().count("= fairness summary =") == 1
    assert len(list((pytester.path / "baselines").rglob("*.json"))) == 4
    data = json.loads(report.read_text())
    assert "religion" in json.dumps(data)
    assert "race" in json.dumps(data)
    assert junit.read_text().count('name="recfair.gate"') == 4

    assert not list(pytester.path.rglob("*.tmp"))
    # the baselines the workers wrote are whole: a plain run compares against all four
    pytester.runpytest(*plugin_args(), "--fairness").assert_outcomes(passed=4)


def test_recording_under_xdist_keeps_every_workers_interactions(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tests on two workers record into the same per-entity files (their neutral prompts
    are shared): what one worker saved survives the other's save, so the replay that
    follows finds every prompt."""
    subprocess_env(monkeypatch)
    with SimServer(SimulatedRecommender("demo", seed=0)) as server:
        pytester.makeini(
            "[pytest]\nrecfair_entities = 12\nrecfair_n_resamples = 50\n"
            "recfair_provider = openai\nrecfair_model = recfair-sim\n"
            f"recfair_base_url = {server.base_url}\n"
        )
        pytester.makepyfile(test_audit="from pytest_recfair import fairness\n" + TESTS)
        recorded = pytester.runpytest_subprocess(
            *plugin_args(), "--fairness", "--fairness-record=once", "--fairness-update", "-n", "2"
        )
        recorded.assert_outcomes(passed=4)
        asked = server.stats.requests
    replay = pytester.runpytest_subprocess(*plugin_args(), "--fairness")
    replay.assert_outcomes(passed=4)
    interactions = [
        item
        for path in (pytester.path / "fixtures" / "cassettes").glob("*.json")
        for item in json.loads(path.read_text())["interactions"]
    ]
    bodies = [item["request"]["body"] for item in interactions]
    assert len(bodies) == len(set(bodies))  # each prompt stored once
    # both workers may ask a shared neutral prompt before either has saved it: the
    # replay above passing is what shows that no worker's answers were lost
    assert len(bodies) <= asked


def test_more_workers_than_audits_is_said_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An audit runs in one worker: with fewer audits than workers, the run says once that
    the others only start up (docs/github-actions.md)."""
    subprocess_env(monkeypatch)
    make_project(pytester, RELIGION_TEST)
    result = pytester.runpytest_subprocess(
        *plugin_args(), "-n", "2", "--fairness", "--fairness-update"
    )
    result.assert_outcomes(passed=1)
    out = before_summary(result.stdout.str())
    assert out.count("xdist: 2 workers for 1 audit(s)") == 1
    assert "use -n 1 or fewer" in out
