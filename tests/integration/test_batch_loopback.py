"""Recording through batch APIs against the simulator over real loopback HTTP.

The simulator serves the OpenAI Batch API and Anthropic Message Batches; the client
(pytest_recfair.providers.batch) must hand back, for every answered line, exactly the
response the synchronous endpoint gives for the same request, report failed lines as
errors, and resume polling after an interruption instead of submitting again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_recfair.errors import ConfigError, ProviderError
from pytest_recfair.prompts.cases import PromptCase, build_cases
from pytest_recfair.prompts.seeds import load_seeds
from pytest_recfair.providers import from_config
from pytest_recfair.providers.batch import run_batch
from pytest_recfair.providers.batch_api import JOURNAL_VERSION, content_key, custom_id
from pytest_recfair.sim.batch import BatchOptions
from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer


def cases(n_entities: int = 3) -> list[PromptCase]:
    seeds = load_seeds("directors", domain="movie")[:n_entities]
    return build_cases(grid="faireval", entities=seeds, k=10, attributes=["religion"])


class Recorder:
    def __init__(self) -> None:
        self.pairs: dict[str, tuple[httpx.Request, httpx.Response]] = {}

    def __call__(self, case: PromptCase, request: httpx.Request, r: httpx.Response) -> None:
        assert case.id not in self.pairs, "a line was recorded twice"
        self.pairs[case.id] = (request, r)


def sync_body(request: httpx.Request) -> dict[str, object]:
    """What the synchronous endpoint answers to the very same request."""
    with httpx.Client() as client:
        response = client.send(request)
    assert response.status_code == 200, response.text
    data: dict[str, object] = response.json()
    return data


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_batch_replies_are_the_synchronous_replies(kind: str, tmp_path: Path) -> None:
    todo = cases()
    failing = todo[4]
    with SimServer(
        SimulatedRecommender(bias="demo", seed=1), batch=BatchOptions(delay_s=0.3)
    ) as srv:
        base = srv.base_url if kind == "openai" else srv.base_url.removesuffix("/v1")
        provider = from_config(kind, model="recfair-sim-1", base_url=base)
        bad = custom_id(failing.id, provider.build_request(failing.system, failing.prompt).content)
        srv.batches.options = BatchOptions(delay_s=0.3, error_ids=frozenset({bad}))
        rec = Recorder()
        lines: list[str] = []
        outcome = run_batch(
            provider,
            todo,
            journals=tmp_path / "journals",
            record=rec,
            poll_interval=0.05,
            progress=lines.append,
        )
        assert outcome.submitted == 1
        assert srv.batches.created == 1
        assert set(outcome.errors) == {failing.id}
        assert "batch " in outcome.errors[failing.id]
        assert outcome.recorded == len(todo) - 1 == len(rec.pairs)
        assert failing.id not in rec.pairs
        for case in todo[:3]:
            request, response = rec.pairs[case.id]
            assert request.content == provider.build_request(case.system, case.prompt).content
            assert response.json() == sync_body(request)
        assert outcome.usage.prompt_tokens > 0
    assert any("in_progress" in line or "validating" in line for line in lines)
    assert lines[-1].split(": ", 1)[1].startswith(("completed", "ended"))
    assert not list((tmp_path / "journals").iterdir()), "the journal is removed when done"


def test_an_interrupted_run_resumes_polling(tmp_path: Path) -> None:
    todo = cases(2)
    journals = tmp_path / "journals"
    with SimServer(SimulatedRecommender(seed=2), batch=BatchOptions(delay_s=1.5)) as srv:
        provider = from_config("openai", model="recfair-sim-1", base_url=srv.base_url)
        first = Recorder()
        with pytest.raises(ProviderError, match="re-run the same command later") as info:
            run_batch(
                provider, todo, journals=journals, record=first, poll_interval=0.05, max_wait=0.2
            )
        assert str(journals) in str(info.value)
        assert "\n" not in str(info.value)
        (journal,) = journals.glob("*.json")
        kept = json.loads(journal.read_text())
        assert [e["state"] for e in kept["batches"]] == ["submitted"]
        assert not first.pairs
        second = Recorder()
        outcome = run_batch(provider, todo, journals=journals, record=second, poll_interval=0.1)
        assert outcome.submitted == 0, "resumed: nothing submitted again"
        assert srv.batches.created == 1
        assert outcome.batches == [kept["batches"][0]["batch_id"]]
        assert set(second.pairs) == {c.id for c in todo}
        assert not outcome.errors
    assert not journal.exists()


def test_resume_after_upload_before_create(tmp_path: Path) -> None:
    """Killed between the upload and the batch creation: the uploaded file is used."""
    todo = cases(1)
    journal = tmp_path / "journals"
    with SimServer(SimulatedRecommender(seed=3)) as srv:
        provider = from_config("openai", model="recfair-sim-1", base_url=srv.base_url)
        ids = [custom_id(c.id, provider.build_request(c.system, c.prompt).content) for c in todo]
        lines = "".join(
            json.dumps(
                {
                    "custom_id": cid,
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": json.loads(provider.build_request(c.system, c.prompt).content),
                }
            )
            + "\n"
            for cid, c in zip(ids, todo, strict=True)
        )
        with httpx.Client() as client:
            up = client.post(
                f"{srv.base_url}/files",
                files={"file": ("in.jsonl", lines.encode(), "application/jsonl")},
                data={"purpose": "batch"},
            ).json()
        owner = {"provider": "openai", "model": "recfair-sim-1", "base_url": srv.base_url}
        key = content_key(owner, ids)
        addresses = {
            cid: {
                "test": "t",
                "entity": c.entity_id,
                "repeat": c.repeat,
                "case": c.id,
                "body": provider.build_request(c.system, c.prompt).content.decode(),
            }
            for cid, c in zip(ids, todo, strict=True)
        }
        entry = {
            "key": key,
            "kind": "openai",
            "custom_ids": ids,
            "lines": addresses,
            "planned_at": 0,
            "state": "uploaded",
            "file_id": up["id"],
        }
        journal.mkdir()
        (journal / f"{key}.json").write_text(
            json.dumps({"version": 2, "owner": owner, "batches": [entry]})
        )
        rec = Recorder()
        outcome = run_batch(provider, todo, journals=journal, record=rec, poll_interval=0.05)
        assert outcome.submitted == 0
        assert srv.batches.created == 1
        assert len(srv.batches.files) == 2, "no second upload (input + output file)"
        assert set(rec.pairs) == {c.id for c in todo}


def test_expired_lines_are_errors_not_recordings(tmp_path: Path) -> None:
    todo = cases(2)
    with SimServer(SimulatedRecommender(), batch=BatchOptions(expire_rate=0.3, seed=4)) as srv:
        provider = from_config("openai", model="recfair-sim-1", base_url=srv.base_url)
        rec = Recorder()
        outcome = run_batch(provider, todo, journals=tmp_path / "j", record=rec, poll_interval=0.01)
    assert outcome.errors
    assert all("batch_expired" in e for e in outcome.errors.values())
    assert set(outcome.errors).isdisjoint(rec.pairs)
    assert len(outcome.errors) + len(rec.pairs) == len(todo)


def test_unsupported_provider(tmp_path: Path) -> None:
    gemini = from_config("gemini", model="gemini-2.5-flash", base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="has no batch API here; use one of openai, anthropic"):
        run_batch(gemini, cases(1), journals=tmp_path / "j", record=Recorder())


Doc = dict[str, Any]


def _consistent(doc: Doc, edit: Callable[[Doc], None]) -> Doc:
    """``edit`` a line, then give it the id and the journal the key they would have."""
    entry = doc["batches"][0]
    (_, line), *rest = entry["lines"].items()
    edit(line)
    new = custom_id(line["case"], line["body"].encode())
    entry["lines"] = {new: line, **dict(rest)}
    entry["custom_ids"] = list(entry["lines"])
    entry["key"] = content_key(doc["owner"], entry["lines"])
    return doc


def _body(change: Doc) -> Callable[[Doc], None]:
    def edit(line: Doc) -> None:
        line["body"] = json.dumps({**json.loads(line["body"]), **change})

    return edit


def _set(change: Doc) -> Callable[[Doc], Doc]:
    def edit(doc: Doc) -> Doc:
        doc["batches"][0].update(change)
        return doc

    return edit


def _without_custom_ids(doc: Doc) -> Doc:
    del doc["batches"][0]["custom_ids"]
    return doc


JOURNALS: dict[str, Callable[[Doc, bytes], bytes | Doc]] = {
    "a journal of this run": lambda doc, raw: doc,
    "not JSON": lambda doc, raw: b"{not json",
    "truncated": lambda doc, raw: raw[: len(raw) // 2],
    "not UTF-8": lambda doc, raw: raw.replace(b'"planned"', b'"pl\xe4nned"'),
    "string entry": lambda doc, raw: {**doc, "batches": ["not an object"]},
    "lines a list": lambda doc, raw: _set({"lines": ["a", "b"]})(doc),
    "batch id a number": lambda doc, raw: _set({"batch_id": 12})(doc),
    "unknown state": lambda doc, raw: _set({"state": "flying"})(doc),
    "no custom ids": lambda doc, raw: _without_custom_ids(doc),
    "uploaded without a file id": lambda doc, raw: _set({"state": "uploaded"})(doc),
    "submitted without a batch id": lambda doc, raw: _set({"state": "submitted"})(doc),
    "another model": lambda doc, raw: _consistent(doc, _body({"model": "other-model"})),
    "a line not its id": lambda doc, raw: _set({"lines": {
        cid: {**line, "body": line["body"].replace("recfair-sim-1", "recfair-sim-2")}
        for cid, line in doc["batches"][0]["lines"].items()
    }})(doc),
}  # fmt: skip


@pytest.mark.parametrize("name", list(JOURNALS))
def test_a_damaged_foreign_or_inconsistent_journal_is_set_aside_in_one_line(
    name: str, tmp_path: Path
) -> None:
    """issue 33 point 6: never used silently, never a traceback; the run records."""
    todo = cases(2)
    journals = tmp_path / "journals"
    journals.mkdir()
    with SimServer(SimulatedRecommender(seed=2), batch=BatchOptions(delay_s=0.1)) as srv:
        provider = from_config("openai", model="recfair-sim-1", base_url=srv.base_url)
        owner = {"provider": "openai", "model": "recfair-sim-1", "base_url": srv.base_url}
        lines = {}
        for case in todo[:3]:
            body = provider.build_request(case.system, case.prompt).content
            lines[custom_id(case.id, body)] = {
                "test": "", "entity": case.entity_id, "repeat": case.repeat, "case": case.id,
                "body": body.decode(),
            }  # fmt: skip
        key = content_key(owner, lines)
        entry = {"key": key, "kind": "openai", "state": "planned", "planned_at": time.time(),
                 "custom_ids": list(lines), "lines": lines}  # fmt: skip
        doc = {"version": JOURNAL_VERSION, "owner": owner, "batches": [entry]}
        made = JOURNALS[name](json.loads(json.dumps(doc)), json.dumps(doc).encode())
        if isinstance(made, dict) and isinstance(made["batches"][0], dict):
            key = made["batches"][0]["key"]  # another model: a journal consistent but foreign
        path = journals / f"{key}.json"
        path.write_bytes(made if isinstance(made, bytes) else json.dumps(made).encode())
        said: list[str] = []
        rec = Recorder()
        outcome = run_batch(
            provider, todo, journals=journals, record=rec, poll_interval=0.05,
            progress=said.append,
        )  # fmt: skip
        created = srv.batches.created
    assert set(rec.pairs) == {c.id for c in todo}
    assert not outcome.errors
    aside = [line for line in said if "set aside" in line]
    if name == "a journal of this run":
        assert (aside, created) == ([], 2)  # adopted: its lines, then the rest
        return
    assert len(aside) == 1, said
    assert str(path) in aside[0]
    assert "\n" not in aside[0]
    assert created == 1  # one new batch for every prompt
    if name == "another model":
        assert "asks model 'other-model', not 'recfair-sim-1'" in aside[0]
    assert path.with_name(f"{key}.quarantined.json").is_file()
