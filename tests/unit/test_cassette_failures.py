"""The failure sidecar (cassettes/failures.py) and the default budget (engine/plan.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_recfair.cassettes import failures
from pytest_recfair.cassettes.failures import Failure, FailureLog, failure_of, request_key
from pytest_recfair.engine import plan as spend
from pytest_recfair.settings import AuditSettings


def test_the_key_ignores_the_query_port_and_json_spacing() -> None:
    body = '{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    spaced = '{"messages":[{"role":"user","content":"hi"}],"model":"m"}'
    a = request_key("POST", "https://api.example.com:443/v1/x?key=SECRET", body, 0)
    assert a == request_key("post", "https://api.example.com/v1/x", spaced, 0)
    assert a != request_key("POST", "https://api.example.com/v1/x", body, 1)  # the repeat
    assert a != request_key("POST", "https://api.example.com/v1/y", body, 0)
    assert "SECRET" not in a


@pytest.mark.parametrize(
    ("error", "status", "kind"),
    [
        ("HTTP 400 Bad Request from http://x/v1: content_filter. The service rejected", 400,
         "rejected"),
        ("gave up on case 'c' after 6 tries (5 retries) to http://x: last error: HTTP 503 "
         "Service Unavailable: busy. ", 503, "retries spent"),
        ("gave up on case 'c' after 1 tries (0 retries) to http://x: last error: timeout: no "
         "complete reply within 60 s (read timeout). ", None, "retries spent"),
        ("openai: reply has no choices", None, "unusable reply"),
    ],
)  # fmt: skip
def test_status_and_kind_come_from_the_runners_words(
    error: str, status: int | None, kind: str
) -> None:
    failure = failure_of(error, "e1")
    assert (failure.status, failure.kind, failure.entity) == (status, kind, "e1")


def test_writers_merge_on_read_and_the_latest_note_wins(tmp_path: Path) -> None:
    old = Failure("e1", 500, "retries spent", "2026-01-01T00:00:00+00:00")
    new = Failure("e1", 400, "rejected", "2026-02-01T00:00:00+00:00")
    FailureLog(tmp_path, "gw0").update([("k1", old), ("k2", old)], [])
    FailureLog(tmp_path, "gw1").update([("k1", new)], [])
    merged = FailureLog(tmp_path, "main")
    assert merged.find("k1") == new
    assert merged.find("k2") == old
    assert merged.find("k3") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_failed.gw0.jsonl", "_failed.gw1.jsonl"]


def test_an_answered_prompt_is_forgotten_and_an_empty_file_is_not_written(
    tmp_path: Path,
) -> None:
    FailureLog(tmp_path).update([], ["k1"])
    assert not list(tmp_path.iterdir())  # nothing failed, nothing written
    note = Failure("e1", 400, "rejected", "2026-01-01T00:00:00+00:00")
    FailureLog(tmp_path).update([("k1", note)], [])
    FailureLog(tmp_path).update([], ["k1"])
    assert FailureLog(tmp_path).find("k1") is None


def test_a_line_that_does_not_read_is_skipped(tmp_path: Path) -> None:
    good = {"v": 1, "key": "k1", "entity": "e", "status": 400, "kind": "rejected", "at": "x"}
    (tmp_path / "_failed.main.jsonl").write_text(
        "not json\n" + json.dumps({"key": "k2"}) + "\n" + json.dumps(good) + "\n", "utf-8"
    )
    log = FailureLog(tmp_path)
    assert log.count() == 1
    assert log.find("k1") == Failure("e", 400, "rejected", "x")


def test_the_writer_is_named_after_the_worker_and_the_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    failures.set_shard(tmp_path, "2of4")
    try:
        assert failures.log_for(tmp_path).path.name == "_failed.gw3-2of4.jsonl"
    finally:
        failures.set_shard(tmp_path, None)
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert failures.log_for(tmp_path).path.name == "_failed.main.jsonl"


def test_the_log_is_read_once_while_its_folder_is_unchanged(tmp_path: Path) -> None:
    note = Failure("e1", 400, "rejected", "2026-01-01T00:00:00+00:00")
    FailureLog(tmp_path, "gw0").update([("k1", note)], [])
    os.utime(tmp_path, ns=(10**18, 10**18))  # the folder settled long ago
    log = failures.log_for(tmp_path)
    assert log.find("k1") == note
    assert failures.log_for(tmp_path) is log  # one listing and read for every replay pass
    FailureLog(tmp_path, "gw1").update([("k2", note)], [])  # another writer's save
    assert failures.log_for(tmp_path) is not log
    assert failures.log_for(tmp_path).find("k2") == note


def test_the_message_of_a_replayed_failure_names_status_kind_and_the_way_back() -> None:
    text = Failure("e1", 400, "rejected", "2026-01-02T03:04:05+00:00").message()
    assert "HTTP 400, rejected, 2026-01-02" in text
    assert "--fairness-record=new_episodes" in text


def _settings(**values: object) -> AuditSettings:
    from pytest_recfair.settings import resolve

    return resolve(ini={k: str(v) for k, v in values.items()})


def test_the_default_budget_applies_to_a_network_recommender_only() -> None:
    plain = _settings()
    assert spend.budget_of(plain, network=True) == spend.Budget(spend.DEFAULT_MAX_REQUESTS, None)
    assert spend.budget_of(plain, network=False) == spend.Budget(None, None)
    priced = _settings(recfair_prices="2.5, 10")
    assert spend.budget_of(priced, network=True) == spend.Budget(
        spend.DEFAULT_MAX_REQUESTS,
        spend.DEFAULT_MAX_COST,
    )


def test_a_budget_the_user_sets_replaces_the_default() -> None:
    raised = _settings(recfair_max_requests=20_000)
    assert spend.budget_of(raised, network=True) == spend.Budget(20_000, None)
    cost = _settings(recfair_max_cost=60, recfair_prices="2.5, 10")
    assert spend.budget_of(cost, network=True) == spend.Budget(None, 60.0)


def test_a_prompt_another_writer_answered_is_not_failed_by_a_stale_note(tmp_path: Path) -> None:
    """issue 33 point 4: gw0's old note of k1 does not outlive gw1 answering k1 later."""
    old = Failure("e1", 500, "retries spent", "2026-01-01T00:00:00+00:00")
    FailureLog(tmp_path, "gw0").update([("k1", old), ("k2", old)], [])
    FailureLog(tmp_path, "gw1").update([], ["k1", "k3"])
    merged = FailureLog(tmp_path, "main")
    assert merged.find("k1") is None
    assert merged.find("k2") == old
    assert merged.count() == 1
