"""Output: report header, the fairness summary section and --fairness-report files."""

from __future__ import annotations

import json
import os
import re
import stat

import pytest

from pytest_recfair.gate import baselines
from tests.support.plugin import (
    RELIGION_AND_GENDER_TESTS,
    make_project,
    plugin_args,
    subprocess_env,
)

pytest_plugins = ["pytester"]

TESTS = RELIGION_AND_GENDER_TESTS


def test_header_names_seed_mode_and_baselines(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-seed=4")
    result.stdout.fnmatch_lines(
        [f"recfair *: seed=4 (--fairness-seed), record mode=none, baselines={pytester.path}*"]
    )
    result = pytester.runpytest(*plugin_args())
    result.stdout.no_fnmatch_line("recfair *: seed=*")


def test_summary_section_at_end(pytester: pytest.Pytester) -> None:
    make_project(pytester, TESTS)
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*= fairness summary =*", "*religion*", "*gender*", "*= 2 passed*"]
    )


@pytest.mark.parametrize("suffix", ["json", "md", "html"])
def test_report_file(pytester: pytest.Pytester, suffix: str) -> None:
    make_project(pytester, TESTS)
    out = pytester.path / "reports" / f"fairness.{suffix}"
    result = pytester.runpytest(
        *plugin_args(), "--fairness", "--fairness-update", f"--fairness-report={out}"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"fairness report written: {out}"])
    text = out.read_text(encoding="utf-8")
    assert "religion" in text.casefold()
    assert "gender" in text.casefold()
    if suffix == "json":
        assert json.loads(text)  # complete, parseable JSON
    if suffix == "html":
        assert text.lstrip().lower().startswith("<!doctype html")


def test_report_path_from_ini_is_relative_to_rootdir(pytester: pytest.Pytester) -> None:
    make_project(pytester, TESTS, ini="recfair_report = out/fair.md\n")
    sub = pytester.mkdir("elsewhere")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(sub)
        result = pytester.runpytest(
            *plugin_args(),
            "--fairness",
            "--fairness-update",
            f"--rootdir={pytester.path}",
            str(pytester.path),
        )
    result.assert_outcomes(passed=2)
    assert (pytester.path / "out" / "fair.md").is_file()


def test_no_report_without_audits(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    out = pytester.path / "fair.json"
    result = pytester.runpytest(*plugin_args(), "--fairness", f"--fairness-report={out}")
    result.assert_outcomes(passed=1)
    assert not out.exists()
    result.stdout.no_fnmatch_line("*fairness summary*")


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "xdist"])
def test_report_shows_the_baseline_of_a_gated_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    make_project(pytester, TESTS)
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.4")
    pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update").assert_outcomes(passed=2)
    stored = baselines.load(baselines.named_path(pytester.path / "baselines", "test_religion"))
    expected = f"{stored.attribute('religion').value('Muslim').mean.value:.3f}"

    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.48")  # a new model: Muslim moves further
    out = pytester.path / "fairness.html"
    args = (*plugin_args(), "--fairness", f"--fairness-report={out}")
    if workers:
        subprocess_env(monkeypatch)
        result = pytester.runpytest_subprocess(*args, "-n", str(workers))
    else:
        result = pytester.runpytest(*args)
    result.stdout.fnmatch_lines([f"fairness report written: {out}"])
    html = out.read_text(encoding="utf-8")
    # per-value table: value, current mean [CI], baseline mean
    row = re.search(
        r'<tr><td>Muslim</td><td class="num">(.*?)</td><td class="num">([^<]*)</td>', html
    )
    assert row is not None
    assert row.group(2) == expected
    assert not row.group(1).startswith(expected)  # the current figure is the new one
    assert f"<title>baseline {expected}</title>" in html  # the chart's baseline marker


def test_several_reports_in_one_run(pytester: pytest.Pytester) -> None:
    make_project(pytester, TESTS)
    args = ("--fairness-report=a.json", "--fairness-report=out/b.md", "--fairness-report=c.html")
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update", *args)
    result.assert_outcomes(passed=2)
    for name in ("a.json", "out/b.md", "c.html"):
        result.stdout.fnmatch_lines([f"fairness report written: {pytester.path / name}"])
        assert "religion" in (pytester.path / name).read_text(encoding="utf-8")


def test_an_ini_list_of_reports(pytester: pytest.Pytester) -> None:
    make_project(pytester, TESTS, ini="recfair_report = out/fair.md out/fair.json\n")
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update")
    result.assert_outcomes(passed=2)
    assert (pytester.path / "out" / "fair.md").is_file()
    assert (pytester.path / "out" / "fair.json").is_file()


def test_reports_respect_the_umask(pytester: pytest.Pytester) -> None:
    make_project(pytester, TESTS)
    old = os.umask(0o077)
    try:
        pytester.runpytest(
            *plugin_args(), "--fairness", "--fairness-update", "--fairness-report=r.md"
        )
    finally:
        os.umask(old)
    assert stat.S_IMODE((pytester.path / "r.md").stat().st_mode) == 0o600
    old = os.umask(0o022)
    try:
        pytester.runpytest(*plugin_args(), "--fairness", "--fairness-report=s.md")
    finally:
        os.umask(old)
    assert stat.S_IMODE((pytester.path / "s.md").stat().st_mode) == 0o644


COUNTING = """
import pytest

CALLS = []


@pytest.fixture(scope="session")
def recfair_recommender():
    def rec(prompt, system=None):
        CALLS.append(prompt)
        open("called", "a").write("x")
        return "1. A\\n2. B"

    return rec
"""


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ("--fairness-report=fair.pdf", "*must end in one of .json, .md, .html*fair.pdf*"),
        ("--fairness-report=adir.html", "*adir.html' is a directory; give a file name*"),
        ("--fairness-report=afile/r.md", "*cannot create files in*afile' (File exists)*"),
    ],
    ids=["extension", "directory", "under-a-file"],
)
def test_a_bad_report_path_is_a_usage_error_before_any_prompt(
    pytester: pytest.Pytester, arg: str, expected: str
) -> None:
    pytester.makeconftest(COUNTING)
    pytester.makeini("[pytest]\nrecfair_entities = 3\n")
    pytester.makepyfile(test_audit=TESTS)
    (pytester.path / "adir.html").mkdir()
    (pytester.path / "afile").write_text("not a directory")
    result = pytester.runpytest_subprocess(*plugin_args(), "--fairness", "--fairness-update", arg)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {expected}"])
    assert "Traceback" not in result.stderr.str()
    assert not (pytester.path / "called").exists()  # nothing was asked
