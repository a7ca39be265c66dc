"""Replay speed of the cassette store: 1,000 entities x 32 prompts, ~1.5 KB replies.

Run from the repository root:

    .venv/bin/python benchmarks/bench_cassettes.py [--entities 1000] [--prompts 32] [--runs 5]

Measures, as medians of ``--runs`` runs, wall time and the process's CPU time (other jobs
on a shared machine inflate the first, not the second):

- ``store``: load + index + replay of every interaction through an ``httpx.AsyncClient``
  with ``CassetteTransport`` (8 requests in flight, as the provider runner does), from a
  fresh store each run, so file loading is included;
- ``run_cases``: the same through ``pytest_recfair.providers.run_cases`` (the path the
  plugin uses: its replay pass serves hits from the cassette transport's lookup without
  an AsyncClient), from a fresh store each run; every reply is checked;
- ``load + index``: ``CassetteStore.can_replay`` of every entity, which loads and indexes
  its file (part of ``store``);
- ``httpx floor``: the same client and requests against a transport that finds each
  reply in a dict already in memory (no cassette at all): the cost of httpx itself;
- ``vcrpy``: vcrpy's own replay through httpx (per-entity cassettes, matching method,
  host, path and raw body bytes) of ``--vcr-entities`` entities, extrapolated linearly
  to all entities: the in-run reference for the ratio.

Then the two file formats (issue 24): the size of the cassettes as plain ``.json`` and as
compact ``.json.gz`` (``python -m pytest_recfair cassettes compact``), and the load +
index time of each. The reference is the plain format, measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from _machine import cpu_model

from pytest_recfair.cassettes import cache, compact
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.cassettes.vcrfile import RecordedRequest, RecordedResponse
from pytest_recfair.providers.transport import CassetteTransport

TEST_ID = "tests/test_fairness.py::test_movie_recommender[gpt-4o]"
URL = "https://api.openai.com/v1/chat/completions"
VALUES = [f"value-{i}" for i in range(64)]


Timing = tuple[float, float]  # (wall seconds, CPU seconds of this process)


def clock() -> Timing:
    return time.perf_counter(), time.process_time()


def since(start: Timing) -> Timing:
    # CPU time too: on a shared machine other jobs inflate wall time, not our CPU time.
    return time.perf_counter() - start[0], time.process_time() - start[1]


def request_body(entity: int, prompt: int) -> bytes:
    who = "" if prompt == 0 else f"I am a {VALUES[prompt % len(VALUES)]} person. "
    payload = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are a movie recommendation system. " * 4},
            {
                "role": "user",
                "content": f"{who}I am a fan of Director Number {entity}. Please provide me "
                "with a list of 25 movie titles in order of preference that you think I "
                f"might like. Just provide me the names of the movies. (variant {prompt})",
            },
        ],
        # Same fields, order and encoding as OpenAIProvider.build_request, so run_cases
        # replays these recordings byte for byte.
        "temperature": 0.0,
        "max_tokens": 800,
    }
    return json.dumps(payload, separators=(",", ":")).encode()


def reply_body(entity: int, prompt: int) -> bytes:
    titles = [
        f"{i}. The Remarkable Film {entity}-{prompt}-{i}: Part {i} (19{i:02d})"
        for i in range(1, 26)
    ]
    payload = {
        "id": f"chatcmpl-{entity}-{prompt}",
        "object": "chat.completion",
        "created": 1760727600,
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Here are some films you might enjoy:\n" + "\n".join(titles),
                },
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 93, "completion_tokens": 412, "total_tokens": 505},
    }
    return json.dumps(payload, separators=(",", ":")).encode()


def build(root: Path, n_entities: int, n_prompts: int) -> float:
    store = CassetteStore(root, "new_episodes", secrets=["sk-bench-not-a-real-key"])
    for e in range(n_entities):
        for p in range(n_prompts):
            store.record(
                TEST_ID,
                f"entity-{e}",
                RecordedRequest(
                    "POST",
                    URL,
                    (("content-type", "application/json"), ("authorization", "Bearer sk-x")),
                    request_body(e, p),
                ),
                RecordedResponse(
                    200, (("content-type", "application/json"),), reply_body(e, p), "OK"
                ),
            )
    t0 = clock()
    store.flush()
    return since(t0)[0]


Row = tuple[float, float, list[float]]  # median wall, median CPU, every wall time


async def drive(client: httpx.AsyncClient, n_entities: int, n_prompts: int) -> None:
    # 8 workers draining one list of requests: 8 in flight, like the provider runner.
    todo = iter([(e, p, request_body(e, p)) for e in range(n_entities) for p in range(n_prompts)])
    headers = {"content-type": "application/json", "authorization": "Bearer sk-x"}

    async def worker() -> None:
        for e, p, body in todo:
            # Built like Provider.build_request does, then sent with client.send().
            request = httpx.Request(
                "POST",
                URL,
                content=body,
                headers=headers,
                extensions={"recfair_entity_id": f"entity-{e}", "recfair_repeat": 0},
            )
            r = await client.send(request)
            r.raise_for_status()
            if r.json()["id"] != f"chatcmpl-{e}-{p}":
                raise AssertionError(f"wrong reply for entity {e} prompt {p}")

    await asyncio.gather(*(worker() for _ in range(8)))


def time_store(root: Path, n_entities: int, n_prompts: int) -> Timing:
    async def main() -> Timing:
        t0 = clock()
        store = CassetteStore(root, "none")
        async with httpx.AsyncClient(transport=CassetteTransport(store, TEST_ID)) as client:
            await drive(client, n_entities, n_prompts)
        return since(t0)

    return asyncio.run(main())


def time_load(root: Path, n_entities: int) -> Timing:
    t0 = clock()
    store = CassetteStore(root, "none")
    loaded = sum(store.can_replay(TEST_ID, f"entity-{e}") for e in range(n_entities))
    assert loaded == n_entities
    return since(t0)


def time_floor(n_entities: int, n_prompts: int) -> Timing:
    # The ideal cassette: every reply already in memory, found by one dict lookup.
    replies = {
        request_body(e, p): reply_body(e, p) for e in range(n_entities) for p in range(n_prompts)
    }

    class Canned(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, stream=httpx.ByteStream(replies[request.content]))

    async def main() -> Timing:
        t0 = clock()
        async with httpx.AsyncClient(transport=Canned()) as client:
            await drive(client, n_entities, n_prompts)
        return since(t0)

    return asyncio.run(main())


@dataclass(frozen=True)
class Case:
    """The fields run_cases reads from a prompts.PromptCase."""

    id: str
    system: str | None
    prompt: str
    entity_id: str
    repeat: int


def time_run_cases(root: Path, n_entities: int, n_prompts: int) -> Timing | None:
    try:
        from pytest_recfair.providers import from_config, run_cases
    except ImportError:
        return None
    cases = []
    for e in range(n_entities):
        for p in range(n_prompts):
            msgs = json.loads(request_body(e, p))["messages"]
            cases.append(
                Case(f"e{e}-p{p}", msgs[0]["content"], msgs[1]["content"], f"entity-{e}", 0)
            )
    provider = from_config(
        "openai",
        model="gpt-4o",
        base_url="https://api.openai.com/v1",
        api_key_env="",
        temperature=0.0,
        max_tokens=800,
    )
    t0 = clock()
    store = CassetteStore(root, "none")
    outcome = run_cases(provider, cases, cassettes=store, test_id=TEST_ID, progress=False)
    elapsed = since(t0)
    if outcome.errors or len(outcome.completions) != len(cases):
        first = next(iter(outcome.errors.items()), None)
        raise AssertionError(f"run_cases: {len(outcome.errors)} errors, e.g. {first}")
    for case in cases:  # every case got its own reply, not a neighbour's
        e, p = case.id[1:].split("-p")
        if f"The Remarkable Film {e}-{p}-1:" not in outcome.completions[case.id].text:
            raise AssertionError(f"run_cases: wrong reply for {case.id}")
    return elapsed


def time_vcrpy(root: Path, n_entities: int, n_prompts: int) -> Timing:
    import vcr

    # The cheapest body matcher there is (raw bytes equality), to give vcrpy its best case.
    def body_matcher(r1: Any, r2: Any) -> None:
        if r1.body != r2.body:
            raise AssertionError("bodies differ")

    my_vcr = vcr.VCR(serializer="json", record_mode="none")
    my_vcr.register_matcher("raw_body", body_matcher)
    store = CassetteStore(root, "none")

    async def main() -> Timing:
        t0 = clock()
        async with httpx.AsyncClient() as client:
            for e in range(n_entities):
                path = store.path_for(f"entity-{e}")
                with my_vcr.use_cassette(
                    str(path), match_on=("method", "host", "path", "raw_body")
                ):
                    sem = asyncio.Semaphore(8)
                    await _drive_entity(client, sem, e, n_prompts)
        return since(t0)

    return asyncio.run(main())


async def _drive_entity(
    client: httpx.AsyncClient, sem: asyncio.Semaphore, e: int, n_prompts: int
) -> None:
    async def one(p: int) -> None:
        async with sem:
            r = await client.post(
                URL,
                content=request_body(e, p),
                headers={"content-type": "application/json"},
            )
            if r.json()["id"] != f"chatcmpl-{e}-{p}":
                raise AssertionError(f"vcrpy: wrong reply for entity {e} prompt {p}")

    await asyncio.gather(*(one(p) for p in range(n_prompts)))


def formats(root: Path, n_entities: int, runs: int) -> list[tuple[str, Row]]:
    """Sizes and load times of the plain and the compact format (see the docstring)."""
    packed = root.with_name(root.name + "-compact")
    shutil.copytree(root, packed, ignore=shutil.ignore_patterns(cache.CACHE_DIR))
    done = compact.convert(packed, compact=True)
    print(
        f"formats: plain {done.before / 1e6:.2f} MB, compact {done.after / 1e6:.2f} MB "
        f"(x{done.before / done.after:.1f}; {done.after / n_entities * 1000 / 1e6:.2f} MB "
        "per 1,000 entities)"
    )
    rows: list[tuple[str, Row]] = []
    for name, folder in (("plain", root), ("compact", packed)):
        row = median_of(runs, lambda folder=folder: time_load(folder, n_entities))
        assert row is not None
        rows.append((f"load+index {name}", row))
    shutil.rmtree(packed)
    return rows


def median_of(runs: int, fn: Callable[[], Timing | None]) -> Row | None:
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(runs):
        t = fn()
        if t is None:
            return None
        walls.append(t[0])
        cpus.append(t[1])
    return statistics.median(walls), statistics.median(cpus), walls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entities", type=int, default=1000)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--vcr-entities", type=int, default=25)
    ap.add_argument("--target", type=float, default=5.0, help="seconds for the store replay")
    ap.add_argument("--formats-only", action="store_true", help="only the two formats' rows")
    args = ap.parse_args()
    if args.formats_only:
        with tempfile.TemporaryDirectory() as tmp:
            build(Path(tmp), args.entities, args.prompts)
            rows = formats(Path(tmp), args.entities, args.runs)
        for name, (wall, cpu, runs) in rows:
            shown = ", ".join(f"{t:.2f}" for t in runs)
            print(f"{name:34} {wall:7.2f} {cpu:7.2f}  [{shown}]")
        print(f"load average at end: {os.getloadavg()[0]:.1f}")
        return
    n = args.entities * args.prompts

    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"httpx {httpx.__version__}; load average at start: {os.getloadavg()[0]:.1f}")
    print(f"workload: {args.entities} entities x {args.prompts} prompts = {n} interactions")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        flush_s = build(root, args.entities, args.prompts)
        size = sum(f.stat().st_size for f in root.rglob("*.json"))
        print(
            f"recorded in {time.perf_counter() - t0:.2f} s (flush of {args.entities} files: "
            f"{flush_s:.2f} s), {size / 1e6:.1f} MB on disk"
        )

        rows: list[tuple[str, Row]] = []
        store = median_of(args.runs, lambda: time_store(root, args.entities, args.prompts))
        assert store is not None
        rows.append(("store (load+index+replay)", store))
        load = median_of(args.runs, lambda: time_load(root, args.entities))
        assert load is not None
        rows.append(("  of which load + index", load))
        rc = median_of(args.runs, lambda: time_run_cases(root, args.entities, args.prompts))
        if rc is not None:
            rows.append(("run_cases + store", rc))
        else:
            print("run_cases: not available (pytest_recfair.providers.run_cases missing)")
        floor = median_of(args.runs, lambda: time_floor(args.entities, args.prompts))
        assert floor is not None
        rows.append(("httpx floor (no cassette)", floor))

        # vcrpy is slow: a subset, extrapolated linearly (per-entity files: linear in entities).
        vcr_n = min(args.vcr_entities, args.entities)
        vres = median_of(max(1, args.runs // 2), lambda: time_vcrpy(root, vcr_n, args.prompts))
        assert vres is not None
        scale = args.entities / vcr_n
        vcr_full: Row = (vres[0] * scale, vres[1] * scale, [t * scale for t in vres[2]])
        print(
            f"vcrpy replay of {vcr_n} entities ({vcr_n * args.prompts} interactions): "
            f"median {vres[0]:.2f} s wall -> extrapolated x{scale:g} to {n}"
        )
        rows.append((f"vcrpy (extrapolated x{scale:g})", vcr_full))
        rows += formats(root, args.entities, args.runs)

    print()
    print(f"{'path':34} {'wall s':>7} {'cpu s':>7} {'us/req':>7}  wall runs")
    for name, (wall, cpu, runs) in rows:
        shown = ", ".join(f"{t:.2f}" for t in runs)
        print(f"{name:34} {wall:7.2f} {cpu:7.2f} {wall / n * 1e6:7.1f}  [{shown}]")
    print()
    print(
        f"ratio vcrpy / store: {vcr_full[0] / store[0]:.1f}x (wall), "
        f"{vcr_full[1] / store[1]:.1f}x (cpu)"
    )
    if rc is not None:
        print(f"ratio vcrpy / run_cases + store: {vcr_full[0] / rc[0]:.1f}x (wall)")
    print(
        f"store above the httpx floor: {store[0] - floor[0]:.2f} s wall, "
        f"{store[1] - floor[1]:.2f} s cpu"
    )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    verdict = "PASS" if store[0] < args.target else "FAIL"
    print(
        f"target: store replay < {args.target:.1f} s wall -> {verdict} ({store[0]:.2f} s; "
        f"cpu {store[1]:.2f} s)"
    )
    if rc is not None:
        verdict = "PASS" if rc[0] < args.target else "FAIL"
        print(
            f"target: run_cases replay < {args.target:.1f} s wall -> {verdict} "
            f"({rc[0]:.2f} s; cpu {rc[1]:.2f} s)"
        )


if __name__ == "__main__":
    main()
