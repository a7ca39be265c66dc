"""Each --fairness-* option, its ini equivalent, and the CLI > marker > ini precedence."""

from __future__ import annotations

import pytest

from tests.support.plugin import make_project, plugin_args

pytest_plugins = ["pytester"]


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # --fairness-update: these tests look at the numbers, not at the baseline comparison
    return pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update", *args)


def test_entities_precedence_cli_marker_ini(pytester: pytest.Pytester) -> None:
    make_project(
        pytester,
        """
        import os
        from pytest_recfair import fairness

        @fairness(attr="religion", entities=8)
        def test_marker(fairness_result):
            assert fairness_result.meta.n_entities == int(os.environ["EXPECT_MARKER"])

        @fairness(attr="religion")
        def test_ini(fairness_result):
            assert fairness_result.meta.n_entities == int(os.environ["EXPECT_INI"])
        """,
        ini="recfair_seed = 3\n",
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXPECT_MARKER", "8")  # marker beats ini (12)
        mp.setenv("EXPECT_INI", "12")
        _run(pytester).assert_outcomes(passed=2)
        mp.setenv("EXPECT_MARKER", "5")  # command line beats both
        mp.setenv("EXPECT_INI", "5")
        _run(pytester, "--fairness-entities=5").assert_outcomes(passed=2)


def test_seed_changes_subsample(pytester: pytest.Pytester) -> None:
    make_project(
        pytester,
        """
        import json, os
        from pathlib import Path
        from pytest_recfair import fairness

        @fairness(attr="religion")
        def test_seed(fairness_result, recfair_settings):
            assert fairness_result.meta.seed == recfair_settings.seed
            names = fairness_result.attribute("religion").matrix.entities
            Path(os.environ["OUT"]).write_text(json.dumps(list(names)))
        """,
    )
    runs = {}
    for seed in ("0", "7"):
        out = pytester.path / f"entities-{seed}.json"
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("OUT", str(out))
            _run(pytester, f"--fairness-seed={seed}").assert_outcomes(passed=1)
        runs[seed] = out.read_text()
    assert runs["0"] != runs["7"]


def test_repeats_adds_entropy_and_noise_floor(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECFAIR_TEST_NOISE", "0.3")
    make_project(
        pytester,
        """
        from pytest_recfair import fairness

        @fairness(attr="religion")
        def test_repeats(fairness_result):
            attr = fairness_result.attribute("religion")
            assert fairness_result.meta.repeats == 2
            assert attr.entropy is not None and attr.entropy > 0
            assert attr.noise_floor is not None and attr.noise_floor.value < 1
        """,
    )
    _run(pytester, "--fairness-repeats=2").assert_outcomes(passed=1)


def test_concurrency_limits_requests_in_flight(pytester: pytest.Pytester) -> None:
    make_project(
        pytester,
        """
        import threading, time
        import pytest
        from pytest_recfair import fairness

        state = {"now": 0, "max": 0}
        lock = threading.Lock()

        @pytest.fixture(scope="session")
        def recfair_recommender():
            def recommend(prompt):
                with lock:
                    state["now"] += 1
                    state["max"] = max(state["max"], state["now"])
                time.sleep(0.002)
                with lock:
                    state["now"] -= 1
                return [f"Film {i}" for i in range(25)]
            return recommend

        @fairness(attr="religion", entities=4)
        def test_concurrency(fairness_result, recfair_settings):
            assert recfair_settings.concurrency == 2
            assert 1 <= state["max"] <= 2
        """,
    )
    _run(pytester, "--fairness-concurrency=2").assert_outcomes(passed=1)


def test_alpha_and_ini_equivalents(pytester: pytest.Pytester) -> None:
    make_project(
        pytester,
        """
        import os
        from pytest_recfair import fairness

        @fairness(attr="religion")
        def test_settings(recfair_settings):
            assert recfair_settings.alpha == float(os.environ["EXPECT_ALPHA"])
            assert recfair_settings.repeats == 1
            assert recfair_settings.concurrency == 3
            assert recfair_settings.record_mode == "none"
        """,
        ini="recfair_alpha = 0.2\nrecfair_concurrency = 3\n",
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXPECT_ALPHA", "0.2")
        _run(pytester).assert_outcomes(passed=1)
        mp.setenv("EXPECT_ALPHA", "0.01")
        _run(pytester, "--fairness-alpha=0.01").assert_outcomes(passed=1)


def test_record_none_never_calls_network(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\nrecfair_entities = 2\nrecfair_provider = openai\n"
        "recfair_model = some-model\nrecfair_base_url = http://127.0.0.1:9/v1\n"
    )
    pytester.makepyfile(
        test_http="""
        from pytest_recfair import fairness

        @fairness(attr="religion")
        def test_http():
            pass
        """
    )
    result = pytester.runpytest(*plugin_args(), "--fairness")  # default mode: none
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*no recorded reply for test 'test_http.py::test_http'*"])
    result.stdout.fnmatch_lines(["*--fairness-record=new_episodes*"])
    result.stdout.no_fnmatch_line("*Traceback*")  # a usage problem, not a crash
    result.stdout.no_fnmatch_line("*transport.py*")
