"""Live-mode throughput against the simulated recommender, and a run with injected faults.

    .venv/bin/python benchmarks/bench_live.py [--runs 5] [--requests 1280]

Part 1 — throughput. The simulator runs in its own process (``python -m pytest_recfair.sim
--latency 200``), as a real server would. ``providers.run_cases(concurrency=64,
cassettes=CassetteStore(tmp, mode="once"))`` sends N requests; with 200 ms per answer and
64 in flight the ideal rate is 64 / 0.2 = 320 requests/s. Two references are measured in
the same run: a hand-written asyncio HTTP/1.1 client with 64 keep-alive connections
against the same server (what the server delivers when the client costs next to nothing)
and 64 asyncio tasks that only sleep 200 ms (the scheduling floor of this machine). Plain
httpx is measured too, with one AsyncClient of 64 connections and with four of 16
(sniffio is a dependency: without it httpcore's failed ``import sniffio`` on every lock
re-searches sys.path and costs every httpx client a third of its CPU). CPU seconds
per request of the server process and of the client are reported too. Medians of
``--runs`` runs.

Part 2 — faults. 429 (8%), 500 (7%) and hanging timeouts (5%) = 20% of requests fail; the
audit must complete without errors and every prompt must be in the cassette exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _machine import cpu_model  # noqa: E402

from pytest_recfair.cassettes.store import CassetteStore  # noqa: E402
from pytest_recfair.prompts.cases import PromptCase, build_cases  # noqa: E402
from pytest_recfair.prompts.seeds import load_seeds  # noqa: E402
from pytest_recfair.providers import from_config, run_cases  # noqa: E402
from pytest_recfair.sim.recommender import SimulatedRecommender  # noqa: E402
from pytest_recfair.sim.server import SimServer  # noqa: E402

LATENCY_S = 0.2
CONCURRENCY = 64
IDEAL_RPS = CONCURRENCY / LATENCY_S  # 320
TARGET = 0.90


def machine() -> str:
    return (
        f"{cpu_model()}; {os.cpu_count()} cores; Python {platform.python_version()} "
        f"({platform.python_implementation()}); {platform.system()} {platform.release()}"
    )


def make_cases(n: int) -> list[PromptCase]:
    per_entity = len(build_cases("faireval", "natural", ["x"], k=25))
    entities = load_seeds("directors")[: -(-n // per_entity)]
    cases = build_cases("faireval", "natural", entities, k=25)
    return cases[:n]


class ServerProcess:
    """``python -m pytest_recfair.sim`` in a child process; the URL comes from its banner."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pytest_recfair.sim", "--port", "0", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        banner = self.proc.stdout.readline()
        if "listening on" not in banner:
            self.proc.kill()
            raise RuntimeError(f"simulator did not start: {banner!r}")
        self.base_url = banner.split("listening on ", 1)[1].split()[0]

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def run_client(base_url: str, cases: Sequence[PromptCase], root: Path) -> tuple[float, Any]:
    provider = from_config("openai", model="recfair-sim-1", base_url=base_url, api_key_env="")
    store = CassetteStore(root, mode="once")
    started = time.perf_counter()
    outcome = run_cases(
        provider,
        cases,
        concurrency=CONCURRENCY,
        timeout=10.0,
        cassettes=store,
        test_id="bench_live",
        progress=False,
    )
    store.flush()
    return time.perf_counter() - started, outcome


