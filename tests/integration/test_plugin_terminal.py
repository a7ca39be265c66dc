"""The fairness summary in a real terminal: pytest's width, names whole (issue 11.6)."""

from __future__ import annotations

import os
import re
import sys

import pytest

from tests.support.plugin import CONFTEST, REPO, plugin_args
from tests.support.pty_run import run_in_pty

pytest_plugins = ["pytester"]

LONG = "test_" + "a_rather_long_descriptive_name_" * 2 + "for_religion"
TESTS = f"""
from pytest_recfair import fairness

@fairness(attr="religion")
def {LONG}():
    pass
"""
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _summary(output: str) -> list[str]:
    lines = ANSI.sub("", output).replace("\r", "").splitlines()
    start = next(i for i, ln in enumerate(lines) if "fairness summary" in ln)
    end = next(i for i, ln in enumerate(lines) if i > start and ln.startswith("====="))
    return lines[start + 1 : end]


@pytest.mark.parametrize("columns", [80, 200])
def test_summary_follows_the_terminal_width(pytester: pytest.Pytester, columns: int) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nrecfair_entities = 6\nrecfair_n_resamples = 200\n")
    pytester.makepyfile(**{"tests/deep/deeper/test_" + "x" * 30: TESTS})
    env = {**os.environ, "PYTHONPATH": str(REPO), "RECFAIR_TEST_BIAS": "0.4"}
    argv = [sys.executable, "-m", "pytest", *plugin_args(), "--fairness", "--fairness-update"]
    code, out = run_in_pty([*argv, "-v"], cwd=pytester.path, env=env, columns=columns)
    assert code == 0, out
    summary = _summary(out)
    # wider only where a name or file path is too long to share a line: it stays whole
    too_wide = [ln for ln in summary if len(ln) > columns]
    assert all(len(ln.split()[-1]) > columns // 2 for ln in too_wide), too_wide
    text = "\n".join(summary)
    assert LONG in text  # the test's name is never cut
    assert "…" not in text
    if columns == 200:  # room enough: id with status, and each row with its favoured values
        assert any(ln.startswith("tests/deep/") and "  PASS" in ln for ln in summary)
        assert any(ln.split()[:2] == ["religion", "FLAG"] and "/" in ln for ln in summary)
        return
    # without -v: a line per test, its name whole, only the figure after it cut to fit
    code, out = run_in_pty(argv, cwd=pytester.path, env=env, columns=columns)
    assert code == 0, out
    short = _summary(out)
    (line,) = [ln for ln in short if LONG in ln and ln.startswith("PASS")]
    assert line.split()[:2] == ["PASS", LONG]
    assert len(line) <= columns or line.endswith(LONG), line
