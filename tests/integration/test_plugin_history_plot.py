"""The HTML report plots SNSR over --fairness-history (issue 11 point 5): three pytest runs
of a model drifting away from fairness, each writing its HTML report; the last one,
opened in headless Chromium, holds one line per test × attribute with one point per run,
rising with the planted bias. ``python -m pytest_recfair report --history`` renders the
same page from the stored JSON."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_recfair.report.history import load_history
from tests.integration.test_html_report import _chromium, _run
from tests.support.plugin import RELIGION_AND_GENDER_TESTS, REPO, make_project, plugin_args

pytest_plugins = ["pytester"]

BIASES = ("0", "0.15", "0.4")  # the religion bias of each run: SNSR rises run by run


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_project(pytester, RELIGION_AND_GENDER_TESTS)
    monkeypatch.setenv("RECFAIR_TEST_NOISE", "0.05")
    args = (*plugin_args(), "--fairness", "--fairness-history=hist")
    reports = ("--fairness-report=run.json", "--fairness-report=run.html")
    pytester.runpytest(*args, "--fairness-update").assert_outcomes(passed=2)
    for bias in BIASES[1:]:
        monkeypatch.setenv("RECFAIR_TEST_BIAS", bias)
        result = pytester.runpytest(*args, *reports)
        assert result.ret in (0, 1)
    return pytester.path


def _polylines(html: str) -> dict[str, list[list[float]]]:
    """The points of each history chart's line, by the attribute its title names."""
    out = {}
    for body in re.findall(r'<svg id="history-[^"]+"(.*?)</svg>', html, re.S):
        (name,) = re.findall(r"<title>([^<]+) · SNSR \(", body)
        (points,) = re.findall(r'<polyline class="snsr" points="([^"]*)"', body)
        out[name] = [[float(c) for c in p.split(",")] for p in points.split()]
    return out


def test_the_last_report_plots_every_run(project: Path, tmp_path: Path) -> None:
    runs = load_history(project / "hist")
    assert len(runs) == len(BIASES)
    page = project / "run.html"
    done = _run(_chromium(), tmp_path, "--dump-dom", page.as_uri())
    dom = done.stdout
    assert "<svg" in dom, f"no DOM dumped; chromium said:\n{done.stderr[-2000:]}"
    lines = _polylines(dom)
    assert sorted(lines) == ["gender", "religion"]
    for points in lines.values():
        assert len(points) == len(BIASES)  # one point per stored run
        xs = [x for x, _ in points]
        assert xs == sorted(xs)
        assert len(set(xs)) == len(xs)
    assert len(re.findall(r'<circle class="run"', dom)) == 2 * len(BIASES)
    # religion's SNSR rises with the bias: its points climb (SVG y grows downwards)
    ys = [y for _, y in lines["religion"]]
    assert ys[0] > ys[1] > ys[2]
    key = next(k for k in runs[-1].values if k[1].startswith("religion · SNSR"))
    assert [r.values[key].value for r in runs] == sorted(r.values[key].value for r in runs)


def test_the_command_renders_the_same_page(project: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_recfair",
            "report",
            "run.json",
            "--to",
            "html",
            "--history",
            "hist",
            "-o",
            "again.html",
        ],
        cwd=project,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert (project / "again.html").read_bytes() == (project / "run.html").read_bytes()
