"""The shared cassette store in real pytest runs against the simulator on loopback.

Every count below is what the server itself received (``SimServer.stats``): prompts
recorded once are never asked again, a moved test replays offline, an interrupted
recording resumes with exactly the prompts it lacks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.support.plugin import RELIGION_AND_GENDER_TESTS, REPO, plugin_args

pytest_plugins = ["pytester"]

KEY = "sk-sim-good-key-0123456789"


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(SimulatedRecommender(bias="demo"), api_key=KEY) as srv:
        yield srv


def _ini(pytester: pytest.Pytester, srv: SimServer, extra: str = "", entities: int = 3) -> None:
    pytester.makeini(
        "[pytest]\n"
        f"recfair_entities = {entities}\n"
        "recfair_n_resamples = 100\n"
        "recfair_provider = openai\n"
        "recfair_model = recfair-sim\n"
        "recfair_api_key_env = SIM_KEY\n"
        f"recfair_base_url = {srv.base_url}\n" + extra
    )


def _interactions(root: Path) -> int:
    return sum(len(json.loads(p.read_text("utf-8"))["interactions"]) for p in root.rglob("*.json"))


TESTS = RELIGION_AND_GENDER_TESTS


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*plugin_args(), "--fairness", "-p", "no:cacheprovider", *args)


def test_identical_prompts_in_two_tests_are_asked_once(
    pytester: pytest.Pytester, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIM_KEY", KEY)
    _ini(pytester, sim)
    pytester.makepyfile(test_fair=TESTS)
    asked = {}
    for name in ("religion", "gender"):
        before = sim.stats.requests
        out = _run(pytester, f"-o=recfair_cassette_dir=alone_{name}", "--fairness-record=once",
                   "-k", name, "--fairness-update")  # fmt: skip
        out.assert_outcomes(passed=1)
        asked[name] = sim.stats.requests - before
    before = sim.stats.requests
    _run(pytester, "-o=recfair_cassette_dir=both", "--fairness-record=once").assert_outcomes(
        passed=2
    )
    both = sim.stats.requests - before
    # the 3 entities' neutral prompts are shared by the two tests: paid for once
    assert both == asked["religion"] + asked["gender"] - 3
    assert _interactions(pytester.path / "both") == both
    files = sorted(p.name for p in (pytester.path / "both").iterdir())
    assert len(files) == 3
    assert all(f.endswith(".json") for f in files)


def _recorded(pytester: pytest.Pytester, sim: SimServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A project whose two tests recorded their cassettes and baselines from ``sim``."""
    monkeypatch.setenv("SIM_KEY", KEY)
    _ini(pytester, sim)
    pytester.makepyfile(test_fair=TESTS)
    _run(pytester, "--fairness-record=once", "--fairness-update").assert_outcomes(passed=2)