async def raw_client(base_url: str, cases: Sequence[PromptCase]) -> float:
    """64 keep-alive connections speaking HTTP/1.1 by hand (stdlib asyncio): what the
    server delivers when the client costs next to nothing."""
    host, port = base_url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for case in cases:
        body = json.dumps(
            {
                "model": "recfair-sim-1",
                "messages": [
                    {"role": "system", "content": case.system},
                    {"role": "user", "content": case.prompt},
                ],
                "temperature": 0,
            }
        ).encode()
        queue.put_nowait(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json"
            + f"\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        while not queue.empty():
            writer.write(queue.get_nowait())
            status = await reader.readline()
            if b" 200 " not in status:
                raise RuntimeError(f"simulator answered {status!r}")
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            json.loads(await reader.readexactly(length))
        writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return time.perf_counter() - started


async def httpx_client(base_url: str, cases: Sequence[PromptCase], shards: int) -> float:
    """Plain httpx with 64 requests in flight over ``shards`` AsyncClients (64 / shards
    connections each): httpcore's pool does O(connections) work per request event, so
    one client with 64 connections spends far more CPU than four with 16."""
    per = CONCURRENCY // shards
    limits = httpx.Limits(max_connections=per, max_keepalive_connections=per)
    clients = [
        httpx.AsyncClient(base_url=base_url, timeout=10.0, limits=limits) for _ in range(shards)
    ]
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int, case: PromptCase) -> None:
        async with sem:
            body = {
                "model": "recfair-sim-1",
                "messages": [
                    {"role": "system", "content": case.system},
                    {"role": "user", "content": case.prompt},
                ],
                "temperature": 0,
            }
            r = await clients[i % shards].post("/chat/completions", json=body)
            r.raise_for_status()
            r.json()

    started = time.perf_counter()
    try:
        await asyncio.gather(*(one(i, c) for i, c in enumerate(cases)))
    finally:
        for client in clients:
            await client.aclose()
    return time.perf_counter() - started


