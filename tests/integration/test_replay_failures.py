"""A recording with allowed failures replays offline to the same numbers (issue 25, 8).

A real HTTP stub on loopback answers a few prompts with a content-filter 400 (the
same prompts every time); ``recfair_max_failed`` allows them. The recording run passes;
the offline replay (record mode ``none``, no server) leaves exactly those prompts out as
failures and reports the same numbers; ``new_episodes`` asks them again; a prompt never
recorded is a CassetteMiss that says how many prompts a recording run would send.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import threading
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.sim.batch import BatchOptions
from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.support.plugin import plugin_args, subprocess_env

pytest_plugins = ["pytester"]

FILTER_MESSAGE = "The response was filtered due to the prompt triggering content management policy."


class Stub:
    """An OpenAI-compatible server: ``answer(prompt)``, or a 400 content filter for the
    prompts ``filtered`` picks (a hash of the prompt: the same ones in every run)."""

    def __init__(self, answer: Callable[[str], str], every: int) -> None:
        self.answer = answer
        self.every = every
        self.requests = 0
        self.filtered: set[str] = set()
        self.lock = threading.Lock()

    def blocks(self, prompt: str) -> bool:
        return zlib.crc32(prompt.encode()) % self.every == 0

    def reply(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        prompt = str(body["messages"][-1]["content"])
        with self.lock:
            self.requests += 1
            if self.blocks(prompt):
                self.filtered.add(prompt)
                error = {"message": FILTER_MESSAGE, "type": None, "code": "content_filter"}
                return 400, {"error": error}
        text = self.answer(prompt)
        return 200, {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "model": str(body.get("model")),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 40, "completion_tokens": 120, "total_tokens": 160},
        }


def _serve(stub: Stub) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            status, payload = stub.reply(json.loads(raw))
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def overlap_stub() -> Iterator[tuple[Stub, str]]:
    sim = SimulatedRecommender(bias={"religion": {"Muslim": 0.3}}, seed=0)
    stub = Stub(lambda prompt: sim(prompt), every=13)
    server = _serve(stub)
    yield stub, f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()


def _pick(prompt: str) -> str:
    """A candidate-position recommender: the alphabetically first candidate, or the one
    shown first for some prompts."""
    rng = random.Random(prompt)
    shown = [line.split(". ", 1)[1] for line in prompt.splitlines() if line[:1].isdigit()]
    if not shown:
        return "None of these."
    return shown[0] if rng.random() < 0.2 else sorted(shown)[0]


@pytest.fixture
def positions_stub() -> Iterator[tuple[Stub, str]]:
    stub = Stub(_pick, every=11)
    server = _serve(stub)
    yield stub, f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()


OVERLAP_TEST = """
from pytest_recfair import fairness


@fairness(attr="religion")
def test_religion():
    pass
"""

POSITIONS_CONFTEST = """
import random

import pytest


@pytest.fixture
def films():
    rng = random.Random(1)
    titles = [f"Film {i}" for i in range(200)]
    return {f"Director {i}": rng.sample(titles, 6) for i in range(30)}


@pytest.fixture
def directors():
    return [f"Director {i}" for i in range(30)]
"""

POSITIONS_TEST = """
from pytest_recfair import fairness


@fairness(attr="religion", seeds="directors", candidates="films", orders=2,
          max_position_bias=0.9, max_missed_rate=0.9)
def test_pick():
    pass
