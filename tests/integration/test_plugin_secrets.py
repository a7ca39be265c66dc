"""Secrets never leave the process (issue 10 point 3), end to end over loopback HTTP.

One API key is planted in every place a careless client could pick it up, through all
three HTTP providers (OpenAI, Anthropic and Gemini wire formats; stub servers on loopback
that echo the key back): the auth header each provider sends, a cookie and a custom
header from ``extra_headers``, the reply's ``model`` field, response headers and cookies,
the reply text, error bodies quoting the key and the full URL of the request (retried
500s, and prompts that fail to the end so their errors reach the messages). Then every
file the run wrote (cassettes, baselines, JUnit XML, JSON/Markdown/HTML reports) and the
captured terminal output are searched: the key appears nowhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import httpcore  # noqa: F401  (kept across pytester's in-process runs)
import pytest

from tests.integration import llm_stubs
from tests.support.plugin import plugin_args

pytest_plugins = ["pytester"]

# Looks like no published key format, so only the registered value can catch it.
KEY = "PlantedKey-7f3a9c1e5b2d4f60a8c7e1"
ENV = "RECFAIR_PLANTED_KEY"

_CONFTEST = """
import pytest

from pytest_recfair import providers

URLS = {urls!r}
ROUTES = {{"openai": "/v1", "anthropic": "", "gemini": "/v1beta"}}


@pytest.fixture
def recfair_recommender(request):
    server, kind = request.node.name.split("_")[1:3]
    return providers.from_config(
        kind, model="stub-model", base_url=URLS[server] + ROUTES[kind], api_key_env="{env}"
    )
"""

_TESTS = """
from pytest_recfair import fairness

HEADERS = "Cookie: {env}, X-Team-Token: {env}"


@fairness(attr="religion", extra_headers=HEADERS, max_failed=0.5)
def test_leaky_openai(fairness_result):
    pass


@fairness(attr="religion", extra_headers=HEADERS, max_failed=0.5)
def test_leaky_anthropic(fairness_result):
    pass


@fairness(attr="religion", extra_headers=HEADERS, max_failed=0.5)
def test_leaky_gemini(fairness_result):
    pass


@fairness(attr="religion", extra_headers=HEADERS)
def test_dead_openai(fairness_result):
    pass


@fairness(attr="religion", extra_headers=HEADERS)
def test_dead_gemini(fairness_result):
    pass
"""


@pytest.fixture
def stubs() -> Iterator[dict[str, str]]:
    """A leaky stub (every 3rd prompt fails its first try, every 7th fails to the end)
    and a dead one (every prompt fails to the end), both echoing the key they get."""
    servers = {
        "leaky": llm_stubs.serve(0, leak=True, fail_every=3, dead_every=7),
        "dead": llm_stubs.serve(0, leak=True, dead_every=1),
    }
    try:
        yield {name: f"http://127.0.0.1:{s.server_port}" for name, s in servers.items()}
    finally:
        for s in servers.values():
            s.shutdown()
            s.server_close()


def _forms(key: str) -> set[str]:
    return {key, quote(key, safe=""), key[4:-4]}  # a cut-down copy counts as a leak too


def test_a_planted_key_reaches_no_file_and_no_terminal_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, stubs: dict[str, str]
) -> None:
    monkeypatch.setenv(ENV, KEY)
    pytester.makeini(
        "[pytest]\nrecfair_entities = 3\nrecfair_n_resamples = 50\nrecfair_concurrency = 32\n"
    )
    pytester.makeconftest(_CONFTEST.format(urls=stubs, env=ENV))
    pytester.makepyfile(test_leak=_TESTS.format(env=ENV))
    report = pytester.path / "out" / "fairness"
    run = pytester.runpytest(
        *plugin_args(),
        "--fairness",
        "--fairness-record=once",
        "--fairness-update",
        "-rA",
        f"--junitxml={pytester.path / 'out' / 'junit.xml'}",
        *(f"--fairness-report={report}.{ext}" for ext in ("json", "md", "html")),
    )
    out = run.stdout.str() + run.stderr.str()
    # the run did meet the key: three audits recorded, two failed on the echoing errors
    run.assert_outcomes(passed=3, errors=2)
    assert "got no valid response" in out
    written = [p for p in pytester.path.rglob("*") if p.is_file() and "conftest" not in p.name]
    kinds = {p.suffix for p in written}
    assert {".json", ".md", ".html", ".xml"} <= kinds
    assert any("cassettes" in p.parts for p in written)
    assert any("baselines" in p.parts for p in written)
    leaks = [
        (str(p.relative_to(pytester.path)), form)
        for p in written
        for form in _forms(KEY)
        if form in p.read_text(encoding="utf-8", errors="replace")
    ]
    leaks += [("terminal", form) for form in _forms(KEY) if form in out]
    assert leaks == [], leaks


def test_a_planted_key_reaches_no_debug_log(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, stubs: dict[str, str]
) -> None:
    """The same leaky run with DEBUG logging to a file and into the reports: httpcore logs
    the reply headers the stubs echo the key in; the log holds no form of it."""
    monkeypatch.setenv(ENV, KEY)
    pytester.makeini(
        "[pytest]\nrecfair_entities = 3\nrecfair_n_resamples = 50\nrecfair_concurrency = 32\n"
    )
    pytester.makeconftest(_CONFTEST.format(urls=stubs, env=ENV))
    pytester.makepyfile(test_leak=_TESTS.format(env=ENV))
    log = pytester.path / "out" / "debug.log"
    run = pytester.runpytest(
        *plugin_args(),
        "--fairness",
        "--fairness-record=once",
        "--fairness-update",
        "-rA",
        "-k",
        "leaky",
        "--log-level=DEBUG",
        f"--log-file={log}",
        "--log-file-level=DEBUG",
    )
    run.assert_outcomes(passed=3)
    text = log.read_text(encoding="utf-8")
    assert "receive_response_headers.complete" in text  # httpcore did log reply headers
    out = run.stdout.str() + run.stderr.str()
    leaks = [("debug.log", f) for f in _forms(KEY) if f in text]
    leaks += [("terminal", f) for f in _forms(KEY) if f in out]
    assert leaks == [], leaks
