"""Marker arguments are validated at collection: a bad one is a usage error naming it."""

from __future__ import annotations

import pytest

from tests.support.plugin import make_project, plugin_args

pytest_plugins = ["pytester"]


@pytest.mark.parametrize(
    ("marker", "expected"),
    [
        ("max_snr=0.1", "*unknown argument(s) 'max_snr': did you mean 'max_snsr'?*"),
        ("colour=1", "*unknown argument(s) 'colour' (the * marker arguments are listed in docs*"),
        ("'religion'", "*takes keyword arguments only*Allowed arguments: attr,*"),
        ("metric='ndcg'", "*metric='ndcg' (marker): expected one of 'jaccard', 'serp', 'prag'*"),
        ("k=0", "*k=0 (marker): expected an integer >= 1*"),
        ("k='ten'", "*k='ten' (marker): expected an integer >= 1*"),
        ("max_snsr=1.5", "*max_snsr=1.5 (marker): expected a number in [[]0.0, 1.0[]]*"),
        ("variant='exact'", "*expected one of 'normalized', 'fairllm', 'langfair'*"),
        ("missing='drop'", "*missing='drop' (marker): expected one of 'zero', 'skip'*"),
        ("perturbation='swap'", "*perturbation='swap' (marker): expected 'typo'*"),
        ("repeats=True", "*repeats=True (marker): expected an integer >= 1*"),
    ],
)
def test_bad_marker_is_usage_error(pytester: pytest.Pytester, marker: str, expected: str) -> None:
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.fairness({marker})
        def test_audit():
            pass
        """
    )
    # validated with or without --fairness: a typo must not hide until the audit runs
    for args in ((), ("--fairness",)):
        result = pytester.runpytest(*plugin_args(), *args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["ERROR: @fairness on test_bad_marker_is_usage_error.py*"])
        result.stderr.fnmatch_lines([expected])


def test_bad_ini_value_is_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nrecfair_k = many\n")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.fairness(attr="religion")
        def test_audit():
            pass
        """
    )
    result = pytester.runpytest(
        *plugin_args(),
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*k='many' (ini): expected an integer >= 1*"])


def test_bad_cli_value_is_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-alpha=0.9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*alpha=0.9 (command-line): expected a number in*"])


def test_bad_record_mode_lists_choices(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest(*plugin_args(), "--fairness-record=sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*invalid choice: 'sometimes'*none*once*new_episodes*"])


def test_module_marker_is_a_default_the_function_marker_overrides(
    pytester: pytest.Pytester,
) -> None:
    make_project(
        pytester,
        """
        from pytest_recfair import fairness

        pytestmark = fairness(attr="gender", entities=4)

        @fairness(attr="religion")
        def test_override(fairness_result):
            assert [a.attribute for a in fairness_result.attributes] == ["religion"]
            assert fairness_result.meta.n_entities == 4

        def test_inherit(fairness_result):
            assert [a.attribute for a in fairness_result.attributes] == ["gender"]
        """,
    )
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update")
    result.assert_outcomes(passed=2)
