"""Fixtures: documented in --fixtures, overridable, and fairness_result for own assertions."""

from __future__ import annotations

import pytest

from tests.support.plugin import make_project, plugin_args

pytest_plugins = ["pytester"]


def test_fixtures_have_one_line_docs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest(*plugin_args(), "--fixtures")
    result.stdout.fnmatch_lines_random(
        [
            "recfair_recommender [[]session scope[]]*",
            "*The recommender under audit; override in conftest.py*",
            "recfair_settings*",
            "*The merged, validated settings*",
            "recfair_seeds*",
            "*The seed entities of this audit*",
            "recfair_grid*",
            "*The attribute grid of this audit*",
            "recfair_cassettes*",
            "*The cassette store of this run*",
            "fairness_result*",
            "*The AuditResult of this @fairness test*",
        ]
    )


def test_fairness_result_per_value_statistics(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.6")
    make_project(
        pytester,
        """
        import math
        from pytest_recfair import fairness

        @fairness(attr="religion", metric="prag")
        def test_detail(fairness_result):
            religion = fairness_result.attribute("religion")
            assert religion.metric == "prag"
            assert religion.least_favoured == "Muslim"
            muslim = religion.value("muslim")
            others = [v for v in religion.values if v.value != "Muslim"]
            assert all(muslim.mean.value < v.mean.value for v in others)
            assert muslim.mean.ci.low <= muslim.mean.value <= muslim.mean.ci.high
            for stat in (religion.snsr, religion.snsv, religion.pafs):
                assert stat.ci is not None and stat.ci.low <= stat.ci.high
            assert religion.snsr.value > 0.3
            assert all(v.total == 12 and v.n == 12 for v in religion.values)
            assert religion.refusal_gap == 0
            assert all(v.short_rate == 0 for v in religion.values)
            assert religion.entropy is None and religion.noise_floor is None
            assert len(religion.curves["Muslim"]) == 25
        """,
    )
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update")
    result.assert_outcomes(passed=1)


def test_seeds_from_fixture_and_file(pytester: pytest.Pytester) -> None:
    make_project(
        pytester,
        """
        import pytest
        from pytest_recfair import fairness

        @pytest.fixture
        def my_directors():
            return ["Agnes Varda", "Akira Kurosawa", "Chantal Akerman"]

        @fairness(attr="gender", seeds="my_directors")
        def test_from_fixture(fairness_result):
            got = fairness_result.attribute("gender").matrix.entities
            assert len(got) == 3

        @fairness(attr="gender", seeds="seeds.txt")
        def test_from_file(fairness_result):
            assert fairness_result.meta.n_entities == 2
        """,
    )
    (pytester.path / "seeds.txt").write_text("Wong Kar-wai\nClaire Denis\n")
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update")
    result.assert_outcomes(passed=2)


def test_default_recommender_needs_configuration(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from pytest_recfair import fairness

        @fairness(attr="religion")
        def test_unconfigured():
            pass
        """
    )
    result = pytester.runpytest(*plugin_args(), "--fairness")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*no recommender configured: set the ini key recfair_model*"])


def test_fairness_result_without_marker_is_an_error(pytester: pytest.Pytester) -> None:
    make_project(pytester, "def test_unmarked(fairness_result):\n    pass\n")
    result = pytester.runpytest(*plugin_args(), "--fairness")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*requests fairness_result but has no @fairness marker*"])
