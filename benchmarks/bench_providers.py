"""Benchmarks of the providers runner: overhead per case, live throughput, reply parsing.

Run:  .venv/bin/python benchmarks/bench_providers.py [--repeats 5] [--cases 2000]

Every figure is the median of several runs, next to a reference measured in the same run
on the same machine (the machine is shared and noisy, so ratios travel better than
absolute numbers):

1. runner overhead: run_cases over an instant in-process transport vs. bare httpx
   (AsyncClient + Semaphore + gather) over the same transport, no retries, no parsing.
2. live throughput: run_cases against the simulator on 127.0.0.1 with fixed latency vs.
   the ideal concurrency / latency, and vs. bare httpx against the same server.
3. parsing: OpenAIProvider.parse_response on the recorded gpt-4o reply vs. json.loads of
   the same body.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _machine import cpu_model

from pytest_recfair.providers import from_config, run_cases
from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer


@dataclass(frozen=True)
class Case:
    id: str
    prompt: str
    entity_id: str
    repeat: int = 0
    system: str | None = "You are a movie recommender."


def cases(n: int) -> list[Case]:
    return [Case(f"c{i}", f"I am a fan of director {i % 97}. List 25 movies. #{i}", f"e{i % 97}")
            for i in range(n)]  # fmt: skip


REPLY = json.dumps(
    {
        "model": "bench",
        "choices": [
            {"message": {"content": "\n".join(f"{i}. Movie {i}" for i in range(1, 26))},
             "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 120},
    }
).encode()  # fmt: skip


def instant(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=REPLY, headers={"content-type": "application/json"})


def median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def paired(
    reference: Callable[[], object], candidate: Callable[[], object], repeats: int
) -> tuple[float, float, float]:
    """Median times of both and the median of per-pair ratios. The two are interleaved,
    run by run, so a load change on the shared machine hits both alike."""
    ref, cand = [], []
    for _ in range(repeats):
        ref.append(median_time(reference, 1))
        cand.append(median_time(candidate, 1))
    ratio = statistics.median(c / r for c, r in zip(cand, ref, strict=True))
    return statistics.median(ref), statistics.median(cand), ratio


def bare_httpx(
    base_url: str, transport: httpx.AsyncBaseTransport | None, n: int, conc: int
) -> None:
    """The reference: what a minimal hand-written client does, no retries or parsing."""
    provider = from_config("openai", model="bench", base_url=base_url)
    todo = cases(n)

    async def main() -> None:
        sem = asyncio.Semaphore(conc)
        async with httpx.AsyncClient(transport=transport, timeout=60) as client:

            async def one(case: Case) -> None:
                async with sem:
                    response = await client.send(provider.build_request(case.system, case.prompt))
                    response.raise_for_status()

            await asyncio.gather(*(one(c) for c in todo))

    asyncio.run(main())


def ours(base_url: str, transport: httpx.AsyncBaseTransport | None, n: int, conc: int) -> None:
    provider = from_config("openai", model="bench", base_url=base_url)
    outcome = run_cases(provider, cases(n), concurrency=conc, progress=False, transport=transport)
    assert not outcome.errors, next(iter(outcome.errors.values()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--live-cases", type=int, default=400)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()

    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"httpx {httpx.__version__}")  # fmt: skip
    print(f"median of {args.repeats} runs each\n")

    # 1. runner overhead over an instant in-process transport
    mock = httpx.MockTransport(instant)
    base = "http://127.0.0.1:9/v1"
    n = args.cases
    t_ref, t_ours, ratio = paired(
        lambda: bare_httpx(base, mock, n, 8), lambda: ours(base, mock, n, 8), args.repeats
    )
    print(f"1. runner overhead, {n} cases, concurrency 8, instant mock transport")
    print(f"   bare httpx (reference): {t_ref:.3f} s  = {n / t_ref:,.0f} cases/s "
          f"({1e6 * t_ref / n:.0f} us/case)")  # fmt: skip
    print(f"   run_cases:              {t_ours:.3f} s  = {n / t_ours:,.0f} cases/s "
          f"({1e6 * t_ours / n:.0f} us/case)")  # fmt: skip
    print(f"   ratio run_cases / bare httpx (median of paired runs): {ratio:.2f}x\n")

    # 2. live throughput against the simulator over loopback
    m = args.live_cases
    latency = args.latency_ms / 1000
    print(f"2. live throughput, {m} cases, simulator latency {args.latency_ms:g} ms on 127.0.0.1")
    with SimServer(SimulatedRecommender(seed=0), latency_ms=args.latency_ms) as server:
        for conc in (8, 32):
            ideal = m * latency / conc
            url = server.base_url
            r_ref, r_ours, r_ratio = paired(
                lambda: bare_httpx(url, None, m, conc),  # noqa: B023
                lambda: ours(url, None, m, conc),  # noqa: B023
                args.repeats,
            )
            print(
                f"   concurrency {conc:2d}: ideal {ideal:.2f} s; bare httpx {r_ref:.2f} s "
                f"({m / r_ref:.0f}/s); run_cases {r_ours:.2f} s ({m / r_ours:.0f}/s)"
            )
            print(
                f"      ratios: run_cases/ideal {r_ours / ideal:.2f}x, "
                f"run_cases/bare httpx {r_ratio:.2f}x (paired)"
            )
    print()

    # 3. parsing a recorded reply
    path = Path("/work/shared/real-cassettes/openai_chat_completions_gpt-4o.yaml")
    import gzip

    import yaml

    body = yaml.safe_load(path.read_text())["interactions"][0]["response"]["body"]["string"]
    raw = gzip.decompress(body)
    request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions")
    response = httpx.Response(200, content=raw, request=request,
                              headers={"content-type": "application/json"})  # fmt: skip
    provider = from_config("openai", model="gpt-4o", api_key_env="")
    loops = 20000
    p_ref, p_ours, p_ratio = paired(
        lambda: [json.loads(raw) for _ in range(loops)],
        lambda: [provider.parse_response(response) for _ in range(loops)],
        args.repeats,
    )
    print(f"3. parse the recorded gpt-4o reply ({len(raw)} bytes), {loops} times")
    print(f"   json.loads (reference): {1e6 * p_ref / loops:.1f} us each")
    print(f"   parse_response:         {1e6 * p_ours / loops:.1f} us each; "
          f"ratio {p_ratio:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
