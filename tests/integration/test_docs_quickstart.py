"""docs/quickstart.md followed as a new user follows it, against the simulator on loopback.

The audit file and the provider settings are the doc's own blocks (the simulator's URL
is the one line added: it is "your model"); the commands are the doc's shell blocks, run
line by line as written (``run_block``). The baselines they leave must be byte for byte
what a later CI replay computes, and that replay must pass without asking the server
anything.
"""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.support.docs import (
    QUICKSTART,
    SIM_KEY,
    baseline_files,
    blocks,
    commands,
    git_repo,
    quickstart_project,
    run_block,
    run_pytest,
    sampling_sim,
    section,
)

pytest_plugins = ["pytester"]


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with sampling_sim() as srv:
        yield srv


def test_the_quickstart_baselines_are_what_ci_replays(
    pytester: pytest.Pytester, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    quickstart_project(pytester, sim, monkeypatch)
    git_repo(pytester.path)
    step4 = section(QUICKSTART, "4. Record once", "bash")
    record, update = commands(step4)
    assert "--fairness-record=once" in record
    assert "--fairness-update" in update
    assert not any(a.startswith("--fairness-record") for a in update)  # a replay

    first, second = run_block(pytester, step4)
    first.assert_outcomes(failed=2)  # the doc says so: no baseline yet
    first.stdout.fnmatch_lines(["*no fairness baseline*"])
    # the plan, with its cost, is printed before the first request of each test
    first.stdout.fnmatch_lines(
        ["recfair plan: tests/test_fairness.py::test_fair_across_groups: *~$*"]
    )
    asked = sim.stats.requests
    assert 0 < asked <= 2_000  # within the default budget, as the doc says
    second.assert_outcomes(passed=2)
    quickstart = baseline_files(pytester.path / "baselines")
    assert sorted(quickstart) == ["test_fair_across_groups.json", "test_religion.json"]
    run_block(pytester, section(QUICKSTART, "5. Commit", "bash"))  # git add, git commit

    # step 5: from now on plain `pytest --fairness` replays (no entity option anywhere)
    run_pytest(pytester, ["--fairness"]).assert_outcomes(passed=2)
    # CI: replay only (the record mode is explicit here, as in docs/github-actions.md)
    run_pytest(pytester, ["--fairness", "--fairness-record=none"]).assert_outcomes(passed=2)
    again = ["--fairness", "--fairness-record=none", "--fairness-update"]
    run_pytest(pytester, [*again, "-o", "recfair_baseline_dir=ci"]).assert_outcomes(passed=2)
    assert baseline_files(pytester.path / "ci") == quickstart
    assert sim.stats.requests == asked  # the replays asked the server nothing


def test_the_default_budget_stops_a_large_recording_before_it_sends(
    pytester: pytest.Pytester, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    quickstart_project(pytester, sim, monkeypatch)
    (record, _) = commands(section(QUICKSTART, "4. Record once", "bash"))
    big = run_pytest(pytester, [*record, "--fairness-entities=100"])
    # the audit of every attribute (3,100 prompts) is stopped unsent; the religion audit
    # (100 entities x 5 prompts) fits the budget left and runs
    big.assert_outcomes(errors=1, failed=1)
    big.stdout.fnmatch_lines(
        ["*recfair_max_requests = 2,000: *nothing was sent*Raise recfair_max_requests*"]
    )
    assert sim.stats.requests == 100 * 5


def _interactions(pytester: pytest.Pytester) -> dict[str, int]:
    """Interactions per cassette file."""
    cassettes = pytester.path / "fixtures" / "cassettes"
    return {
        p.name: len(json.loads(p.read_text("utf-8"))["interactions"])
        for p in sorted(cassettes.glob("*.json"))
    }


def _numbers(doc: dict[str, Any]) -> dict[str, Any]:
    """A baseline without the record mode it was made in (the only field allowed to
    differ between a recording pass and a replay)."""
    return {**doc, "meta": {k: v for k, v in doc["meta"].items() if k != "record_mode"}}


def test_a_recording_pass_scores_what_its_replay_scores(
    pytester: pytest.Pytester, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cause of the old mismatch: "American" is a value of nationality and of
    continent, so one test asks that prompt twice; the two replies came back in either
    order and replay handed them out in recorded order. Each case now replays its own."""
    quickstart_project(pytester, sim, monkeypatch)
    both = ["--fairness", "--fairness-record=once", "--fairness-update"]
    run_pytest(pytester, both).assert_outcomes(passed=2)
    cassettes = pytester.path / "fixtures" / "cassettes"
    bodies = [
        (i["request"]["body"], i["request"]["headers"]["x-recfair-repeat"][0])
        for path in cassettes.glob("*.json")
        for i in json.loads(path.read_text("utf-8"))["interactions"]
    ]
    assert len(bodies) > len(set(bodies))  # some request was asked twice in one pass
    recorded = baseline_files(pytester.path / "baselines")
    shutil.rmtree(pytester.path / "baselines")
    asked = sim.stats.requests
    run_pytest(pytester, ["--fairness", "--fairness-update"]).assert_outcomes(passed=2)
    replayed = baseline_files(pytester.path / "baselines")
    assert sim.stats.requests == asked
    assert sorted(replayed) == sorted(recorded)
    for name, data in recorded.items():
        assert _numbers(json.loads(replayed[name])) == _numbers(json.loads(data)), name


def test_step_6_re_records_a_changed_model_and_accepts_it_from_a_replay(
    pytester: pytest.Pytester, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    quickstart_project(pytester, sim, monkeypatch)
    git_repo(pytester.path)
    run_block(pytester, section(QUICKSTART, "4. Record once", "bash"))
    run_block(pytester, section(QUICKSTART, "5. Commit", "bash"))
    recorded = _interactions(pytester)
    old_model = sim.stats.requests
    rerecord, accept = (b.text for b in blocks(QUICKSTART, "bash") if b.section.startswith("6."))
    assert "--fairness-record=once" in rerecord  # fresh cassettes, not `all`
    changed = SimulatedRecommender(bias={"religion": {"Muslim": 0.40}}, noise=0.08, seed=3)
    ini = pytester.path / "pyproject.toml"
    with SimServer(changed, api_key=SIM_KEY) as new_model:
        ini.write_text(ini.read_text("utf-8").replace(sim.base_url, new_model.base_url))
        (regressed,) = run_block(pytester, rerecord)
        assert sim.stats.requests == old_model  # nothing went to the old model
        assert new_model.stats.requests > 0
    outcomes = regressed.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1, outcomes
    regressed.stdout.fnmatch_lines(["*test_religion*FAIL*"])
    # the fresh cassettes hold only the new model's replies: nothing piles up
    assert _interactions(pytester) == recorded
    # the command the failure prints is the doc's accept command, word for word
    # under CI=true pytest's short summary repeats the whole message, so dedupe
    printed = {x.split("accept them with: ", 1)[1] for x in regressed.outlines
               if "accept them with: " in x and "test_religion" in x}  # fmt: skip
    (accept_line,) = commands(accept)
    assert [shlex.split(c) for c in printed] == [["pytest", *accept_line]]
    (accepted_run,) = run_block(pytester, accept)
    accepted_run.assert_outcomes(passed=1)  # a replay of the new replies
    accepted = (pytester.path / "baselines" / "test_religion.json").read_bytes()
    replay = ["--fairness", "--fairness-record=none", "-k", "test_religion"]
    run_pytest(pytester, replay).assert_outcomes(passed=1)
    run_pytest(pytester, [*replay, "--fairness-update", "-o", "recfair_baseline_dir=ci"])
    assert (pytester.path / "ci" / "test_religion.json").read_bytes() == accepted
