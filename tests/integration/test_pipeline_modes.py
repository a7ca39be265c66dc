"""A recorded Python pipeline (OpenAI SDK on recfair_http_client) under the run modes:
pytest-xdist, --fairness-shard / --fairness-merge and --fairness-prune (issue 32).

Real pytest runs (pytester subprocesses), real HTTP to the simulator on loopback.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.pipelines import (
    OFFLINE,
    OPENAI,
    TWO_TESTS,
    cassettes,
    interactions,
    make_pipeline_project,
    numbers,
    point_at,
    run,
    sim_server,
    user_prompt,
)

pytest_plugins = ["pytester"]

RECORD = ("--fairness", "--fairness-record=once", "--fairness-update")


def test_xdist_records_and_replays_a_pipeline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_pipeline_project(pytester, OPENAI)
    with sim_server() as server:
        point_at(monkeypatch, server)
        recorded = run(pytester, *RECORD, "-n", "2", "--fairness-report=rec.json")
        recorded.assert_outcomes(passed=2)
        asked = server.stats.requests
        # both workers may ask a shared neutral prompt before either saved it
        assert 28 <= asked <= 28 + 4
        prompts = [user_prompt(item) for item in interactions(pytester.path)]
        assert len(prompts) == len(set(prompts)) == 28  # each prompt stored once
        replay = run(pytester, "--fairness", "-n", "2", "--fairness-report=rep.json", *OFFLINE)
        replay.assert_outcomes(passed=2)
        assert server.stats.requests == asked
    assert numbers(pytester.path / "rep.json") == numbers(pytester.path / "rec.json")


def test_shards_record_a_pipeline_and_merge_to_the_full_audit(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two shard jobs each record their part; the merge asks nothing (the pipeline is
    not even built); a whole replay of what the shards recorded gives the merged numbers."""
    make_pipeline_project(pytester, OPENAI)
    with sim_server() as server:
        point_at(monkeypatch, server)
        for i in (1, 2):
            part = run(pytester, "--fairness", "--fairness-record=once", f"--fairness-shard={i}/2")
            part.assert_outcomes(skipped=2)
        asked = server.stats.requests
    assert 28 <= asked <= 28 + 4  # a neutral prompt may be asked by both shards
    assert len(cassettes(pytester.path)) == 4
    conftest = pytester.path / "conftest.py"
    source = conftest.read_text()
    conftest.write_text(
        source.replace(
            "    client = OpenAI(",
            "    raise RuntimeError('the merge built the pipeline')\n    client = OpenAI(",
        )
    )
    merged = run(
        pytester,
        "--fairness",
        "--fairness-merge=fairness-shards",
        "--fairness-update",
        "--fairness-report=merged.json",
        *OFFLINE,
    )
    merged.assert_outcomes(passed=2)
    assert "the merge built the pipeline" not in merged.stdout.str()
    conftest.write_text(source)
    whole = run(pytester, "--fairness", "--fairness-report=whole.json", *OFFLINE)
    whole.assert_outcomes(passed=2)  # against the merged baselines
    assert server.stats.requests == asked
    assert numbers(pytester.path / "whole.json") == numbers(pytester.path / "merged.json")


def test_prune_keeps_what_the_pipeline_replay_needs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_pipeline_project(pytester, OPENAI)
    with sim_server() as server:
        point_at(monkeypatch, server)
        run(pytester, *RECORD, "--fairness-report=rec.json").assert_outcomes(passed=2)
        asked = server.stats.requests
    everything = list(interactions(pytester.path))
    assert len(everything) == 28
    only_religion = TWO_TESTS.split('@fairness(attr="gender")')[0]
    pytester.makepyfile(test_audit=only_religion)  # test_gender is gone
    pruned = run(pytester, "--fairness", "--fairness-prune", *OFFLINE)
    pruned.assert_outcomes(passed=1)
    pruned.stdout.fnmatch_lines(["*deleted*"])
    left = [user_prompt(item) for item in interactions(pytester.path)]
    assert len(left) == 20  # the 8 gendered prompts went; religion's and the neutral stay
    assert not [p for p in left if " male " in p.lower() or "female" in p.lower()]
    assert not (pytester.path / "baselines" / "test_gender.json").exists()
    replay = run(pytester, "--fairness", "--fairness-report=rep.json", *OFFLINE)
    replay.assert_outcomes(passed=1)
    assert server.stats.requests == asked
    religion = "test_audit.py::test_religion"
    assert numbers(pytester.path / "rep.json") == {
        religion: numbers(pytester.path / "rec.json")[religion]
    }


def test_compact_cassettes_of_a_pipeline_replay_to_the_same_numbers(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cassettes compact` turns the pipeline's recordings into .json.gz; the replay reads
    them as it reads plain ones, offline, to the recording's numbers."""
    make_pipeline_project(pytester, OPENAI)
    with sim_server() as server:
        point_at(monkeypatch, server)
        run(pytester, *RECORD, "--fairness-report=rec.json").assert_outcomes(passed=2)
    folder = pytester.path / "fixtures" / "cassettes"
    done = subprocess.run(
        [sys.executable, "-m", "pytest_recfair", "cassettes", "compact", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert sorted({p.suffixes[-1] for p in folder.iterdir() if p.is_file()}) == [".gz"]
    replay = run(pytester, "--fairness", "--fairness-report=rep.json", *OFFLINE)
    replay.assert_outcomes(passed=2)
    assert numbers(pytester.path / "rep.json") == numbers(pytester.path / "rec.json")
