"""Never pay twice: batch recording under the fault scenarios of issue 22, against the
simulator's batch endpoints on loopback.

"Paid twice" is counted at the service: every line the simulator received in any batch,
less the distinct custom ids among them. Every scenario must end with 0 paid twice and
every answered line recorded.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_recfair.prompts.cases import PromptCase, build_cases
from pytest_recfair.prompts.seeds import load_seeds
from pytest_recfair.providers import from_config
from pytest_recfair.providers.batch import run_batch
from pytest_recfair.providers.batch_api import Journal
from pytest_recfair.sim.batch import BatchOptions
from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.support.plugin import REPO


def cases(first: int, count: int) -> list[PromptCase]:
    seeds = load_seeds("directors", domain="movie")[first : first + count]
    return build_cases(grid="faireval", entities=seeds, k=10, attributes=["religion"])


class Recorder:
    def __init__(self) -> None:
        self.ids: list[str] = []

    def __call__(self, case: Any, request: httpx.Request, response: httpx.Response) -> None:
        self.ids.append(case.id)


def paid_twice(srv: SimServer) -> int:
    lines = [line.custom_id for b in srv.batches.batches.values() for line in b.lines]
    return len(lines) - len(set(lines))


def provider_of(srv: SimServer, kind: str) -> Any:
    base = srv.base_url if kind == "openai" else srv.base_url.removesuffix("/v1")
    return from_config(kind, model="recfair-sim-1", base_url=base)


class Killed(BaseException):
    """Stands for SIGKILL in-process: nothing after it runs (no except, no finally save)."""


@pytest.mark.parametrize(
    ("kind", "window"),
    [("openai", "after-create"), ("openai", "after-upload"), ("anthropic", "after-create")],
)
def test_killed_between_the_call_and_the_journal(
    kind: str, window: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service did the step, the journal never learnt it: the resumed run finds the
    batch (OpenAI metadata, Anthropic list) or re-uploads the free file, never re-pays.
    (Anthropic has no upload step.)"""
    todo = cases(0, 3)
    state = "submitted" if window == "after-create" else "uploaded"
    real_save = Journal.save

    def dying_save(self: Journal) -> None:
        if self.entry["state"] == state:
            raise Killed
        real_save(self)

    with SimServer(SimulatedRecommender(seed=1), batch=BatchOptions(delay_s=0.2)) as srv:
        provider = provider_of(srv, kind)
        monkeypatch.setattr(Journal, "save", dying_save)
        with pytest.raises(Killed):
            run_batch(provider, todo, journals=tmp_path, record=Recorder(), poll_interval=0.05)
        monkeypatch.setattr(Journal, "save", real_save)
        rec = Recorder()
        outcome = run_batch(provider, todo, journals=tmp_path, record=rec, poll_interval=0.05)
        assert srv.batches.created == 1
        assert paid_twice(srv) == 0
    assert sorted(rec.ids) == sorted(c.id for c in todo)
    assert not outcome.errors
    assert not list(tmp_path.glob("*.json"))
    assert not list(tmp_path.glob("*.jsonl"))


KILLER = """
import os, signal, sys
from pytest_recfair.prompts.cases import PromptCase, build_cases
from pytest_recfair.prompts.seeds import load_seeds
from pytest_recfair.providers import from_config
from pytest_recfair.providers import batch_api
from pytest_recfair.providers.batch import run_batch

real = batch_api.{cls}.create
def create(self, *a, **kw):
    out = real(self, *a, **kw)
    os.kill(os.getpid(), signal.SIGKILL)  # the batch exists; the journal never hears of it
    return out
batch_api.{cls}.create = create
seeds = load_seeds("directors", domain="movie")[:3]
todo = build_cases(grid="faireval", entities=seeds, k=10, attributes=["religion"])
provider = from_config("{kind}", model="recfair-sim-1", base_url=sys.argv[1])
run_batch(provider, todo, journals=__import__("pathlib").Path(sys.argv[2]), record=print)
"""


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_sigkill_after_the_batch_is_created(kind: str, tmp_path: Path) -> None:
    """A real SIGKILL in the window between the create call and the journal's save."""
    cls = "OpenAIBatches" if kind == "openai" else "AnthropicBatches"
    script = tmp_path / "killer.py"
    script.write_text(KILLER.format(cls=cls, kind=kind))
    journals = tmp_path / "journals"
    with SimServer(SimulatedRecommender(seed=2), batch=BatchOptions(delay_s=0.2)) as srv:
        provider = provider_of(srv, kind)
        base = str(provider.base_url)
        proc = subprocess.run(
            [sys.executable, str(script), base, str(journals)], cwd=REPO, timeout=120
        )
        assert proc.returncode == -9
        assert srv.batches.created == 1
        (journal,) = journals.glob("*.json")
        assert "batch_id" not in json.loads(journal.read_text())["batches"][0]
        rec = Recorder()
        todo = cases(0, 3)
        run_batch(provider, todo, journals=journals, record=rec, poll_interval=0.05)
        assert srv.batches.created == 1, "the paid batch was found, not created again"
        assert paid_twice(srv) == 0
    assert sorted(rec.ids) == sorted(c.id for c in todo)
    assert not list(journals.glob("*.json*"))


