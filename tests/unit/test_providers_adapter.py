"""The callable adapter and the progress line."""

from __future__ import annotations

import asyncio
import io
import re
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_recfair.errors import ConfigError, ProviderError
from pytest_recfair.providers import CallableProvider, run_cases
from pytest_recfair.providers.adapter import numbered
from pytest_recfair.providers.base import Completion
from pytest_recfair.providers.runstate import Progress
from pytest_recfair.replies import parse
from tests.support.cases import Case


def _case(case_id: str, prompt: str) -> Case:
    return Case(case_id, prompt, "e", system="You recommend movies.")


CASES = [_case(f"c{i}", f"movies like number {i}") for i in range(6)]


def test_sync_callable_returning_text() -> None:
    outcome = run_cases(lambda prompt: f"1. {prompt}", CASES, progress=False)
    assert outcome.errors == {}
    assert outcome.completions["c3"].text == "1. movies like number 3"
    assert outcome.usage.total_tokens == 0
    assert outcome.unknown_usage == len(CASES)


def test_list_reply_becomes_a_numbered_list() -> None:
    def recommend(prompt: str) -> list[str]:
        return ["Heat", "  Alien\n(1979) ", prompt[-1]]

    outcome = run_cases(recommend, CASES[:2])
    assert outcome.completions["c1"].text == "1. Heat\n2. Alien (1979)\n3. 1"
    assert numbered([]) == ""


def test_async_callable_and_concurrency_bound() -> None:
    state = {"now": 0, "max": 0}

    async def recommend(prompt: str) -> str:
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0.005)
        state["now"] -= 1
        return prompt.upper()

    cases = [_case(f"c{i}", f"p{i}") for i in range(20)]
    outcome = run_cases(recommend, cases, concurrency=3)
    assert outcome.completions["c7"].text == "P7"
    assert state["max"] == 3


def test_sync_callables_run_in_threads_within_the_bound() -> None:
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def recommend(prompt: str) -> str:
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.01)
        with lock:
            state["now"] -= 1
        return prompt

    run_cases(recommend, [_case(f"c{i}", "p") for i in range(12)], concurrency=4)
    assert 1 < state["max"] <= 4


def test_two_argument_form_receives_the_system_prompt() -> None:
    class Recommender:
        def __call__(self, prompt: str, system: str | None = None) -> str:
            return f"{system} | {prompt}"

    outcome = run_cases(CallableProvider(Recommender()), CASES[:1])
    assert outcome.completions["c0"].text == "You recommend movies. | movies like number 0"


def test_optional_second_argument_not_named_system_is_left_alone() -> None:
    def recommend(prompt: str, k: int = 3) -> list[str]:
        return [prompt] * k

    assert CallableProvider(recommend)(None, "x").text == "1. x\n2. x\n3. x"


def test_callable_failures_are_collected_per_case() -> None:
    def recommend(prompt: str) -> object:
        if prompt.endswith("1"):
            raise RuntimeError("model crashed")
        if prompt.endswith("2"):
            return 42
        return "ok"

    outcome = run_cases(recommend, CASES[:3])
    assert outcome.completions["c0"].text == "ok"
    assert "RuntimeError: model crashed" in outcome.errors["c1"]
    assert "returned int" in outcome.errors["c2"]
    assert "list of str" in outcome.errors["c2"]


def test_slow_async_callable_times_out_per_case() -> None:
    async def recommend(prompt: str) -> str:
        await asyncio.sleep(5 if prompt.endswith("0") else 0)
        return "ok"

    outcome = run_cases(recommend, CASES[:2], timeout=0.05)
    assert "within 0.05 s" in outcome.errors["c0"]
    assert outcome.completions["c1"].text == "ok"


def test_completion_passthrough_and_direct_call() -> None:
    done = Completion("1. A", "length")
    provider = CallableProvider(lambda prompt: done, model="my-model")
    assert provider(None, "p") is done
    assert provider.name == "callable"
    assert provider.model == "my-model"
    assert provider.secrets == ()


def test_async_callable_can_be_called_directly() -> None:
    async def recommend(prompt: str) -> list[str]:
        return [prompt]

    assert CallableProvider(recommend)(None, "Heat").text == "1. Heat"


@pytest.mark.parametrize("bad", [42, lambda: "x", lambda a, b, c: "x"])
def test_bad_recommenders_are_config_errors(bad: object) -> None:
    with pytest.raises(ConfigError, match="recommender:"):
        CallableProvider(bad)  # type: ignore[arg-type]


def test_bad_reply_error_is_a_provider_error() -> None:
    with pytest.raises(ProviderError, match="returned NoneType"):
        CallableProvider(lambda prompt: None)(None, "p")


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_quiet_when_not_a_terminal() -> None:
    stream = io.StringIO()
    run_cases(lambda p: "x", CASES, progress=None, progress_stream=stream)
    assert stream.getvalue() == ""


def test_progress_draws_on_a_terminal() -> None:
    stream = FakeTTY()
    run_cases(lambda p: "x", CASES, progress=None, progress_stream=stream)
    final = stream.getvalue().rstrip("\n").split("\r")[-1]
    assert re.search(rf"{len(CASES)}/{len(CASES)} prompts \(100%\)", final)
    assert "/s" in final
    assert stream.getvalue().endswith("\n")


def test_progress_forced_off_on_a_terminal() -> None:
    stream = FakeTTY()
    run_cases(lambda p: "x", CASES, progress=False, progress_stream=stream)
    assert stream.getvalue() == ""


def test_progress_line_shows_rate_eta_and_failures() -> None:
    bar = Progress(10, enabled=True, stream=io.StringIO())
    for _ in range(4):
        bar.advance(failed=False)
    bar.advance(failed=True)
    line = bar.render(now=bar._start + 10.0)
    assert "5/10 prompts (50%)" in line
    assert "0.5/s" in line
    assert "1 failed" in line
    assert "ETA 0:10" in line


# "by" is left out: "X by Y" is a title by an artist to the reply parser (docs/parsing.md)
_word = st.text(
    alphabet=st.characters(whitelist_categories=("Lu", "Ll")), min_size=1, max_size=8
).filter(lambda w: w.casefold() != "by")
_title = st.lists(_word, min_size=1, max_size=4).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(st.lists(_title, min_size=1, max_size=30, unique_by=str.lower))
def test_numbered_list_reads_back_through_the_reply_parser(titles: list[str]) -> None:
    # A callable's list reply must reach the metrics unchanged.
    assert parse.items(numbered(titles)) == titles