def cpu_seconds(pid: int) -> float:
    """user + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def sleep_floor(n: int) -> float:
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one() -> None:
        async with sem:
            await asyncio.sleep(LATENCY_S)

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return time.perf_counter() - started


def throughput(runs: int, n: int) -> dict[str, Any]:
    cases = make_cases(n)
    server = ServerProcess("--latency", str(LATENCY_S * 1000), "--bias", "demo")
    pid = server.proc.pid
    client_s, raw_s, floor_s, client_cpu, server_cpu = [], [], [], [], []
    httpx1_s: list[float] = []
    httpx4_s: list[float] = []
    try:
        for i in range(runs):
            # Every run sends prompts the server has not seen: recognition and catalogues
            # are paid each time, as in a real audit.
            batch = make_cases(n * (i + 2))[n * (i + 1) :]
            before_server, before_client = cpu_seconds(pid), time.process_time()
            with tempfile.TemporaryDirectory() as tmp:
                elapsed, outcome = run_client(server.base_url, batch, Path(tmp))
            client_cpu.append((time.process_time() - before_client) / len(batch))
            server_cpu.append((cpu_seconds(pid) - before_server) / len(batch))
            if outcome.errors or len(outcome.completions) != len(batch):
                raise RuntimeError(
                    f"run {i}: {len(outcome.errors)} errors, e.g. "
                    f"{next(iter(outcome.errors.values()), '')}"
                )
            client_s.append(elapsed)
            raw_s.append(asyncio.run(raw_client(server.base_url, cases)))
            httpx1_s.append(asyncio.run(httpx_client(server.base_url, cases, 1)))
            httpx4_s.append(asyncio.run(httpx_client(server.base_url, cases, 4)))
            floor_s.append(asyncio.run(sleep_floor(len(cases))))
    finally:
        server.close()
    med = statistics.median
    return {
        "requests": len(cases),
        "run_cases_s": client_s,
        "raw_client_s": raw_s,
        "sleep_floor_s": floor_s,
        "run_cases_rps": len(cases) / med(client_s),
        "raw_client_rps": len(cases) / med(raw_s),
        "httpx1_s": httpx1_s,
        "httpx4_s": httpx4_s,
        "httpx1_rps": len(cases) / med(httpx1_s),
        "httpx4_rps": len(cases) / med(httpx4_s),
        "sleep_floor_rps": len(cases) / med(floor_s),
        "client_cpu_ms": 1000 * med(client_cpu),
        "server_cpu_ms": 1000 * med(server_cpu),
    }


def with_faults(n: int) -> dict[str, Any]:
    cases = make_cases(n)
    faults = {
        "rate_429": 0.08,
        "retry_after": 0.2,
        "rate_500": 0.07,
        "rate_timeout": 0.05,
        "timeout_mode": "hang",
        "hang_s": 60.0,
    }
    # In-process so its fault counters can be read; throughput is not measured here.
    with (
        SimServer(SimulatedRecommender("demo"), latency_ms=LATENCY_S * 1000, faults=faults) as srv,
        tempfile.TemporaryDirectory() as tmp,
    ):
        provider = from_config(
            "openai", model="recfair-sim-1", base_url=srv.base_url, api_key_env=""
        )
        store = CassetteStore(Path(tmp), mode="once")
        started = time.perf_counter()
        outcome = run_cases(
            provider,
            cases,
            concurrency=CONCURRENCY,
            timeout=2.0,
            max_retries=5,
            cassettes=store,
            test_id="bench_live_faults",
            progress=False,
        )
        elapsed = time.perf_counter() - started
        store.flush()
        recorded: Counter[tuple[str, str]] = Counter()
        statuses: Counter[int] = Counter()
        for path in Path(tmp).rglob("*.json"):
            for item in json.loads(path.read_text(encoding="utf-8"))["interactions"]:
                body = json.loads(item["request"]["body"])
                prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
                repeat = item["request"]["headers"].get("x-recfair-repeat", ["0"])[0]
                recorded[(prompt, repeat)] += 1
                statuses[item["response"]["status"]["code"]] += 1
        stats = srv.stats.as_dict()
    expected = Counter((c.prompt, str(c.repeat)) for c in cases)
    return {
        "requests": len(cases),
        "elapsed_s": elapsed,
        "errors": len(outcome.errors),
        "completions": len(outcome.completions),
        "http_requests": outcome.requests,
        "retries": outcome.retries,
        "server": stats,
        "recorded_interactions": sum(recorded.values()),
        "every_prompt_exactly_once": recorded == expected,
        "recorded_statuses": dict(statuses),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=20 * CONCURRENCY)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    load_before = os.getloadavg()
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    t = throughput(args.runs, args.requests)
    ratio = t["run_cases_rps"] / IDEAL_RPS
    print(
        f"\n[throughput] {t['requests']} requests, latency {LATENCY_S * 1000:.0f} ms, "
        f"{CONCURRENCY} in flight, {args.runs} runs (medians)"
    )
    print(
        f"  run_cases + cassettes : {t['run_cases_rps']:7.1f} req/s  "
        f"= {ratio:.1%} of ideal {IDEAL_RPS:.0f}  (target >= {TARGET:.0%}: "
        f"{'PASS' if ratio >= TARGET else 'FAIL'})"
    )
    print(
        f"  raw asyncio client    : {t['raw_client_rps']:7.1f} req/s  "
        f"= {t['raw_client_rps'] / IDEAL_RPS:.1%} of ideal  (server capacity reference)"
    )
    for shards in (1, 4):
        rps = t[f"httpx{shards}_rps"]
        print(
            f"  httpx, {shards} client(s) x {CONCURRENCY // shards:<2}: {rps:7.1f} req/s  "
            f"= {rps / IDEAL_RPS:.1%} of ideal"
        )
    print(
        f"  asyncio sleep floor   : {t['sleep_floor_rps']:7.1f} req/s  "
        f"= {t['sleep_floor_rps'] / IDEAL_RPS:.1%} of ideal  (scheduling floor)"
    )
    print(f"  run_cases / raw client = {t['run_cases_rps'] / t['raw_client_rps']:.3f}")
    print(
        f"  CPU per request: server {t['server_cpu_ms']:.2f} ms (new prompts), "
        f"client (run_cases + cassettes) {t['client_cpu_ms']:.2f} ms"
    )
    print(
        "  runs (s): run_cases "
        + ", ".join(f"{x:.2f}" for x in t["run_cases_s"])
        + " | raw "
        + ", ".join(f"{x:.2f}" for x in t["raw_client_s"])
        + " | httpx x1 "
        + ", ".join(f"{x:.2f}" for x in t["httpx1_s"])
        + " | httpx x4 "
        + ", ".join(f"{x:.2f}" for x in t["httpx4_s"])
    )
    print(f"  load average before/after: {load_before} / {os.getloadavg()}")
    f = with_faults(args.requests)
    print(
        f"\n[faults] {f['requests']} prompts, 20% injected (429 8%, 500 7%, hang 5%), "
        f"client timeout 2 s, max_retries 5"
    )
    print(
        f"  completed in {f['elapsed_s']:.1f} s; errors {f['errors']}; "
        f"completions {f['completions']}/{f['requests']}; HTTP requests {f['http_requests']} "
        f"(retries {f['retries']})"
    )
    print(f"  server outcomes: {f['server']}")
    print(
        f"  cassette: {f['recorded_interactions']} interactions, statuses "
        f"{f['recorded_statuses']}, every prompt exactly once: {f['every_prompt_exactly_once']}"
    )
    ok = ratio >= TARGET and f["errors"] == 0 and f["every_prompt_exactly_once"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
