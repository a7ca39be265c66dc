"""Every provider setting a team needs reaches the service (issue 10 point 5).

A real pytest run (pytester) records through a real HTTP provider to a loopback stub that
speaks the OpenAI / Anthropic / Gemini formats and keeps what it received; the assertions
read the requests the server got, not the client's intentions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.integration.capture_stub import Capture, capture_server
from tests.support.plugin import REPO, plugin_args

pytest_plugins = ["pytester"]

HEADER_VALUE = "team-header-value-7f3a9c"
URLS = {"openai": "/v1", "anthropic": "", "gemini": "/v1beta"}

TESTS = """
from pytest_recfair import fairness

@fairness(attr="religion")
def test_from_ini(fairness_result):
    pass

@fairness(attr="gender", temperature=0.2, max_tokens=77, system="Marker system.")
def test_from_marker(fairness_result):
    pass
"""


def _project(pytester: pytest.Pytester, cap: Capture, kind: str, extra: str = "") -> None:
    pytester.makeini(
        textwrap.dedent(
            f"""
            [pytest]
            recfair_entities = 2
            recfair_n_resamples = 50
            recfair_provider = {kind}
            recfair_model = m1
            recfair_base_url = {cap.base}{URLS[kind]}
            recfair_api_key_env = RECFAIR_TEST_KEY
            recfair_temperature = 0.7
            recfair_max_tokens = 300
            recfair_sampling_seed = 11
            recfair_system = Ini system message.
            recfair_extra_headers = X-Team: RECFAIR_TEAM_HEADER
            """
        )
        + extra
    )
    pytester.makepyfile(test_prov_cfg_audit=TESTS)


def _sampling(kind: str, body: dict[str, object]) -> tuple[object, object, object, object]:
    """(temperature, max_tokens, seed, system) as the service got them."""
    if kind == "gemini":
        config: dict[str, object] = body.get("generationConfig") or {}  # type: ignore[assignment]
        system = body["systemInstruction"]["parts"][0]["text"]  # type: ignore[index]
        return config.get("temperature"), config.get("maxOutputTokens"), config.get("seed"), system
    if kind == "anthropic":
        return body.get("temperature"), body.get("max_tokens"), body.get("seed"), body["system"]
    messages = body["messages"]
    system = next(m["content"] for m in messages if m["role"] == "system")  # type: ignore[union-attr]
    return body.get("temperature"), body.get("max_tokens"), body.get("seed"), system


@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini"])
def test_ini_and_marker_settings_reach_the_service(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setenv("RECFAIR_TEST_KEY", "sk-test-key-0123456789")
    monkeypatch.setenv("RECFAIR_TEAM_HEADER", HEADER_VALUE)
    with capture_server() as cap:
        _project(pytester, cap, kind)
        result = pytester.runpytest(
            *plugin_args(), "--fairness", "--fairness-record=once", "--fairness-update"
        )
    result.assert_outcomes(passed=2)
    by_attr: dict[bool, set[tuple[object, ...]]] = {True: set(), False: set()}
    for seen in cap.seen:
        assert seen.headers["x-team"] == HEADER_VALUE
        got = _sampling(kind, seen.body)
        by_attr[got[3] == "Marker system."].add(got)
    seed = None if kind == "anthropic" else 11  # Anthropic's API has no seed parameter
    assert by_attr[False] == {(0.7, 300, seed, "Ini system message.")}
    assert by_attr[True] == {(0.2, 77, seed, "Marker system.")}
    # the header value came from the environment and is written nowhere
    for path in pytester.path.rglob("*"):
        if path.is_file():
            assert HEADER_VALUE not in path.read_text(errors="replace"), path
    assert HEADER_VALUE not in result.stdout.str()


def test_unset_header_variable_is_a_one_line_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RECFAIR_TEAM_HEADER", raising=False)
    with capture_server() as cap:
        _project(pytester, cap, "openai")
        result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-record=once")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        ["*recfair_extra_headers: the environment variable RECFAIR_TEAM_HEADER is not set*"]
    )
    assert cap.seen == []  # nothing went out without the header
    assert "Traceback" not in result.stdout.str()


def _not_passed(result: pytest.RunResult) -> int:
    """Failed or errored tests (a run whose every prompt failed errors in its fixture)."""
    outcomes = result.parseoutcomes()
    assert "passed" not in outcomes
    return outcomes.get("failed", 0) + outcomes.get("errors", outcomes.get("error", 0))


def test_timeout_and_max_retries(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECFAIR_TEAM_HEADER", HEADER_VALUE)
    with capture_server(status=500) as cap:
        _project(pytester, cap, "openai", "recfair_max_retries = 1\n")
        pytester.makepyfile(
            test_prov_cfg_audit="""
            from pytest_recfair import fairness

            @fairness(attr="religion", timeout=5)
            def test_failing(fairness_result):
                pass
            """
        )
        result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-record=once")
    assert _not_passed(result) == 1
    prompts = {seen.body["messages"][-1]["content"] for seen in cap.seen}
    # one try + max_retries = 1 retry per prompt, exactly
    assert len(cap.seen) == 2 * len(prompts)
    result.stdout.fnmatch_lines(["*after 2 tries (1 retries)*"])

    with capture_server(delay=1.0) as slow:
        _project(pytester, slow, "openai", "recfair_max_retries = 0\nrecfair_timeout = 0.2\n")
        result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-record=once")
    assert _not_passed(result) == 2
    result.stdout.fnmatch_lines(["*no complete reply within 0.2 s*"])


HUNG = """
import threading