"""


def _project(
    pytester: pytest.Pytester, url: str, test: str, entities: int | None, extra: str = ""
) -> None:
    size = f"recfair_entities = {entities}\n{extra}" if entities else extra
    pytester.makeini(
        "[pytest]\nrecfair_provider = openai\nrecfair_model = stub-model\n"
        f"recfair_base_url = {url}\nrecfair_n_resamples = 200\nrecfair_max_failed = 0.2\n"
        f"recfair_max_retries = 0\n{size}"
    )
    pytester.makepyfile(test_audit=test)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*plugin_args(), "-p", "no:randomly", "--fairness", *args)


def _numbers(path: Path) -> list[dict[str, Any]]:
    """A JSON report's results but the record mode and the gate (the recording wrote the
    baseline the replay is gated against, so only the replay has a drift test)."""
    results = json.loads(path.read_text(encoding="utf-8"))["results"]
    for result in results:
        result["meta"].pop("record_mode")
        result.pop("gate")
    return list(results)


def _sidecars(pytester: pytest.Pytester) -> list[Path]:
    return sorted((pytester.path / "fixtures" / "cassettes").glob("_failed.*.jsonl"))


def _record_then_replay(pytester: pytest.Pytester, stub: Stub) -> tuple[Path, Path]:
    recorded = _run(
        pytester, "--fairness-record=once", "--fairness-update", "--fairness-report=rec.json"
    )
    recorded.assert_outcomes(passed=1)
    assert stub.filtered, "the stub filtered no prompt: the test would prove nothing"
    sidecar = "".join(p.read_text() for p in _sidecars(pytester))
    assert sidecar.count('"status": 400') == len(stub.filtered)
    assert "content" not in sidecar  # no body
    assert "fan of" not in sidecar  # no prompt
    sent = stub.requests
    replayed = _run(pytester, "--fairness-report=replay.json")
    replayed.assert_outcomes(passed=1)
    assert stub.requests == sent  # offline: nothing was sent
    left_out = f"*{len(stub.filtered)} of * prompts got no valid response, left out*"
    recorded.stdout.fnmatch_lines([left_out])
    replayed.stdout.fnmatch_lines([left_out])
    return pytester.path / "rec.json", pytester.path / "replay.json"


def test_overlap_replay_gives_the_recording_numbers(
    pytester: pytest.Pytester, overlap_stub: tuple[Stub, str]
) -> None:
    stub, url = overlap_stub
    _project(pytester, url, OVERLAP_TEST, 12)
    rec, replay = _record_then_replay(pytester, stub)
    assert _numbers(replay) == _numbers(rec)


def test_new_episodes_asks_the_failed_prompts_again(
    pytester: pytest.Pytester, overlap_stub: tuple[Stub, str]
) -> None:
    stub, url = overlap_stub
    _project(pytester, url, OVERLAP_TEST, 12)
    _record_then_replay(pytester, stub)
    sent = stub.requests
    again = _run(pytester, "--fairness-record=new_episodes")
    again.assert_outcomes(passed=1)
    assert stub.requests - sent == len(stub.filtered)  # exactly the failed ones


def test_a_prompt_never_recorded_says_what_a_recording_would_send(
    pytester: pytest.Pytester, overlap_stub: tuple[Stub, str]
) -> None:
    stub, url = overlap_stub
    _project(pytester, url, OVERLAP_TEST, 12)
    _record_then_replay(pytester, stub)
    _project(pytester, url, OVERLAP_TEST, 14)  # two entities more than recorded
    missed = _run(pytester)
    missed.assert_outcomes(errors=1)
    out = missed.stdout.str()
    assert "This prompt was never recorded" in out
    assert "--fairness-record=new_episodes would send at least" in out
    assert "--fairness-plan" in out


def test_positions_replay_gives_the_recording_numbers(
    pytester: pytest.Pytester, positions_stub: tuple[Stub, str]
) -> None:
    stub, url = positions_stub
    pytester.makeconftest(POSITIONS_CONFTEST)
    _project(pytester, url, POSITIONS_TEST, None)
    rec, replay = _record_then_replay(pytester, stub)
    assert _numbers(replay) == _numbers(rec)


def test_shards_replay_and_merge_to_the_recording_numbers(
    pytester: pytest.Pytester, overlap_stub: tuple[Stub, str]
) -> None:
    stub, url = overlap_stub
    _project(pytester, url, OVERLAP_TEST, 12)
    for i in (1, 2):
        shard = _run(pytester, f"--fairness-shard={i}/2", "--fairness-record=once")
        shard.assert_outcomes(skipped=1)
    names = [p.name for p in _sidecars(pytester)]
    worker = os.environ.get("PYTEST_XDIST_WORKER") or "main"  # under xdist: gw0 ...
    assert names == [f"_failed.{worker}-1of2.jsonl", f"_failed.{worker}-2of2.jsonl"]
    merge = ("--fairness-merge=fairness-shards", "--fairness-update", "--fairness-report=rec.json")
    _run(pytester, *merge).assert_outcomes(passed=1)
    shutil.rmtree(pytester.path / "fairness-shards")
    sent = stub.requests
    for i in (1, 2):
        _run(pytester, f"--fairness-shard={i}/2").assert_outcomes(skipped=1)
    assert stub.requests == sent  # the shards replayed offline
    merged = _run(pytester, "--fairness-merge=fairness-shards", "--fairness-report=replay.json")
    merged.assert_outcomes(passed=1)
    whole = _run(pytester, "--fairness-report=whole.json")
    whole.assert_outcomes(passed=1)
    rec = _numbers(pytester.path / "rec.json")
    assert rec[0]["failed"], "no prompt failed: the test would prove nothing"
    assert _numbers(pytester.path / "replay.json") == rec
    assert _numbers(pytester.path / "whole.json") == rec


def test_a_batch_recording_with_failed_lines_replays_to_its_numbers(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--fairness-batch: lines the batch answered with an error are noted like live
    failures, so the offline replay leaves the same prompts out."""
    subprocess_env(monkeypatch)
    allow = ("-o", "recfair_max_failed=0.5")
    with SimServer(SimulatedRecommender(bias="demo", seed=3)) as server:
        server.batches.options = BatchOptions(error_rate=0.2, seed=5)
        _project(pytester, server.base_url, OVERLAP_TEST, 6, "recfair_batch_poll = 0.05\n")
        args = ("--fairness-batch", "--fairness-update", "--fairness-report=rec.json")
        recorded = pytester.runpytest_subprocess(*plugin_args(), "--fairness", *allow, *args)
        recorded.assert_outcomes(passed=1)
        recorded.stdout.fnmatch_lines(["*batch: * of 30 prompts failed*"])
    assert _sidecars(pytester)
    replayed = pytester.runpytest_subprocess(
        *plugin_args(), "--fairness", *allow, "--fairness-report=replay.json"
    )
    replayed.assert_outcomes(passed=1)
    rec = _numbers(pytester.path / "rec.json")
    assert rec[0]["failed"], "no line failed: the test would prove nothing"
    assert _numbers(pytester.path / "replay.json") == rec


