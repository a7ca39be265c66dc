"""Without --fairness, marked tests are skipped; the marker is importable two ways."""

from __future__ import annotations

import pytest

from tests.support.plugin import plugin_args

pytest_plugins = ["pytester"]


def test_marked_tests_skip_without_flag(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        from pytest_recfair import fairness

        @pytest.mark.fairness(attr="religion")
        def test_by_mark():
            raise AssertionError("must not run")

        @fairness(attr="Religion", max_snsr=0.10)
        def test_by_import():
            raise AssertionError("must not run")

        def test_plain():
            pass
        """
    )
    result = pytester.runpytest(*plugin_args(), "-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*SKIPPED*fairness audit: run with --fairness*"])
    result.stdout.no_fnmatch_line("*fairness summary*")


def test_imported_marker_is_pytest_mark() -> None:
    from pytest_recfair import fairness

    assert fairness.name == "fairness"
    assert fairness is pytest.mark.fairness or fairness.mark == pytest.mark.fairness.mark


def test_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*plugin_args(), "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.fairness(**kwargs): a fairness audit*"])


def test_options_are_listed_in_help(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*plugin_args(), "--help")
    result.stdout.fnmatch_lines(
        [
            "*--fairness *run the tests marked*",
            "*--fairness-record=MODE*",
            "*--fairness-update*",
            "*--fairness-report=PATH*",
            "*--fairness-entities=N*",
            "*--fairness-repeats=N*",
            "*--fairness-concurrency=N*",
            "*--fairness-seed=N*",
            "*--fairness-alpha=X*",
            "*recfair_record_mode*",
        ]
    )
