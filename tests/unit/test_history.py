"""report.history: numbered, never-overwritten entries, read back and plotted in HTML."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pytest_recfair.errors import DataError
from pytest_recfair.report.history import append_run, history_runs, load_history
from pytest_recfair.report.html_report import to_html
from pytest_recfair.report.markdown import to_json, to_markdown
from pytest_recfair.report.registry import render
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
        if f"<title>{attribute} · SNSR (" in body:
            (pts,) = re.findall(r'<polyline class="snsr" points="([^"]*)"', body)
            return [(float(p.split(",")[0]), float(p.split(",")[1])) for p in pts.split()]
    raise AssertionError(f"no history chart for {attribute}")


def test_load_history_reads_every_run_in_order(tmp_path: Path) -> None:
    runs = load_history(_history(tmp_path, [0.0, -0.1, None]))
    assert [r.number for r in runs] == [1, 2, 3]
    assert runs[0].when == "2026-01-02 03:04:00 UTC"
    key = ("tests/test_audit.py::test_religion", "religion · SNSR (jaccard@25)")
    assert key in runs[1].values
    assert key not in runs[2].values
    assert runs[1].values[key].value > runs[0].values[key].value


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
    html = to_html(current, None, history=runs)
    pts = _points(html, "religion")
    assert len(pts) == 3  # run 3 did not audit the religion test
    xs = [x for x, _ in pts]
    assert xs == sorted(xs)
    assert xs[2] - xs[1] > xs[1] - xs[0]  # the gap of run 3 keeps its place on the x axis
    key = ("tests/test_audit.py::test_religion", "religion · SNSR (jaccard@25)")
    snsr = [r.values[key].value for r in runs if key in r.values]
    ys = [y for _, y in pts]
    # a higher SNSR is drawn higher (smaller y), in the order of the values
    assert sorted(range(3), key=lambda i: snsr[i]) == sorted(range(3), key=lambda i: -ys[i])
    assert html.count('<circle class="run"') == 3
    assert "3 of 4 runs" in html
    assert not re.search(r"<script|https?://(?!www\.w3\.org/2000/svg)", html)


def test_no_history_no_section(tmp_path: Path) -> None:
    current = [audit(seed=3)]
    assert 'id="history"' not in to_html(current)
    assert to_html(current) == to_html(current, None, history=[])
    runs = load_history(_history(tmp_path, [0.0]))
    assert 'id="history"' in to_html(current, None, history=runs)
    # the other formats never plot
    assert render(".md", current, None, history=runs) == to_markdown(current)


def test_names_in_the_plot_are_escaped(tmp_path: Path) -> None:
    weird = audit(seed=0, test_id="tests/t.py::test_x[<b>]")
    append_run(tmp_path, [weird])
    html = to_html([weird], None, history=load_history(tmp_path))
    section = html[html.index('id="history"') :]
    assert "<b>" not in section
    assert "&lt;b&gt;" in section


# --- where a run came from, naming an entry, the x axis (issue 25 point 7) -------------------


def _git_repo(path: Path) -> str:
    """A git repository with one commit in ``path``; its commit id."""
    import subprocess

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=path,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    git("init", "-q", "-b", "trunk")
    (path / "f.txt").write_text("x")
    git("add", "f.txt")
    git("commit", "-q", "-m", "one")
    return git("rev-parse", "HEAD")


def test_an_entry_records_commit_branch_date_machine_and_settings(tmp_path: Path) -> None:
    import json
    import platform

    from pytest_recfair.settings import AuditSettings

    repo = tmp_path / "repo"
    repo.mkdir()
    sha = _git_repo(repo)
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    path = append_run(
        tmp_path / "h", [audit()], now=now, settings=AuditSettings(k=10), cwd=repo, env={}
    )
    entry = json.loads(path.read_text(encoding="utf-8"))["entry"]
    assert (entry["commit"], entry["branch"]) == (sha, "trunk")
    assert entry["date"] == "2026-01-02T03:04:05+00:00"
    assert entry["machine"]["python"] == platform.python_version()
    assert entry["machine"]["hostname"]
    assert entry["settings"] == {"k": 10}  # what differs from the defaults
    (run,) = load_history(tmp_path / "h")
    assert (run.commit, run.branch, run.day) == (sha, "trunk", "2026-01-02")


def test_ci_variables_win_and_no_git_is_null_never_an_error(tmp_path: Path) -> None:
    from pytest_recfair.report.history import git_info

    ci = {"GITHUB_SHA": "abc123" * 6 + "abcd", "GITHUB_REF_NAME": "main"}
    assert git_info(tmp_path, ci) == {"commit": ci["GITHUB_SHA"], "branch": "main"}
    gitlab = {"CI_COMMIT_SHA": "f00d" * 10}
    assert git_info(tmp_path, gitlab) == {"commit": "f00d" * 10, "branch": None}
    # tmp_path is no git repository: both unknown
    assert git_info(tmp_path, {}) == {"commit": None, "branch": None}
    path = append_run(tmp_path / "h", [audit()], cwd=tmp_path, env={"PATH": ""})
    assert load_history(tmp_path / "h")[0].commit is None
    assert path.exists()


def test_an_older_entry_without_the_fields_still_loads(tmp_path: Path) -> None:
    hist = tmp_path / "h"
    hist.mkdir()
    (hist / "0001_20250101T000000Z.json").write_text(to_json([audit()]), encoding="utf-8")
    (run,) = load_history(hist)
    assert (run.commit, run.branch, run.day) == (None, None, "2025-01-01")


def test_an_entry_is_found_by_number_latest_count_or_commit(tmp_path: Path) -> None:
    from pytest_recfair.report.history import find_entry

    hist = tmp_path / "h"
    shas = ["aaaa1111" + "0" * 32, "bbbb2222" + "0" * 32, "aaaa1111" + "0" * 32]
    paths = [append_run(hist, [audit()], env={"GITHUB_SHA": s}) for s in shas]
    assert find_entry(hist, "latest") == paths[2]
    assert find_entry(hist, "-1") == paths[2]
    assert find_entry(hist, "-3") == paths[0]
    assert find_entry(hist, "2") == paths[1]
    assert find_entry(hist, "bbbb") == paths[1]
    assert find_entry(hist, "AAAA1111") == paths[2]  # the latest run of that commit
    for bad, said in (("-4", "give -1 to -3"), ("9", "no such entry"), ("cafe", "commit prefix")):
        with pytest.raises(DataError, match=said):
            find_entry(hist, bad)
    with pytest.raises(DataError, match="holds no entry"):
        find_entry(tmp_path / "empty", "latest")


def test_the_x_axis_is_labelled_by_date_and_commit(tmp_path: Path) -> None:
    hist = tmp_path / "h"
    append_run(hist, [audit()], now=datetime(2026, 3, 1, tzinfo=UTC), env={}, cwd=tmp_path)
    ci = {"GITHUB_SHA": "c0ffee" * 7}
    append_run(hist, [audit()], now=datetime(2026, 3, 2, tzinfo=UTC), env=ci)
    html = to_html([audit()], history=load_history(hist))
    labels = re.findall(r'<text class="xlabel"[^>]*>(.*?)</text>', html)
    assert labels[:2] == ["2026-03-01", '2026-03-02<tspan x="720.0" dy="12">c0ffeec</tspan>']
    assert ">#1<" not in html
    # two runs of one date and commit: each is told apart by its number
    append_run(hist, [audit()], now=datetime(2026, 3, 2, 5, tzinfo=UTC), env=ci)
    labels = re.findall(
        r'<text class="xlabel"[^>]*>(.*?)</text>', to_html([audit()], history=load_history(hist))
    )
    assert labels[1].endswith('dy="12">#2</tspan>')
    assert labels[2].endswith('dy="12">#3</tspan>')
    assert len(set(labels)) == len(labels)


def test_the_entry_is_read_from_its_line_or_from_the_whole_file(tmp_path: Path) -> None:
    import json

    from pytest_recfair.report.history import entry_of

    path = append_run(tmp_path / "h", [audit()], env={"GITHUB_SHA": "5" * 40})
    assert entry_of(path) == json.loads(path.read_text(encoding="utf-8"))["entry"]
    # the same object elsewhere in the file (a report re-indented by hand): still found
    doc = json.loads(path.read_text(encoding="utf-8"))
    (tmp_path / "pretty.json").write_text(json.dumps(doc, indent=2, sort_keys=True))
    assert entry_of(tmp_path / "pretty.json") == doc["entry"]
    (tmp_path / "plain.json").write_text(to_json([audit()]), encoding="utf-8")
    assert entry_of(tmp_path / "plain.json") == {}
    (tmp_path / "broken.json").write_text('{\n"entry": {oops},\n')
    assert entry_of(tmp_path / "broken.json") == {}


@pytest.mark.parametrize("n", [1, 2, 8, 9, 17, 40])
def test_x_labels_are_at_most_eight_and_never_crowd_the_last(tmp_path: Path, n: int) -> None:
    import itertools

    from pytest_recfair.report import history
    from pytest_recfair.report.history import HistoryRun

    runs = [HistoryRun(i + 1, "2026-01-02 03:04:05 UTC", {}) for i in range(n)]
    svg = "".join(history._axes(n, 0.05, runs, "SNSR"))
    xs = [float(x) for x in re.findall(r'<text class="xlabel" x="([0-9.]+)"', svg)]
    assert len(xs) == n if n <= 8 else 5 <= len(xs) <= 8
    assert xs[-1] == history._x(n - 1, n)  # the latest run is labelled
    assert xs[-1] + 35 <= history._W  # and whole: half a date (~60 px) fits right of it
    gaps = [b - a for a, b in itertools.pairwise(xs)]
    assert all(g >= 70 for g in gaps)  # a date is ~60 px wide at 11 px