MARKER_SIZED = """
from pytest_recfair import fairness


@fairness(attr="religion", entities=12)
def test_religion():
    pass
"""


def test_option_ini_and_marker_sizes_sample_the_same_entities(
    pytester: pytest.Pytester, overlap_stub: tuple[Stub, str]
) -> None:
    """However the audit size is given, a replay asks what the recording asked; a smaller
    size replays from a larger recording (the sample is nested)."""
    stub, url = overlap_stub
    _project(pytester, url, OVERLAP_TEST, None)
    record = ("--fairness-entities=12", "--fairness-record=once", "--fairness-update")
    _run(pytester, *record).assert_outcomes(passed=1)
    sent = stub.requests
    _project(pytester, url, OVERLAP_TEST, 12)  # the ini
    _run(pytester).assert_outcomes(passed=1)
    _project(pytester, url, MARKER_SIZED, None)  # the marker
    _run(pytester).assert_outcomes(passed=1)
    _run(pytester, "--fairness-entities=8").assert_outcomes(passed=1)  # fewer: a subset
    assert stub.requests == sent  # every replay was offline, none missed


TWO_TESTS = """
from pytest_recfair import fairness


@fairness(attr="religion")
def test_religion():
    pass


@fairness(attr="gender")
def test_gender():
    pass
"""


def test_xdist_workers_note_their_own_files_and_the_replay_merges_them(
    pytester: pytest.Pytester, overlap_stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    subprocess_env(monkeypatch)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    stub, url = overlap_stub
    _project(pytester, url, TWO_TESTS, 12)
    args = ("--fairness", "--fairness-update", "--fairness-report=rec.json")
    recorded = pytester.runpytest_subprocess(
        *plugin_args(), "-n", "2", "--fairness-record=once", *args
    )
    recorded.assert_outcomes(passed=2)
    assert [p.name for p in _sidecars(pytester)] == ["_failed.gw0.jsonl", "_failed.gw1.jsonl"]
    sent = stub.requests
    replayed = pytester.runpytest_subprocess(
        *plugin_args(), "--fairness", "--fairness-report=replay.json"
    )
    replayed.assert_outcomes(passed=2)
    assert stub.requests == sent
    rec = sorted(_numbers(pytester.path / "rec.json"), key=lambda r: r["meta"]["test_id"])
    replay = sorted(_numbers(pytester.path / "replay.json"), key=lambda r: r["meta"]["test_id"])
    assert all(r["failed"] for r in rec), "a test had no failed prompt: it would prove nothing"
    assert replay == rec


class FirstAskFails(Stub):
    """A 400 for the first request of each prompt ``blocks`` picks; any later request of
    it is answered: the test that asks a shared prompt first fails it, the other records it."""

    def __init__(self, answer: Callable[[str], str], every: int) -> None:
        super().__init__(answer, every)
        self.asked: dict[str, int] = {}

    def blocks(self, prompt: str) -> bool:
        self.asked[prompt] = self.asked.get(prompt, 0) + 1
        return super().blocks(prompt) and self.asked[prompt] == 1


def test_a_prompt_one_worker_failed_and_another_recorded_replays_as_recorded(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 33 point 4: two tests share their neutral prompts; under -n 2 the one that
    asks a picked prompt first fails it, the other records it. A serial replay gives
    each test exactly its recording's numbers (the failure is the failing test's own)."""
    subprocess_env(monkeypatch)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    sim = SimulatedRecommender(bias={"religion": {"Muslim": 0.3}}, seed=0)
    stub = FirstAskFails(lambda prompt: sim(prompt), every=5)
    server = _serve(stub)
    try:
        url = f"http://127.0.0.1:{server.server_port}/v1"
        _project(pytester, url, TWO_TESTS, 12)
        allow = ("-o", "recfair_max_failed=0.5", "-o", "recfair_max_retries=1", "--fairness")
        recorded = pytester.runpytest_subprocess(
            *plugin_args(),
            "-n",
            "2",
            *allow,
            "--fairness-record=once",
            "--fairness-update",
            "--fairness-report=rec.json",
        )
        recorded.assert_outcomes(passed=2)
        shared = [p for p, n in stub.asked.items() if n > 1 and p in stub.filtered]
        assert shared, "no shared prompt failed once and was answered: it would prove nothing"
        sent = stub.requests
        replayed = pytester.runpytest_subprocess(
            *plugin_args(), *allow, "--fairness-report=replay.json"
        )
        replayed.assert_outcomes(passed=2)
        assert stub.requests == sent  # offline
    finally:
        server.shutdown()
        server.server_close()
    rec = sorted(_numbers(pytester.path / "rec.json"), key=lambda r: r["meta"]["test_id"])
    replay = sorted(_numbers(pytester.path / "replay.json"), key=lambda r: r["meta"]["test_id"])
    assert replay == rec
