"""report.history: numbered, never-overwritten entries."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pytest_recfair.report.history import append_run, history_runs


def test_entries_are_numbered_in_run_order_and_unique(tmp_path: Path) -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    paths = [append_run(tmp_path, [], now=now) for _ in range(11)]
    assert len(set(paths)) == 11
    assert paths[0].name == "0001_20260102T030405Z.json"
    assert history_runs(tmp_path) == paths
    (tmp_path / "notes.txt").write_text("ignored")
    assert history_runs(tmp_path) == paths


def test_a_taken_number_is_skipped(tmp_path: Path) -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    (tmp_path / "0001_20260102T030405Z.json").write_text("{}")
    assert append_run(tmp_path, [], now=now).name == "0002_20260102T030405Z.json"
