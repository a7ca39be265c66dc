"""What would be silently ignored is a usage error instead (issue 11 point 2)."""

from __future__ import annotations

import re

import pytest

from tests.support.plugin import INI, RELIGION_TEST, make_project, plugin_args

pytest_plugins = ["pytester"]

TESTS = RELIGION_TEST


def _usage_error(result: pytest.RunResult, *patterns: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {p}" for p in patterns])
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize(
    ("ini_file", "text", "near"),
    [
        ("pytest.ini", INI + "recfair_max_snrs = 0.1\n", "recfair_max_snsr"),
        (
            "tox.ini",
            INI.replace("[pytest]", "[pytest]\nrecfair_tolerence = 0.02"),
            "recfair_tolerance",
        ),
        (
            "pyproject.toml",
            '[tool.pytest.ini_options]\nrecfair_entities = "12"\nrecfair_n_resample = "200"\n',
            "recfair_n_resamples",
        ),
    ],
    ids=["pytest.ini", "tox.ini", "pyproject"],
)
def test_unknown_ini_key_names_the_nearest(
    pytester: pytest.Pytester, ini_file: str, text: str, near: str
) -> None:
    make_project(pytester, TESTS)
    (pytester.path / "tox.ini").unlink()  # makeini wrote it
    (pytester.path / ini_file).write_text(text)
    result = pytester.runpytest(*plugin_args(), "--fairness")
    _usage_error(result, f"*{ini_file}: unknown ini key*did you mean '{near}'?*")


def test_unknown_override_is_an_error_too(pytester: pytest.Pytester) -> None:
    make_project(pytester, TESTS)
    result = pytester.runpytest(*plugin_args(), "--fairness", "-o", "recfair_aplha=0.01")
    _usage_error(result, "*-o: unknown ini key 'recfair_aplha'; did you mean 'recfair_alpha'?*")


def test_known_and_foreign_keys_pass(pytester: pytest.Pytester) -> None:
    make_project(pytester, TESTS, ini="recfair_tolerance = 0.02\nxfail_strict = true\n")
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    "option",
    [
        "--fairness-update",
        "--fairness-record=once",
        "--fairness-entities=3",
        "--fairness-report=r.json",
        "--fairness-shard=1/2",
        "--fairness-alpha=0.01",
    ],
)
def test_fairness_options_need_fairness(pytester: pytest.Pytester, option: str) -> None:
    make_project(pytester, TESTS)
    result = pytester.runpytest(*plugin_args(), option)
    flag = option.split("=")[0]
    _usage_error(result, f"{flag} acts on fairness audits, which run only with --fairness*")
    assert not (pytester.path / "baselines").exists()


def test_every_fairness_option_of_help_needs_fairness(pytester: pytest.Pytester) -> None:
    """Each --fairness-* option --help lists, given alone, is refused (none slips through,
    as --fairness-prune-dry-run once did)."""
    make_project(pytester, TESTS)
    text = pytester.runpytest(*plugin_args(), "--help").stdout.str()
    flags = dict(re.findall(r"^\s+(--fairness-[a-z-]+)(=\S+)?", text, re.MULTILINE))
    values = {"=N": "=3", "=X": "=0.01", "=MODE": "=once", "=I/N": "=1/2"}
    assert "--fairness-prune-dry-run" in flags
    assert len(flags) > 15
    for flag, metavar in flags.items():
        option = flag + (values.get(metavar, "=x") if metavar else "")
        result = pytester.runpytest(*plugin_args(), option)
        _usage_error(result, f"{flag} acts on fairness audits, which run only with --fairness*")
