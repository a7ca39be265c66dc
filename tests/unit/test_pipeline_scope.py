"""The pure parts of a pipeline's recording (providers/pipeline.py): the budget allowance,
usage read from the replies, what a miss says differed, output-level recordings, and a
request sent from a thread that lost the prompt's context."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx2
import pytest

from pytest_recfair.cassettes.miss import request_difference
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.errors import ProviderError
from pytest_recfair.providers.base import Completion, Usage
from pytest_recfair.providers.pipeline import (
    Allowance,
    BudgetStop,
    Scope,
    http_client,
    output_completion,
    output_reply,
    scoped,
    usage_of,
)


class _Case:
    id = "e1::religion::Muslim::0"
    entity_id = "e1"
    repeat = 0
    prompt = "I am a Muslim fan of X."
    system = None


def test_the_allowance_stops_at_the_request_budget_before_sending() -> None:
    allowance = Allowance(requests=2)
    allowance.take("POST h/v1", "t")
    allowance.take("POST h/v1", "t")
    with pytest.raises(BudgetStop, match=r"request 3 \(POST h/v1\).*not sent"):
        allowance.take("POST h/v1", "t")
    assert allowance.sent == 2


def test_the_allowance_stops_once_the_replies_usage_spent_the_cost_budget() -> None:
    allowance = Allowance(cost=0.01, prices=(1.0, 2.0))  # USD per 1M tokens
    allowance.take("POST h/v1", "t")
    allowance.charge(Usage(2_000, 4_000))  # $0.002 + $0.008 = $0.01
    assert allowance.spent == pytest.approx(0.01)
    with pytest.raises(BudgetStop, match="recfair_max_cost"):
        allowance.take("POST h/v1", "t")


def test_usage_is_read_from_each_providers_reply_shape() -> None:
    openai = {"usage": {"prompt_tokens": 10, "completion_tokens": 20}}
    anthropic = {"usage": {"input_tokens": 7, "output_tokens": 9}}
    gemini = {"usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 4}}
    assert usage_of(json.dumps(openai).encode()) == Usage(10, 20)
    assert usage_of(json.dumps(anthropic).encode()) == Usage(7, 9)
    assert usage_of(json.dumps(gemini).encode()) == Usage(3, 4)
    assert usage_of(b'{"usage": "lots"}') is None
    assert usage_of(b"data: not json") is None


def test_a_miss_names_the_field_that_changed() -> None:
    recorded = json.dumps(
        {
            "model": "m1",
            "temperature": 0,
            "messages": [
                {"role": "system", "content": "You recommend films."},
                {"role": "user", "content": "I am a fan of X."},
            ],
        }
    )
    sent = json.loads(recorded)
    sent["messages"][0]["content"] = "You recommend movies."
    sent["model"] = "m2"
    said = request_difference([recorded], json.dumps(sent).encode())
    assert "messages[0] (system).content: 'You recommend films.' recorded" in said
    assert "'You recommend movies.' now" in said
    assert "model: 'm1' recorded, 'm2' now" in said
    assert request_difference([], b"{}") == (
        "no request to this endpoint was recorded for this prompt"
    )


def test_a_long_changed_text_is_shown_from_where_it_changes() -> None:
    head = "You are a film recommender for a streaming service. " * 3
    said = request_difference(
        [json.dumps({"system": head + "Prefer classics."})],
        json.dumps({"system": head + "Prefer new releases."}),
    )
    assert "Prefer classics." in said
    assert "Prefer new releases." in said


def test_an_output_recording_round_trips() -> None:
    done = Completion("1. A\n2. B", "stop", Usage(5, 6), "m")
    assert output_completion(output_reply(done), "m") == done
    with pytest.raises(ProviderError, match="re-record"):
        output_completion(b'{"text": 3}', "m")


def test_a_request_from_a_thread_without_the_prompts_context_is_refused(
    tmp_path: Path,
) -> None:
    """While an audit prompt is open, a request with no prompt context (from a thread
    the pipeline started without copying the context) would reach the network
    unrecorded, and a replay would call the network: it is refused, saying how."""
    client = http_client("httpx2")
    seen: list[BaseException] = []

    def send() -> None:
        try:
            client.get("http://127.0.0.1:9/never")
        except BaseException as exc:
            seen.append(exc)

    store = CassetteStore(tmp_path, "none", autosave=None)
    with scoped(Scope(store, "t", _Case())):
        thread = threading.Thread(target=send)  # a plain thread: no context copied
        thread.start()
        thread.join()
    client.close()
    assert len(seen) == 1
    assert isinstance(seen[0], ProviderError), seen
    assert "contextvars.copy_context().run" in str(seen[0])
    assert not isinstance(seen[0], httpx2.ConnectError)
