"""report.history: numbered, never-overwritten entries, read back and plotted in HTML."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pytest_recfair import report
from pytest_recfair.errors import DataError
from pytest_recfair.report.history import append_run, history_runs, load_history
from tests.support.synth_results import audit


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


# --- reading the history back, and its plot (issue 11 point 5) -------------------------------


def _history(tmp_path: Path, biases: list[float | None]) -> Path:
    """One stored run per bias on religion = Islamic; None: a run without that test."""
    for i, bias in enumerate(biases):
        other = audit(seed=i, test_id="tests/test_audit.py::test_other")
        main = audit(seed=i, bias={"Islamic": bias}) if bias is not None else None
        results = [r for r in (main, other) if r is not None]
        append_run(tmp_path, results, now=datetime(2026, 1, 2, 3, 4, i, tzinfo=UTC))
    return tmp_path


def _points(html: str, attribute: str) -> list[tuple[float, float]]:
    for body in re.findall(r'<svg id="history-[^"]+"(.*?)</svg>', html, re.S):
        if f"<title>{attribute}: SNSR over" in body:
            (pts,) = re.findall(r'<polyline class="snsr" points="([^"]*)"', body)
            return [(float(p.split(",")[0]), float(p.split(",")[1])) for p in pts.split()]
    raise AssertionError(f"no history chart for {attribute}")


def test_load_history_reads_every_run_in_order(tmp_path: Path) -> None:
    runs = load_history(_history(tmp_path, [0.0, -0.1, None]))
    assert [r.number for r in runs] == [1, 2, 3]
    assert runs[0].when == "2026-01-02 03:04:00 UTC"
    key = ("tests/test_audit.py::test_religion", "religion", "jaccard")
    assert key in runs[1].snsr
    assert key not in runs[2].snsr
    assert runs[1].snsr[key].value > runs[0].snsr[key].value


def test_a_run_still_being_written_is_left_out_and_a_broken_one_named(tmp_path: Path) -> None:
    _history(tmp_path, [0.0])
    (tmp_path / "0002_20260102T030500Z.json").write_bytes(b"")  # reserved, not yet filled
    assert [r.number for r in load_history(tmp_path)] == [1]
    (tmp_path / "0003_20260102T030600Z.json").write_text("{", encoding="utf-8")
    with pytest.raises(DataError, match=r"0003_20260102T030600Z\.json is not JSON"):
        load_history(tmp_path)
    with pytest.raises(DataError, match="is not a directory"):
        load_history(tmp_path / "missing")


def test_the_plot_has_one_point_per_run_that_audited_the_attribute(tmp_path: Path) -> None:
    runs = load_history(_history(tmp_path, [0.0, -0.05, None, -0.15]))
    current = [audit(seed=3, bias={"Islamic": -0.15})]
    html = report.to_html(current, None, history=runs)
    pts = _points(html, "religion")
    assert len(pts) == 3  # run 3 did not audit the religion test
    xs = [x for x, _ in pts]
    assert xs == sorted(xs)
    assert xs[2] - xs[1] > xs[1] - xs[0]  # the gap of run 3 keeps its place on the x axis
    key = ("tests/test_audit.py::test_religion", "religion", "jaccard")
    snsr = [r.snsr[key].value for r in runs if key in r.snsr]
    ys = [y for _, y in pts]
    # a higher SNSR is drawn higher (smaller y), in the order of the values
    assert sorted(range(3), key=lambda i: snsr[i]) == sorted(range(3), key=lambda i: -ys[i])
    assert html.count('<circle class="run"') == 3
    assert "3 of 4 runs" in html
    assert not re.search(r"<script|https?://(?!www\.w3\.org/2000/svg)", html)


def test_no_history_no_section(tmp_path: Path) -> None:
    current = [audit(seed=3)]
    assert 'id="history"' not in report.to_html(current)
    assert report.to_html(current) == report.to_html(current, None, history=[])
    runs = load_history(_history(tmp_path, [0.0]))
    assert 'id="history"' in report.to_html(current, None, history=runs)
    # the other formats never plot
    assert report.render(".md", current, None, history=runs) == report.to_markdown(current)


def test_names_in_the_plot_are_escaped(tmp_path: Path) -> None:
    weird = audit(seed=0, test_id="tests/t.py::test_x[<b>]")
    append_run(tmp_path, [weird])
    html = report.to_html([weird], None, history=load_history(tmp_path))
    section = html[html.index('id="history"') :]
    assert "<b>" not in section
    assert "&lt;b&gt;" in section
