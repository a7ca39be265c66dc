"""docs/quickstart.md followed as a new user follows it, against the simulator on loopback.

The audit file and the provider settings are the doc's own blocks; the commands are the
doc's step-4 commands. The baselines they leave must be byte for byte what a later CI
replay computes, and that replay must pass without asking the server anything.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.sim import SimServer, SimulatedRecommender
from tests.support.docs import DOCS, blocks, commands
from tests.support.plugin import plugin_args

pytest_plugins = ["pytester"]

KEY = "sk-quickstart-sim-0123456789"
QUICKSTART = DOCS / "quickstart.md"


@pytest.fixture
def sim() -> Iterator[SimServer]:
    # A nearly fair model that samples (noise: 2 of 25 titles change on every call), so
    # a prompt asked twice gets two different replies, as from a real model; latency
    # with jitter, so replies come back in another order than they were asked.
    rec = SimulatedRecommender(bias={"religion": {"Muslim": 0.04}}, noise=0.08, seed=3)
    with SimServer(rec, api_key=KEY, latency_ms=20, jitter_ms=20) as srv:
        yield srv


def _section(title: str, lang: str) -> str:
    (block,) = [b for b in blocks(QUICKSTART, lang) if b.section.startswith(title)]
    return block.text


def _project(pytester: pytest.Pytester, srv: SimServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps 2 and 3 of the quickstart: its audit file and its provider settings, with
    the simulator's URL as the base URL and a small audit (the doc's own advice)."""
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_fairness.py").write_text(
        _section("2. Write an audit", "python"), "utf-8"
    )
    ini = tomllib.loads(_section("3. Point it at your model", "toml"))["tool"]["pytest"]
    ini = {**ini["ini_options"], "recfair_base_url": srv.base_url, "recfair_entities": "10"}
    lines = "".join(f"{key} = {json.dumps(value)}\n" for key, value in ini.items())
    pytester.makefile(".toml", pyproject="[tool.pytest.ini_options]\n" + lines)
    monkeypatch.setenv(ini["recfair_api_key_env"], KEY)


def _pytest(pytester: pytest.Pytester, args: list[str]) -> pytest.RunResult:
    return pytester.runpytest(*plugin_args(), "-p", "no:cacheprovider", *args)


def _files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.glob("*.json"))}


def test_the_quickstart_baselines_are_what_ci_replays(
    pytester: pytest.Pytester, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester, sim, monkeypatch)
    record, update = commands(_section("4. Record once", "bash"))
    assert "--fairness-record=once" in record
    assert "--fairness-update" in update
    assert not any(a.startswith("--fairness-record") for a in update)  # a replay

    first = _pytest(pytester, record)
    first.assert_outcomes(failed=2)  # the doc says so: no baseline yet
    first.stdout.fnmatch_lines(["*no fairness baseline*"])
    asked = sim.stats.requests
    assert asked > 0
    _pytest(pytester, update).assert_outcomes(passed=2)
    quickstart = _files(pytester.path / "baselines")
    assert sorted(quickstart) == ["test_fair_across_groups.json", "test_religion.json"]

    # CI: replay only (the record mode is explicit here, as in docs/github-actions.md)
    _pytest(pytester, ["--fairness", "--fairness-record=none"]).assert_outcomes(passed=2)
    again = ["--fairness", "--fairness-record=none", "--fairness-update"]
    _pytest(pytester, [*again, "-o", "recfair_baseline_dir=ci"]).assert_outcomes(passed=2)
    assert _files(pytester.path / "ci") == quickstart
    assert sim.stats.requests == asked  # the replays asked the server nothing


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
    _project(pytester, sim, monkeypatch)
    both = ["--fairness", "--fairness-record=once", "--fairness-update"]
    _pytest(pytester, both).assert_outcomes(passed=2)
    cassettes = pytester.path / "fixtures" / "cassettes"
    bodies = [
        (i["request"]["body"], i["request"]["headers"]["x-recfair-repeat"][0])
        for path in cassettes.glob("*.json")
        for i in json.loads(path.read_text("utf-8"))["interactions"]
    ]
    assert len(bodies) > len(set(bodies))  # some request was asked twice in one pass
    recorded = _files(pytester.path / "baselines")
    shutil.rmtree(pytester.path / "baselines")
    asked = sim.stats.requests
    _pytest(pytester, ["--fairness", "--fairness-update"]).assert_outcomes(passed=2)
    replayed = _files(pytester.path / "baselines")
    assert sim.stats.requests == asked
    assert sorted(replayed) == sorted(recorded)
    for name, data in recorded.items():
        assert _numbers(json.loads(replayed[name])) == _numbers(json.loads(data)), name
