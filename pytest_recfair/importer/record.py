"""Write a published run's replies as cassettes, through the project's own recording path.

Each case is sent by the real OpenAI provider through ``run_cases`` into the cassette
store (record mode), with an ``httpx.MockTransport`` answering the published reply: the
CSV's ``Result`` is the reply of record (the Batch API body is kept verbatim where its text
is the same; where it differs the CSV wins and it is counted, unless the caller prefers
the batch). Cases the published run never answered are neither sent nor recorded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.errors import DataError
from pytest_recfair.importer.published import PublishedRun, messages
from pytest_recfair.prompts.cases import PromptCase
from pytest_recfair.providers.http import from_config
from pytest_recfair.providers.runner import run_cases
from pytest_recfair.providers.runstate import RunOutcome


def completion(model: str, text: str, key: str, source: str = "published") -> dict[str, Any]:
    """An OpenAI chat completion for a reply the folder has only as text."""
    return {
        "id": f"chatcmpl-{source}-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:20],
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
    }


def record(
    root: Path,
    cases: Sequence[Any],
    answer: Callable[[httpx.Request], dict[str, Any] | None],
    *,
    test_id: str,
    model: str,
    what: str,
) -> RunOutcome:
    """Send ``cases`` through the real OpenAI provider into the cassettes under ``root``;
    the mock network answers each request with ``answer``'s body (404 when None)."""

    def respond(request: httpx.Request) -> httpx.Response:
        body = answer(request)
        if body is None:
            return httpx.Response(404, json={"error": {"message": "not in the published run"}})
        return httpx.Response(200, json=body)

    provider = from_config("openai", model=model, api_key_env="")
    with CassetteStore(root, mode="all") as store:
        outcome = run_cases(
            provider, list(cases), cassettes=store, test_id=test_id,
            transport=httpx.MockTransport(respond), progress=False, max_retries=0,
        )  # fmt: skip
    if outcome.errors:
        raise DataError(
            f"{what}: recording {test_id} failed for {len(outcome.errors)} case(s): "
            f"{next(iter(outcome.errors.values()))}"
        )
    return outcome


def batch_text(body: Mapping[str, Any]) -> str | None:
    """The reply text of a chat completion body (None when it has none)."""
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else None


def record_class(
    run: PublishedRun,
    cases: Sequence[PromptCase],
    names: Mapping[str, str],
    *,
    root: Path,
    test_id: str,
    model: str,
    prefer_batch: bool = False,
) -> tuple[int, tuple[int, int]]:
    """Record one test's cassettes (one class; ``names``: entity id -> name); returns the
    interactions written and how many batch replies differ from the CSV's ``Result`` (the
    reply of record unless ``prefer_batch``), (neutral, conditioned)."""
    sent: list[PromptCase] = []
    bodies: dict[tuple[str, str], dict[str, Any]] = {}
    differ = [0, 0]  # neutral, conditioned
    for case in cases:
        name = names[case.entity_id]
        if case.attribute is None:
            row = run.neutral.get(name)
        else:
            row = run.classes[case.attribute][case.value or ""].get(name)
        if row is None:
            continue  # never answered in the published run
        if row.prompt is not None and row.prompt != case.prompt:
            raise DataError(
                f"import: the audit would ask {case.prompt!r} where the published run asked "
                f"{row.prompt!r} (entity {row.name!r}); the templates do not reproduce it"
            )
        key = (case.system, case.prompt)
        batch = run.batch.get(key)
        body = completion(model, row.reply, json.dumps(key))
        if batch is not None and batch.response is not None:
            same = batch_text(batch.response) == row.reply
            differ[case.attribute is not None] += 0 if same else 1
            if same or prefer_batch:
                body = dict(batch.response)
        bodies[key] = body
        sent.append(case)

    def answer(request: httpx.Request) -> dict[str, Any] | None:
        return bodies.get(messages(json.loads(request.content)))

    record(root, sent, answer, test_id=test_id, model=model, what="import")
    return len(sent), (differ[0], differ[1])
