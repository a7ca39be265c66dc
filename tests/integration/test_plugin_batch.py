"""--fairness-batch end to end: pytest runs (subprocesses) against the simulator's batch
endpoints on loopback, real HTTP all the way.

Recording through the batch API must give cassettes that replay to the same audit as a
synchronous recording, report failed lines as failed prompts, and an interrupted run
(the process killed while it polls) must resume polling the submitted batch instead of
submitting another.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.sim.batch import BatchOptions
from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.support.plugin import REPO, before_summary, plugin_args, subprocess_env

pytest_plugins = ["pytester"]

TESTS = """
from pytest_recfair import fairness


@fairness(attr="religion")
def test_religion():
    pass
"""


@pytest.fixture
def server() -> Iterator[SimServer]:
    with SimServer(SimulatedRecommender(bias="demo", seed=3)) as srv:
        yield srv


def _project(pytester: pytest.Pytester, srv: SimServer, *, poll: float = 0.05) -> None:
    pytester.makeini(
        "[pytest]\n"
        "recfair_provider = openai\n"
        "recfair_model = recfair-sim-1\n"
        f"recfair_base_url = {srv.base_url}\n"
        "recfair_entities = 6\n"
        "recfair_n_resamples = 200\n"
        f"recfair_batch_poll = {poll}\n"
    )
    pytester.makepyfile(test_audit=TESTS)


def _run(pytester: pytest.Pytester, *args: str, timeout: float | None = None) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        *plugin_args(), "-p", "no:cacheprovider", *args, timeout=timeout
    )


def _results(path: Path) -> list[dict[str, Any]]:
    out = []
    for r in json.loads(path.read_text())["results"]:
        r["meta"].pop("record_mode")
        out.append(r)
    return out


def _bodies(root: Path) -> dict[str, str]:
    """Every recorded reply body, by request body (what replay matches on)."""
    out = {}
    for path in root.rglob("*.json"):
        if ".batches" in path.parts:
            continue  # a journal set aside
        for item in json.loads(path.read_text())["interactions"]:
            out[item["request"]["body"]] = item["response"]["body"]["string"]
    return out


def _submitted(journals: Path) -> bool:
    """Whether a journal names a created batch (it is first written after the upload)."""
    for path in journals.glob("*.json"):
        try:
            entries = json.loads(path.read_text())["batches"]
        except (OSError, ValueError):
            continue  # written atomically, but it may vanish between glob and read
        if any("batch_id" in e for e in entries):
            return True
    return False


def test_batch_recording_replays_like_a_synchronous_one(
    pytester: pytest.Pytester, server: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    subprocess_env(monkeypatch)
    _project(pytester, server)
    batch = _run(pytester, "--fairness", "--fairness-batch", "--fairness-update")
    batch.assert_outcomes(passed=1)
    batch.stdout.fnmatch_lines(["*batch batch_*completed*"])
    assert server.batches.created == 1
    assert server.stats.outcomes["ok"] == 0, "no synchronous request was sent"
    cassettes = pytester.path / "fixtures" / "cassettes"
    batch_bodies = _bodies(cassettes)
    assert len(batch_bodies) == 6 * 5  # 6 entities x (neutral + 4 religions)
    replay = _run(pytester, "--fairness", "--fairness-report=batch.json")
    replay.assert_outcomes(passed=1)

    for path in cassettes.rglob("*.json"):
        path.unlink()
    sync = _run(pytester, "--fairness", "--fairness-record=once")
    sync.assert_outcomes(passed=1)
    assert _bodies(cassettes) == batch_bodies
    again = _run(pytester, "--fairness", "--fairness-report=sync.json")
    again.assert_outcomes(passed=1)
    assert _results(pytester.path / "batch.json") == _results(pytester.path / "sync.json")


def test_failed_batch_lines_are_failed_prompts(
    pytester: pytest.Pytester, server: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    subprocess_env(monkeypatch)
    server.batches.options = BatchOptions(error_rate=0.2, seed=5)
    _project(pytester, server)
    result = _run(pytester, "--fairness", "--fairness-batch", "--fairness-update")
    out = result.stdout.str()
    assert "Traceback" not in out
    result.stdout.fnmatch_lines(["*batch: * of 30 prompts failed*batch batch_*HTTP 500*"])
    recorded = _bodies(pytester.path / "fixtures" / "cassettes")
    assert 0 < len(recorded) < 30, "failed lines are never recorded"
    assert all('"error"' not in body for body in recorded.values())


def test_an_interrupted_batch_run_resumes_polling(
    pytester: pytest.Pytester, server: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    subprocess_env(monkeypatch)
    server.batches.options = BatchOptions(delay_s=8.0)
    _project(pytester, server, poll=0.2)
    # killed while polling: as soon as the batch is on disk (not after a fixed time, which
    # a loaded machine may spend before the submission)
    args = ("--fairness", "--fairness-batch", "--fairness-update")
    cmd = [sys.executable, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider", *args]
    proc = subprocess.Popen(
        cmd, cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    batches = pytester.path / "fixtures" / "cassettes" / ".batches"
    deadline = time.monotonic() + 120
    while not _submitted(batches) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    journals = list(batches.glob("*.json"))
    assert len(journals) == 1, "the submitted batch is on disk"
    assert server.batches.created == 1
    batch_id = json.loads(journals[0].read_text())["batches"][0]["batch_id"]
    resumed = _run(pytester, "--fairness", "--fairness-batch", "--fairness-update")
    resumed.assert_outcomes(passed=1)
    # progress is shown, and it is the journal's batch that was polled to the end
    resumed.stdout.fnmatch_lines([f"*batch {batch_id}: completed*"])
    assert server.batches.created == 1, "resumed polling; nothing submitted twice"
    assert not journals[0].exists()


POSITIONS = """
from pytest_recfair import fairness


