"""A persona in the recommender's own prompt (``role=``, issue 20 point 4): a list-overlap
audit run "as a sommelier" sends ``You are a sommelier.`` ahead of its system message to
a real loopback server, says so in its run line and JSON metadata, and is gated against
the neutral audit's baseline when it names it (the persona-vs-neutral comparison), with a
note that the role changed."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.integration.capture_stub import capture_server
from tests.support.plugin import plugin_args

pytest_plugins = ["pytester"]

TESTS = """
from pytest_recfair import fairness

@fairness(attr="religion", role="sommelier")
def test_sommelier(fairness_result):
    pass

@fairness(attr="religion", role="  art   historian ", system="Recommend films.")
def test_historian(fairness_result):
    pass

@fairness(attr="religion")
def test_neutral(fairness_result):
    pass
"""


def _project(pytester: pytest.Pytester, base: str) -> None:
    pytester.makeini(
        textwrap.dedent(
            f"""
            [pytest]
            recfair_entities = 2
            recfair_n_resamples = 50
            recfair_provider = openai
            recfair_model = m1
            recfair_base_url = {base}/v1
            """
        )
    )
    pytester.makepyfile(test_persona=TESTS)


def test_the_role_opens_the_system_message_and_is_reported(pytester: pytest.Pytester) -> None:
    with capture_server() as cap:
        _project(pytester, cap.base)
        result = pytester.runpytest(
            *plugin_args(), "--fairness", "--fairness-record=once", "--fairness-update",
            "--fairness-report=r.json", "-v",
        )  # fmt: skip
        systems = {
            next((m["content"] for m in s.body["messages"] if m["role"] == "system"), None)  # type: ignore[index,union-attr]
            for s in cap.seen
        }
    result.assert_outcomes(passed=3)
    personas = ("You are a sommelier.", "You are an art historian.")
    neutral = {s for s in systems if not (s or "").startswith(personas)}
    assert len(neutral) == 1  # the templates' own system message (or none)
    (plain,) = neutral
    assert "You are a sommelier." + (f" {plain}" if plain else "") in systems
    assert "You are an art historian. Recommend films." in systems
    assert len(systems) == 3
    results = json.loads((pytester.path / "r.json").read_text())["results"]
    roles = {r["meta"]["test_id"].split("::")[1]: r["meta"]["role"] for r in results}
    assert roles == {
        "test_sommelier": "sommelier",
        "test_historian": "art   historian",  # as given, stripped
        "test_neutral": None,
    }
    result.stdout.fnmatch_lines(["*role 'sommelier'*"])  # the -v run line


def test_a_persona_is_gated_against_the_neutral_baseline(pytester: pytest.Pytester) -> None:
    """The persona-vs-neutral comparison: the persona audit reads the neutral audit's
    baseline (``baseline=`` names it) and the drift test compares them paired by entity,
    with a note that the role changed."""
    with capture_server() as cap:
        _project(pytester, cap.base)
        pytester.makepyfile(
            test_persona="""
from pytest_recfair import fairness

@fairness(attr="religion", baseline="neutral-religion")
def test_neutral(fairness_result):
    pass

@fairness(attr="religion", role="sommelier", baseline="neutral-religion")
def test_sommelier(fairness_result):
    pass
"""
        )
        args = (*plugin_args(), "--fairness", "--fairness-record=once")
        neutral, persona = "test_persona.py::test_neutral", "test_persona.py::test_sommelier"
        pytester.runpytest(*args, "--fairness-update", neutral).assert_outcomes(passed=1)
        result = pytester.runpytest(*args, persona, "--fairness-report=r.json")
    result.assert_outcomes(passed=1)  # the stub answers both alike: no drift
    result.stdout.fnmatch_lines(["*note: role changed: neutral -> sommelier*"])
    (res,) = json.loads((pytester.path / "r.json").read_text())["results"]
    assert res["meta"]["role"] == "sommelier"
    assert res["gate"]["drift"], "the persona was not compared with the neutral baseline"