import pytest


@pytest.fixture(scope="session")
def recfair_recommender():
    def recommend(prompt):
        threading.Event().wait()  # never returns
    return recommend
"""


def test_hung_sync_callable_is_abandoned_and_pytest_exits(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(HUNG)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nrecfair_entities = 1\nrecfair_timeout = 1\nrecfair_n_resamples = 50\n"
    )
    (tmp_path / "test_hung.py").write_text(
        "from pytest_recfair import fairness\n\n"
        "@fairness(attr='religion')\ndef test_hung(fairness_result):\n    pass\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *plugin_args(), "--fairness", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # the hard outer limit: a hang fails here instead of blocking the suite
    )
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "1 failed" in out or "1 error" in out
    lines = [line for line in out.splitlines() if "gave no reply" in line]
    assert lines, out
    assert "within 1 s" in lines[0], out
    assert "Traceback" not in out


def test_long_replies_are_cut_with_a_note_not_stored_whole(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 10 point 7: 300 KB replies, recfair_max_reply_chars = 5000."""
    monkeypatch.setenv("RECFAIR_TEAM_HEADER", HEADER_VALUE)
    with capture_server(pad=300_000) as cap:
        _project(pytester, cap, "openai", "recfair_max_reply_chars = 5000\n")
        pytester.makepyfile(
            test_prov_cfg_audit="""
            from pytest_recfair import fairness

            @fairness(attr="religion")
            def test_long(fairness_result):
                assert fairness_result.attributes[0].values[0].n == 2
            """
        )
        args = (*plugin_args(), "--fairness", "--fairness-record=once", "--fairness-update")
        result = pytester.runpytest(*args)
        result.assert_outcomes(passed=1)
        asked = len(cap.seen)
    cassettes = list((pytester.path / "fixtures" / "cassettes").rglob("*.json"))
    assert cassettes
    assert asked > 0
    total = sum(p.stat().st_size for p in cassettes)
    # whole replies would be asked x 300 KB; cut ones are about 5 KB each
    assert total < asked * 8_000, total
    text = "".join(p.read_text() for p in cassettes)
    assert text.count("[recfair: reply cut at 5,000 of ") == asked
    # replay (offline) reads the cut replies back to the same scores
    replay = pytester.runpytest(*plugin_args(), "--fairness")
    replay.assert_outcomes(passed=1)