@fairness(attr="religion", candidates="candidates.yaml", orders=3,
          system="You pick one film from the list.")
def test_positions():
    pass
"""


def test_batch_records_what_a_candidate_position_audit_asks(
    pytester: pytest.Pytester, server: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kind that builds its prompts from candidates, with the marker's system message:
    the batch records exactly the requests the audit then replays (no miss)."""
    subprocess_env(monkeypatch)
    _project(pytester, server)
    pytester.makepyfile(test_audit=POSITIONS)
    shutil.copy(REPO / "fixtures" / "candidates" / "directors.yaml", "candidates.yaml")
    batch = _run(pytester, "--fairness", "--fairness-batch", "--fairness-update")
    batch.assert_outcomes(passed=1)
    assert server.batches.created == 1
    assert server.stats.outcomes["ok"] == 0, "no synchronous request was sent"
    bodies = _bodies(pytester.path / "fixtures" / "cassettes")
    assert len(bodies) == 6 * 5 * 3  # entities x (neutral + 4 religions) x orders
    assert all("You pick one film from the list." in body for body in bodies)
    replay = _run(pytester, "--fairness")
    replay.assert_outcomes(passed=1)


def _kill_once_submitted(pytester: pytest.Pytester, *args: str) -> None:
    cmd = [sys.executable, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider", *args]
    proc = subprocess.Popen(
        cmd, cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    batches = pytester.path / "fixtures" / "cassettes" / ".batches"
    deadline = time.monotonic() + 120
    while not _submitted(batches) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()
    proc.wait()


def test_a_smaller_run_after_an_interrupted_one_pays_nothing_twice(
    pytester: pytest.Pytester, server: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 22: --fairness-entities=2 after an interrupted full batch run used to record
    its 10 prompts, discard the other 20 answered lines and delete the journal."""
    subprocess_env(monkeypatch)
    server.batches.options = BatchOptions(delay_s=4.0)
    _project(pytester, server, poll=0.2)
    _kill_once_submitted(pytester, "--fairness", "--fairness-batch", "--fairness-update")
    assert server.batches.created == 1
    small = _run(pytester, "--fairness", "--fairness-batch", "--fairness-entities=2")
    assert "Traceback" not in small.stdout.str()
    assert server.batches.created == 1, "the interrupted batch was resumed, not paid again"
    assert len(_bodies(pytester.path / "fixtures" / "cassettes")) == 6 * 5
    full = _run(pytester, "--fairness", "--fairness-batch", "--fairness-update")
    full.assert_outcomes(passed=1)
    assert server.batches.created == 1, "every line was in the cassettes already"
    assert server.stats.outcomes["ok"] == 0


@pytest.mark.parametrize("round_", [1, 2])
def test_two_batch_shards_at_once_share_nothing_they_both_pay_for(
    round_: int, pytester: pytest.Pytester, server: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 22: two batch shards started together in one workspace used to take over
    one journal (one per test id) and pay lines twice."""
    subprocess_env(monkeypatch)
    server.batches.options = BatchOptions(delay_s=0.5, seed=round_)
    _project(pytester, server)
    base = [sys.executable, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider"]
    procs = [
        subprocess.Popen(
            [*base, "--fairness", "--fairness-batch", f"--fairness-shard={i}/2"],
            cwd=pytester.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for i in (1, 2)
    ]
    outs = [p.communicate(timeout=180)[0].decode() for p in procs]
    assert all("Traceback" not in o for o in outs), outs
    lines = [line.custom_id for b in server.batches.batches.values() for line in b.lines]
    assert len(lines) == len(set(lines)) == 6 * 5, "every line paid once"
    assert server.stats.outcomes["ok"] == 0


def _other_model(doc: dict[str, Any]) -> None:
    """The journal's lines ask another model, with the ids and key that content has."""
    from pytest_recfair.providers.batch_api import content_key, custom_id

    entry, lines = doc["batches"][0], {}
    for line in entry["lines"].values():
        line["body"] = json.dumps({**json.loads(line["body"]), "model": "other-model"})
        lines[custom_id(line["case"], line["body"].encode())] = line
    entry.update(lines=lines, custom_ids=list(lines), key=content_key(doc["owner"], lines))


JOURNAL_FAULTS = {
    "not UTF-8": lambda doc: b'{"version": 2, "owner": "\xe4"}',
    "truncated": lambda doc: json.dumps(doc).encode()[:200],
    "no custom ids": lambda doc: doc["batches"][0].pop("custom_ids"),
    "uploaded without a file id": lambda doc: [
        doc["batches"][0].update(state="uploaded"),
        *(doc["batches"][0].pop(k) for k in ("file_id", "batch_id")),
    ],
    "another model": _other_model,
}


def test_a_bad_journal_is_set_aside_in_one_line_and_the_run_records(
    pytester: pytest.Pytester, server: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33 point 3: a damaged, foreign or inconsistent journal of a real interrupted
    --fairness-batch run is renamed aside with one line saying why and what the run does
    (a new batch), never used, never a traceback; the run records every prompt."""
    subprocess_env(monkeypatch)
    server.batches.options = BatchOptions(delay_s=30.0)
    _project(pytester, server, poll=0.1)
    args = ("--fairness", "--fairness-batch", "--fairness-update")
    _kill_once_submitted(pytester, *args)
    server.batches.options = BatchOptions(delay_s=0.1)
    cassettes = pytester.path / "fixtures" / "cassettes"
    (journal,) = (cassettes / ".batches").glob("rf*.json")
    real = json.loads(journal.read_text())
    journal.unlink()
    for name, fault in JOURNAL_FAULTS.items():
        doc = json.loads(json.dumps(real))
        made = fault(doc)
        data = made if isinstance(made, bytes) else json.dumps(doc).encode()
        path = cassettes / ".batches" / f"{doc['batches'][0]['key']}.json"
        path.write_bytes(data)
        for old in cassettes.glob("*.json"):
            old.unlink()  # every prompt to record again
        created = server.batches.created
        run = _run(pytester, *args)
        out = before_summary(run.stdout.str())
        run.assert_outcomes(passed=1)
        assert "Traceback" not in out, name
        aside = [line for line in out.splitlines() if "set aside" in line]
        assert len(aside) == 1, (name, aside)
        assert f"journal {path} set aside as {path.stem}.quarantined.json" in aside[0], name
        assert "submitted in a new batch" in aside[0], name
        assert path.with_name(f"{path.stem}.quarantined.json").read_bytes() == data, name
        assert not path.exists(), name
        assert server.batches.created == created + 1, name
        assert len(_bodies(cassettes)) == 6 * 5, name
    assert server.stats.outcomes["ok"] == 0


def test_batch_shards_of_a_custom_grid_file_merge_to_the_unsharded_audit(
    pytester: pytest.Pytester, server: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33: batch shards of a test with a grid file were refused by the merge (the
    grid's path compared with its name); the merge now gives the unsharded numbers."""
    subprocess_env(monkeypatch)
    _project(pytester, server)
    (pytester.path / "grid.yaml").write_text(
        "name: tiny\nattributes:\n  - name: religion\n    values:\n"
        "      - {label: Muslim, text: Muslim}\n      - {label: Christian, text: Christian}\n"
    )
    args = ("--fairness", "-o", "recfair_grid=grid.yaml")
    for i in (1, 2):
        shard = (*args, "--fairness-batch", "--fairness-record=once", f"--fairness-shard={i}/2")
        _run(pytester, *shard).assert_outcomes(skipped=1)
    sent = server.stats.requests
    _run(pytester, *args, "--fairness-update").assert_outcomes(passed=1)  # replays them
    _run(pytester, *args, "--fairness-report=full.json").assert_outcomes(passed=1)
    merge = (*args, "--fairness-merge=fairness-shards", "--fairness-report=merged.json")
    _run(pytester, *merge).assert_outcomes(passed=1)
    assert server.stats.requests == sent  # the unsharded audit and the merge sent nothing
    assert _results(pytester.path / "merged.json") == _results(pytester.path / "full.json")
