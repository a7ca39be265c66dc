"""One run budget across every mode and worker (issue 22, point 2): the plan and the
budget check run before a batch is submitted, and under pytest-xdist the workers share
one ledger, so the run never sends past recfair_max_requests; --fairness-plan -n 2
prints every test's plan on the controller."""

from __future__ import annotations

import re

import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.support.plugin import plugin_args, subprocess_env

pytest_plugins = ["pytester"]

TESTS = "from pytest_recfair import fairness\n" + "\n".join(
    f"""
@fairness(attr="{attr}")
def test_{attr}():
    pass
"""
    for attr in ("religion", "gender", "age", "race")
)


def _ini(server: SimServer, extra: str = "") -> str:
    return (
        "[pytest]\nrecfair_entities = 4\nrecfair_n_resamples = 50\n"
        "recfair_provider = openai\nrecfair_model = recfair-sim\n"
        f"recfair_base_url = {server.base_url}\nrecfair_batch_poll = 0.05\n" + extra
    )


def test_batch_mode_checks_the_budget_before_submitting(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    subprocess_env(monkeypatch)
    with SimServer(SimulatedRecommender("demo", seed=0)) as server:
        pytester.makeini(_ini(server, "recfair_max_requests = 0\n"))
        pytester.makepyfile(test_audit=TESTS)
        result = pytester.runpytest_subprocess(
            *plugin_args(), "--fairness", "--fairness-batch", "-k", "religion"
        )
        assert server.batches.created == 0
        assert server.stats.requests == 0, "no batch line, no upload"
    out = result.stdout.str()
    assert "recfair_max_requests = 0" in out
    assert "recfair plan:" in out
    assert "Traceback" not in out


@pytest.mark.parametrize("workers", ["0", "2"])
def test_one_budget_for_every_worker(
    workers: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4 tests of 20 prompts each (4 entities x 5 prompts; neutral prompts shared) against
    a limit of 40: never more than 40 requests, serial or on two workers."""
    subprocess_env(monkeypatch)
    with SimServer(SimulatedRecommender("demo", seed=0)) as server:
        pytester.makeini(_ini(server, "recfair_max_requests = 40\n"))
        pytester.makepyfile(test_audit=TESTS)
        result = pytester.runpytest_subprocess(
            *plugin_args(),
            "-n",
            workers,
            "--fairness",
            "--fairness-record=once",
            "--fairness-update",
        )
        sent = server.stats.requests
    assert 0 < sent <= 40, result.stdout.str()
    out = result.stdout.str()
    assert "would bring this run to" in out, out  # a refused test says why
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 1
    assert outcomes.get("errors", 0) >= 1


def test_plan_under_xdist_prints_every_plan(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    subprocess_env(monkeypatch)
    with SimServer(SimulatedRecommender("demo", seed=0)) as server:
        pytester.makeini(_ini(server))
        pytester.makepyfile(test_audit=TESTS)
        result = pytester.runpytest_subprocess(
            *plugin_args(), "-n", "2", "--fairness", "--fairness-plan", "--fairness-record=once"
        )
        assert server.stats.requests == 0
    result.assert_outcomes(skipped=4)
    out = result.stdout.str()
    for attr in ("religion", "gender", "age", "race"):
        assert re.search(rf"^recfair plan: \S+::test_{attr}: \d+ prompts, 0 already", out, re.M)
    result.stdout.fnmatch_lines(["*= fairness plan =*", "fairness plan: 4 audit(s), 68 prompts*"])
