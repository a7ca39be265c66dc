"""Recording through batch APIs against the simulator over real loopback HTTP.

The simulator serves the OpenAI Batch API and Anthropic Message Batches; the client
(pytest_recfair.providers.batch) must hand back, for every answered line, exactly the
response the synchronous endpoint gives for the same request, report failed lines as
errors, and resume polling after an interruption instead of submitting again.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from pytest_recfair.errors import ConfigError, ProviderError
from pytest_recfair.prompts.cases import PromptCase, build_cases
from pytest_recfair.prompts.seeds import load_seeds
from pytest_recfair.providers import from_config
from pytest_recfair.providers.batch import custom_id, run_batch
from pytest_recfair.providers.batch_api import content_key
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


def test_unsupported_provider_and_malformed_journal(tmp_path: Path) -> None:
    gemini = from_config("gemini", model="gemini-2.5-flash", base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="has no batch API here; use one of openai, anthropic"):
        run_batch(gemini, cases(1), journals=tmp_path / "j", record=Recorder())
    (tmp_path / "j").mkdir()
    journal = tmp_path / "j" / "rfother.json"
    journal.write_text(json.dumps({"version": 1, "owner": {"model": "x"}, "batches": []}))
    openai = from_config("openai", model="m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ProviderError, match=r"rfother\.json is malformed") as info:
        run_batch(openai, cases(1), journals=tmp_path / "j", record=Recorder())
    assert "\n" not in str(info.value)
