"""Replay cost of a pipeline audit (issue 32): a Python pipeline on the official OpenAI SDK
(retrieve, prompt, call, parse, re-rank) given ``recfair_http_client``, replayed from its
cassettes, against the same pipeline whose SDK client has an in-memory
``httpx2.MockTransport`` (the SDK's own cost: the floor), at N entities x 31 prompts.

The project is generated once (``--cache DIR`` keeps it): seeds, the pipeline conftest,
and a recording run against the loopback simulator (``--fairness-record=all``). Then each
round runs, in turn: the bare pytest run (no ``--fairness``), the replay, and the mock run;
medians of ``--runs`` rounds with per-round ratios (replay / mock). Target: replay at most
x1.5 the mock run at 1,000 entities.

    .venv/bin/python benchmarks/bench_pipeline.py --entities 1000 --runs 5 --cache DIR
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_recfair.sim.recommender import SimulatedRecommender  # noqa: E402
from pytest_recfair.sim.server import SimServer  # noqa: E402

KEY = "sk-bench-0123456789abcdefghijklmnop"

CONFTEST = """
import json
import os
import zlib

import httpx2
import pytest
from openai import OpenAI

from pytest_recfair.providers import CallableProvider

CATALOGUE = [f"Film {i}" for i in range(500)]
CANNED = json.dumps({
    "id": "chatcmpl-mock", "object": "chat.completion", "created": 0, "model": "recfair-sim",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
        "content": "\\n".join(f"{i}. Film {i * 7 % 500}" for i in range(1, 26))}}],
    "usage": {"prompt_tokens": 60, "completion_tokens": 200, "total_tokens": 260},
}).encode()


def _mock(request):
    return httpx2.Response(200, headers={"content-type": "application/json"}, content=CANNED)


@pytest.fixture(scope="session")
def recfair_recommender(recfair_http_client):
    if os.environ["BENCH_CLIENT"] == "mock":
        http = httpx2.Client(transport=httpx2.MockTransport(_mock))
    else:
        http = recfair_http_client
    client = OpenAI(base_url=os.environ["BENCH_URL"], api_key=os.environ["BENCH_KEY"],
                    http_client=http, max_retries=0)

    def recommend(prompt: str) -> list[str]:
        shortlist = CATALOGUE[zlib.crc32(prompt.encode()) % 400:][:50]  # retrieval (stand-in)
        reply = client.chat.completions.create(
            model="recfair-sim", temperature=0,
            messages=[{"role": "system", "content": "Recommend from: " + ", ".join(shortlist[:5])},
                      {"role": "user", "content": prompt}])
        text = reply.choices[0].message.content or ""
        items = [line.split(". ", 1)[-1] for line in text.splitlines() if line.strip()]
        return sorted(items, key=lambda t: t not in shortlist)  # re-rank: shortlist first

    return CallableProvider(recommend, model="bench-pipeline")
"""

TEST = """
from pytest_recfair import fairness


@fairness(seeds="seeds.txt", metric="all", k=25)
def test_pipeline_scale():
    pass
"""


def generate(root: Path, n: int) -> None:
    if (root / "generated.txt").is_file():
        return
    names = [f"Bench Director {i:04d}" for i in range(n)]
    (root / "seeds.txt").write_text("\n".join(names) + "\n", encoding="utf-8")
    (root / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (root / "test_pipeline.py").write_text(TEST, encoding="utf-8")
    (root / "pytest.ini").write_text(
        "[pytest]\nrecfair_max_requests = 10000000\nrecfair_concurrency = 8\n", encoding="utf-8"
    )
    t0 = time.perf_counter()
    with SimServer(SimulatedRecommender(bias="demo", seed=0), api_key=KEY) as server:
        code, _, out = run(
            root,
            server.base_url,
            "recfair",
            "--fairness",
            "--fairness-record=all",
            "--fairness-update",
        )
        sent = server.stats.requests
    if code != 0:
        raise SystemExit(f"recording failed:\n{out}")
    print(f"  recorded {sent} requests in {time.perf_counter() - t0:.0f} s", flush=True)
    (root / "generated.txt").write_text(str(sent))


def run(root: Path, url: str, client: str, *args: str) -> tuple[int, float, str]:
    """(exit code, CPU seconds of the child, output tail) of one pytest child."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "BENCH_URL": url, "BENCH_CLIENT": client}
    env["BENCH_KEY"] = KEY
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    before = os.times()
    done = subprocess.run([*cmd, *args], cwd=root, env=env, capture_output=True, text=True)
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return done.returncode, cpu, (done.stdout + done.stderr)[-2000:]


def timed(root: Path, client: str, *args: str) -> tuple[float, float]:
    t0 = time.perf_counter()
    code, cpu, out = run(root, "http://127.0.0.1:9/v1", client, *args)
    wall = time.perf_counter() - t0
    if code not in (0, 1, 5) or (code == 1 and "passed" not in out and "failed" not in out):
        raise SystemExit(f"{client} run failed ({code}):\n{out}")
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entities", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cache", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="recfair-pipeline-") as tmp:
        root = (args.cache or Path(tmp)) / f"pipeline-{args.entities}"
        root.mkdir(parents=True, exist_ok=True)
        generate(root, args.entities)
        rows: dict[str, list[tuple[float, float]]] = {"bare": [], "replay": [], "mock": []}
        for i in range(args.runs):
            rows["bare"].append(timed(root, "mock"))
            rows["replay"].append(timed(root, "recfair", "--fairness"))
            # the same audit of the mock's canned lists (its gate may fail: exit 1 is fine)
            rows["mock"].append(timed(root, "mock", "--fairness"))
            print(
                f"  round {i + 1}: "
                + ", ".join(
                    f"{k} {v[-1][0]:.2f} s ({v[-1][1]:.2f} s CPU)" for k, v in rows.items()
                ),
                flush=True,
            )
        ratios_wall = [r[0] / m[0] for r, m in zip(rows["replay"], rows["mock"], strict=True)]
        ratios_cpu = [r[1] / m[1] for r, m in zip(rows["replay"], rows["mock"], strict=True)]
        print(f"{args.entities} entities x 31 prompts, medians of {args.runs} rounds:")
        for name, values in rows.items():
            wall = statistics.median(v[0] for v in values)
            cpu = statistics.median(v[1] for v in values)
            print(f"  {name:7s} {wall:7.2f} s wall  {cpu:7.2f} s CPU")
        print(
            f"  replay / mock: x{statistics.median(ratios_wall):.2f} wall, "
            f"x{statistics.median(ratios_cpu):.2f} CPU (per-round medians)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
