"""``python -m pytest_recfair report``, as a user runs it: one pytest run writes JSON,
Markdown and HTML; the command renders the JSON again in a fresh process, byte for byte
what the plugin wrote (issue 11 point 1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.plugin import (
    RELIGION_AND_GENDER_TESTS,
    REPO,
    make_project,
    plugin_args,
)

pytest_plugins = ["pytester"]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "pytest_recfair", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_rendering_the_stored_json_gives_the_plugins_reports(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, RELIGION_AND_GENDER_TESTS)
    args = (*plugin_args(), "--fairness")
    pytester.runpytest(*args, "--fairness-update").assert_outcomes(passed=2)
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.4")  # a new model: religion fails its gate
    reports = [f"--fairness-report=run.{ext}" for ext in ("json", "md", "html")]
    result = pytester.runpytest(*args, *reports)
    result.assert_outcomes(passed=1, failed=1)
    for to in ("md", "html"):
        done = _cli("report", "run.json", "--to", to, "-o", f"again.{to}", cwd=pytester.path)
        assert (done.returncode, done.stderr) == (0, "")
        again = (pytester.path / f"again.{to}").read_bytes()
        assert again == (pytester.path / f"run.{to}").read_bytes()
    md = (pytester.path / "run.md").read_text(encoding="utf-8")
    assert md.index("test_religion") < md.index("test_gender")  # the failure first


def test_bad_input_is_one_line_from_the_command(pytester: pytest.Pytester) -> None:
    (pytester.path / "junk.json").write_text("[1, 2", encoding="utf-8")
    done = _cli("report", "junk.json", "--to", "html", cwd=pytester.path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("error: junk.json is not JSON")
    assert done.stderr.count("\n") == 1
    done = _cli("report", "junk.json", "--to", "pdf", cwd=pytester.path)
    assert done.returncode == 2
    assert "invalid choice: 'pdf'" in done.stderr
    assert done.stderr.count("\n") == 1