def _interrupt(provider: Any, todo: list[Any], journals: Path) -> None:
    from pytest_recfair.errors import ProviderError

    with pytest.raises(ProviderError, match="still running"):
        run_batch(
            provider, todo, journals=journals, record=Recorder(), poll_interval=0.05, max_wait=0.1
        )


def test_a_smaller_run_records_the_interrupted_full_run(tmp_path: Path) -> None:
    """--fairness-entities=2 after an interrupted full run: nothing submitted, the other
    entities' answered lines are recorded too (for their own test and entity)."""
    full = cases(0, 3)
    with SimServer(SimulatedRecommender(seed=3), batch=BatchOptions(delay_s=1.0)) as srv:
        provider = provider_of(srv, "openai")
        _interrupt(provider, full, tmp_path)
        rec = Recorder()
        outcome = run_batch(provider, cases(0, 1), journals=tmp_path, record=rec, poll_interval=0.1)
        assert outcome.submitted == 0
        assert srv.batches.created == 1
        assert paid_twice(srv) == 0
    assert sorted(rec.ids) == sorted(c.id for c in full), "every answered line recorded"
    assert not list(tmp_path.glob("*.json"))


def test_another_shard_adopts_and_does_not_discard(tmp_path: Path) -> None:
    """Shard 2/2 in the workspace of an interrupted shard 1/2: it records shard 1's lines
    and submits only its own."""
    one, two = cases(0, 3), cases(3, 3)
    with SimServer(SimulatedRecommender(seed=4), batch=BatchOptions(delay_s=1.0)) as srv:
        provider = provider_of(srv, "anthropic")
        _interrupt(provider, one, tmp_path)
        rec = Recorder()
        outcome = run_batch(provider, two, journals=tmp_path, record=rec, poll_interval=0.1)
        assert outcome.submitted == 1
        assert srv.batches.created == 2
        assert paid_twice(srv) == 0
    assert sorted(rec.ids) == sorted(c.id for c in one + two)


@pytest.mark.parametrize("overlap", ["same", "subset"])
def test_concurrent_runs_never_both_pay(overlap: str, tmp_path: Path) -> None:
    """Two runs at once on the same journals: a line is in one batch only; the run that
    did not pay for a line reports it (replayed on the next run), never submits it."""
    full = cases(0, 3)
    other = full if overlap == "same" else full[:5]
    recs = [Recorder(), Recorder()]
    outcomes: list[Any] = [None, None]
    with SimServer(SimulatedRecommender(seed=5), batch=BatchOptions(delay_s=0.5)) as srv:
        provider = provider_of(srv, "openai")

        def go(i: int, todo: list[Any]) -> None:
            outcomes[i] = run_batch(
                provider, todo, journals=tmp_path, record=recs[i], poll_interval=0.05
            )

        threads = [threading.Thread(target=go, args=a) for a in ((0, full), (1, other))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert paid_twice(srv) == 0
        if overlap == "same":
            assert srv.batches.created == 1
    recorded = recs[0].ids + recs[1].ids
    assert sorted(set(recorded)) == sorted(c.id for c in full)
    busy = {k for o in outcomes for k, v in o.errors.items() if "another running batch" in v}
    assert busy | set(recorded) >= {c.id for c in full}


@pytest.mark.parametrize(
    "body",
    [
        b"<html><body>502 Bad Gateway</body></html>\n",
        b'{"custom_id": "x", "response": {"status_code": 200, "bo\n',
        b"[1, 2, 3]\n",
        b'"just a string"\n',
    ],
    ids=["html", "truncated", "array", "string"],
)
def test_unreadable_results_are_quarantined(
    body: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A results file that is not JSONL of objects: one clear error per prompt, the
    journal set aside (never polled again), no traceback."""
    todo = cases(0, 1)
    with SimServer(SimulatedRecommender(seed=6), batch=BatchOptions()) as srv:
        provider = provider_of(srv, "openai")
        real = srv.batches._store

        def broken(name: str, purpose: str, data: bytes) -> dict[str, Any]:
            # the batch's output and error files: stored as ``body`` instead
            return real(name, purpose, body if purpose == "batch_output" else data)

        monkeypatch.setattr(srv.batches, "_store", broken)
        outcome = run_batch(
            provider, todo, journals=tmp_path, record=Recorder(), poll_interval=0.01
        )
        assert len(outcome.errors) == len(todo)
        message = next(iter(outcome.errors.values()))
        assert "results unreadable" in message
        assert "quarantined" in message
        assert "\n" not in message
        assert len(list(tmp_path.glob("*.quarantined.json"))) == 1
        again = run_batch(provider, todo, journals=tmp_path, record=Recorder(), poll_interval=0.01)
        assert again.submitted == 1, "asked again, not the broken batch polled forever"