def test_moving_a_test_file_costs_no_request(
    pytester: pytest.Pytester, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _recorded(pytester, sim, monkeypatch)
    recorded = sim.stats.requests
    baselines = sorted(p.name for p in (pytester.path / "baselines").iterdir())
    assert baselines == ["test_gender.json", "test_religion.json"]  # stable names, no path
    moved = pytester.path / "tests" / "sub"
    moved.mkdir(parents=True)
    (pytester.path / "test_fair.py").rename(moved / "test_fair.py")
    out = _run(pytester, "-rA")  # record mode none: replay only
    out.assert_outcomes(passed=2)
    assert sim.stats.requests == recorded  # nothing asked again
    out.stdout.no_fnmatch_line("*no stored baseline*")
    out.stdout.no_fnmatch_line("*CassetteMiss*")


def _settled(sim: SimServer, quiet: float = 0.5, limit: float = 10.0) -> int:
    """The server's request count once it has not changed for ``quiet`` seconds."""
    deadline = time.monotonic() + limit
    count = sim.stats.requests
    while time.monotonic() < deadline:
        time.sleep(quiet)
        if sim.stats.requests == count:
            return count
        count = sim.stats.requests
    return count


def test_a_bad_key_records_nothing_and_a_good_key_then_records_all(
    pytester: pytest.Pytester, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ini(pytester, sim)
    pytester.makepyfile(test_fair=TESTS)
    monkeypatch.setenv("SIM_KEY", "sk-wrong-key-0000000000")
    out = _run(pytester, "--fairness-record=once", "-k", "religion")
    out.assert_outcomes(errors=1)
    out.stdout.fnmatch_lines(["*HTTP 401 Unauthorized*SIM_KEY*"])
    cassettes = pytester.path / "fixtures" / "cassettes"
    assert _interactions(cassettes) == 0  # the 401 is not model output: never recorded
    monkeypatch.setenv("SIM_KEY", KEY)
    # the 401 aborts the run while other requests are in flight; the server may count
    # them after pytest returns: wait until its count stops moving
    before = _settled(sim)
    good = _run(pytester, "--fairness-record=once", "-k", "religion", "--fairness-update")
    good.assert_outcomes(passed=1)
    asked = sim.stats.requests - before
    assert asked == _interactions(cassettes) > 0  # every prompt asked once, all recorded
    before = sim.stats.requests
    _run(pytester, "--fairness-record=new_episodes", "-k", "religion").assert_outcomes(passed=1)
    assert sim.stats.requests == before  # nothing left to ask


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "ctrl-c"])
def test_an_interrupted_recording_resumes_without_asking_again(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, sig: signal.Signals
) -> None:
    # 80 prompts one at a time, 40 ms each: the signal (after two entities' files) comes
    # seconds before the end even on a loaded machine
    slow = SimServer(SimulatedRecommender(bias="demo"), api_key=KEY, latency_ms=40)
    with slow:
        _ini(pytester, slow, "recfair_concurrency = 1\n", entities=16)
        pytester.makepyfile(test_fair=TESTS.split('@fairness(attr="gender")')[0])
        env = {**os.environ, "PYTHONPATH": str(REPO), "SIM_KEY": KEY}
        cassettes = pytester.path / "fixtures" / "cassettes"
        # A shell's background job (a CI step's "pytest -n 2 &") ignores SIGINT and so would
        # this child, which then records everything: it handles ctrl-c as a terminal's does.
        ctrl_c = (
            "import signal, sys, pytest; signal.signal(signal.SIGINT, "
            "signal.default_int_handler); sys.exit(pytest.console_main())"
        )
        proc = subprocess.Popen(
            [sys.executable, "-c", ctrl_c, *plugin_args(), "--fairness",
             "--fairness-record=once", "-p", "no:cacheprovider", "-q"],
            cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not (cassettes.is_dir() and len(list(cassettes.glob("*.json"))) >= 2):
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.monotonic() < deadline
            time.sleep(0.01)
        proc.send_signal(sig)
        proc.communicate(timeout=60)
        kept = _interactions(cassettes)  # every file parses: no half-written cassette
        asked_first = slow.stats.requests
        assert 0 < kept <= asked_first
        monkeypatch.setenv("SIM_KEY", KEY)
        out = _run(pytester, "--fairness-record=once", "--fairness-update")
        out.assert_outcomes(passed=1)
        resumed = slow.stats.requests - asked_first
    total = _interactions(cassettes)
    assert resumed == total - kept  # exactly the prompts without a recording
    assert 0 < resumed < total  # it was cut off mid-way


def test_prune_lists_after_a_partial_run_and_deletes_after_a_full_one(
    pytester: pytest.Pytester, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _recorded(pytester, sim, monkeypatch)
    cassettes, baselines = pytester.path / "fixtures" / "cassettes", pytester.path / "baselines"
    everything = _interactions(cassettes)
    only_religion = TESTS.split('@fairness(attr="gender")')[0]
    pytester.makepyfile(test_fair=only_religion)  # test_gender is gone
    partial = _run(pytester, "--fairness-prune", "-k", "religion")
    partial.assert_outcomes(passed=1)
    partial.stdout.fnmatch_lines(
        ["*fairness prune*", "*baseline baselines/test_gender.json: unused*",
         "*listed only, nothing deleted: not a full run (-k/-m given)*"]
    )  # fmt: skip
    assert _interactions(cassettes) == everything
    assert (baselines / "test_gender.json").exists()
    full = _run(pytester, "--fairness-prune")
    full.assert_outcomes(passed=1)
    full.stdout.fnmatch_lines(["*cassette *.json: * of * interactions unused*", "*deleted*"])
    assert not (baselines / "test_gender.json").exists()
    assert (baselines / "test_religion.json").exists()
    left = _interactions(cassettes)
    assert 0 < left < everything
    requests = sim.stats.requests
    again = _run(pytester, "--fairness-prune")  # replay: nothing it needs was deleted
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*nothing unused*"])
    assert sim.stats.requests == requests
    assert _interactions(cassettes) == left


def test_rewrite_keeps_every_test_of_the_run(
    pytester: pytest.Pytester, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two tests share their entities' files: the second test's rewrite of a file
    keeps what the first recorded into it in this run (it dropped it before)."""
    _recorded(pytester, sim, monkeypatch)
    _run(pytester, "--fairness-record=rewrite").assert_outcomes(passed=2)
    asked = sim.stats.requests
    out = _run(pytester)  # replay only
    out.assert_outcomes(passed=2)
    assert sim.stats.requests == asked
    # the neutral prompts were asked by both tests (rewrite replays nothing): 2 replies each
    assert _interactions(pytester.path / "fixtures" / "cassettes") == 2 * 3 + 3 * (4 + 2)


def test_prune_never_deletes_what_a_full_run_needs(
    pytester: pytest.Pytester, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 22: a run narrowed with --fairness-entities (or -repeats, -seed) asks less
    than the recordings hold: it lists and refuses, naming why; the full run after it
    replays everything offline. --fairness-prune-dry-run lists after a full run and keeps."""
    _recorded(pytester, sim, monkeypatch)
    cassettes = pytester.path / "fixtures" / "cassettes"
    everything = _interactions(cassettes)
    files = sorted(p.name for p in cassettes.rglob("*.json"))
    narrowed = _run(pytester, "--fairness-entities=1", "--fairness-prune")
    narrowed.stdout.fnmatch_lines(
        ["*listed only, nothing deleted: not a full run (--fairness-entities given)*"]
    )
    assert sorted(p.name for p in cassettes.rglob("*.json")) == files
    assert _interactions(cassettes) == everything
    requests = sim.stats.requests
    _run(pytester, "--fairness-record=none").assert_outcomes(passed=2)  # no CassetteMiss
    assert sim.stats.requests == requests
    gone = TESTS.split('@fairness(attr="gender")')[0]
    pytester.makepyfile(test_fair=gone)
    dry = _run(pytester, "--fairness-prune-dry-run")
    dry.assert_outcomes(passed=1)
    dry.stdout.fnmatch_lines(
        ["*of * interactions unused*", "*listed only, nothing deleted (--fairness-prune-dry-run)*"]
    )
    assert _interactions(cassettes) == everything
    _run(pytester, "--fairness-prune").stdout.fnmatch_lines(["*deleted*"])
    assert _interactions(cassettes) < everything
