"""Errors the user fixes, said once and in one line (issue 11 point 6)."""

from __future__ import annotations

import time

import pytest

from tests.support.plugin import plugin_args, subprocess_env

pytest_plugins = ["pytester"]

TESTS = """
from pytest_recfair import fairness

@fairness(attr="religion")
def test_a():
    pass

@fairness(attr="gender")
def test_b():
    pass
"""

BROKEN_FIXTURE = """
import pytest

@pytest.fixture(scope="session")
def recfair_recommender():
    raise RuntimeError("could not load model weights from /models/x")
"""


def test_a_failing_recommender_fixture_is_shown_once(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(BROKEN_FIXTURE)
    pytester.makeini("[pytest]\nrecfair_entities = 3\n")
    pytester.makepyfile(test_x=TESTS)
    result = pytester.runpytest(*plugin_args(), "--fairness")
    result.assert_outcomes(errors=2)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "the recfair_recommender fixture raised RuntimeError: could not load model*",
            '*conftest.py", line 5, in recfair_recommender',
            "recfair_recommender failed earlier in this run (RuntimeError: *); see the first*",
        ]
    )
    errors = out.split("short test summary info")[0]  # CI=true prints the summary in full
    assert errors.count('raise RuntimeError("could not load') == 1  # its frame, once
    assert "During handling of the above exception" not in out
    assert "plugin.py" not in out  # no frames of ours


def test_a_network_block_from_another_plugin_is_one_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    subprocess_env(monkeypatch)
    monkeypatch.setenv("RECFAIR_TEST_KEY", "sk-test")
    pytester.makeini(
        "[pytest]\nrecfair_entities = 3\nrecfair_model = m\n"
        "recfair_base_url = http://127.0.0.1:9/v1\nrecfair_api_key_env = RECFAIR_TEST_KEY\n"
    )
    pytester.makepyfile(test_x=TESTS)
    started = time.monotonic()
    result = pytester.runpytest_subprocess(
        *plugin_args(),
        "--disable-socket",
        "--allow-unix-socket",
        "--fairness",
        "--fairness-record=once",
        "-W",
        "ignore::UserWarning",
    )
    assert time.monotonic() - started < 60  # no retries with backoff: no retry helps
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "ProviderError: the network is blocked in this test run: connecting to 127.0.0.1:9 "
            "raised SocketBlockedError: A test tried to use socket.socket. Allow the network*"
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert "During handling of the above exception" not in result.stdout.str()
