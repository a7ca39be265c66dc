"""Paper-scale audit replayed from cassettes through ``pytest --fairness``.

1,000 entities x (31 values + neutral) = 32,000 prompts, K = 25, all three metrics
(Jaccard, SERP*, PRAG*) with bootstrap CIs (1,000 resamples), the gate against a baseline.
Targets: under 10 s wall and under 500 MB peak RSS for the pytest run.

The cassettes are generated once in a temp dir from the in-process simulated recommender,
written with ``pytest_recfair.cassettes.store.CassetteStore`` exactly as a recording would
(the same requests the OpenAI provider builds). A warm-up run writes the baseline; then
the timed runs replay. The reference, measured in the same session, is a pytest run of
the same project without ``--fairness`` (interpreter + pytest + plugin start-up).

    .venv/bin/python benchmarks/bench_plugin.py [--runs 5] [--entities 1000]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _peak import run_measured  # noqa: E402

from pytest_recfair.cassettes.store import CassetteStore  # noqa: E402
from pytest_recfair.cassettes.vcrfile import RecordedRequest, RecordedResponse  # noqa: E402
from pytest_recfair.prompts.cases import build_cases  # noqa: E402
from pytest_recfair.prompts.grids import load_grid  # noqa: E402
from pytest_recfair.prompts.seeds import load_seeds  # noqa: E402
from pytest_recfair.providers import from_config, run_cases  # noqa: E402
from pytest_recfair.sim.recommender import SimulatedRecommender  # noqa: E402

BASE_URL = "http://127.0.0.1:9/v1"  # never contacted: replay only
MODEL = "recfair-sim-bench"
TEST_ID = "test_paper.py::test_paper_scale"

CONFTEST = f'''
import pytest
from pytest_recfair.providers import from_config


@pytest.fixture(scope="session")
def recfair_recommender():
    return from_config("openai", model="{MODEL}", base_url="{BASE_URL}")
'''

TEST = """
from pytest_recfair import fairness


@fairness(seeds="seeds.txt", metric="all", k=25)
def test_paper_scale():
    pass
"""


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{model}; {os.cpu_count()} cores; Python {platform.python_version()}; "
        f"{platform.system()} {platform.release()}"
    )


def plugin_args() -> list[str]:
    for ep in importlib.metadata.entry_points(group="pytest11"):
        if ep.value == "pytest_recfair.plugin":
            return []
    return ["-p", "pytest_recfair.plugin"]


def generate(root: Path, n_entities: int) -> int:
    """Write the project and its cassettes; return the number of recorded interactions."""
    names = [f"Bench Director {i:04d}" for i in range(n_entities)]
    (root / "seeds.txt").write_text("\n".join(names) + "\n", encoding="utf-8")
    (root / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (root / "test_paper.py").write_text(TEST, encoding="utf-8")
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    entities = load_seeds(root / "seeds.txt", domain="movie")
    cases = build_cases(grid=load_grid("faireval"), templates="natural", entities=entities, k=25)
    provider = from_config("openai", model=MODEL, base_url=BASE_URL)
    sim = SimulatedRecommender(bias="demo", seed=0)
    store = CassetteStore(root / "fixtures" / "cassettes", "all")
    last = None
    for case in cases:
        if last is not None and case.entity_id != last:
            store.release(TEST_ID, [last])  # saved; keeps generation memory flat
        last = case.entity_id
        request = provider.build_request(case.system, case.prompt)
        text = sim(case.prompt, case.system)
        body = {
            "id": f"chatcmpl-bench-{case.id}",
            "object": "chat.completion",
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": len(case.prompt.split()), "completion_tokens": 100},
        }
        store.record(
            TEST_ID,
            case.entity_id,
            RecordedRequest(
                method=request.method,
                url=str(request.url),
                headers=tuple(request.headers.items()),
                body=request.content,
                repeat=case.repeat,
                case_id=case.id,
            ),
            RecordedResponse(
                status=200,
                headers=(("content-type", "application/json"),),
                body=json.dumps(body).encode(),
            ),
        )
    store.flush()
    return len(cases)


def replay_only(root: Path) -> float:
    """In-process: the cassette replay alone (providers.run_cases), the audit's first phase."""
    entities = load_seeds(root / "seeds.txt", domain="movie")
    cases = build_cases(grid=load_grid("faireval"), templates="natural", entities=entities, k=25)
    provider = from_config("openai", model=MODEL, base_url=BASE_URL)
    store = CassetteStore(root / "fixtures" / "cassettes", "none")
    start = time.perf_counter()
    outcome = run_cases(provider, cases, cassettes=store, test_id=TEST_ID, progress=False)
    elapsed = time.perf_counter() - start
    assert not outcome.errors, next(iter(outcome.errors.values()))
    return elapsed


def run_pytest(root: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider", "-q", *args]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs (median reported)")
    parser.add_argument("--entities", type=int, default=1000)
    args = parser.parse_args()

    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="recfair-bench-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        n = generate(root, args.entities)
        size = sum(p.stat().st_size for p in (root / "fixtures").rglob("*.json"))
        print(
            f"generated {n} interactions in {time.perf_counter() - t0:.1f} s "
            f"({size / 1e6:.1f} MB of cassettes)"
        )
        wall, proc = run_pytest(root, "--fairness", "--fairness-update")
        if proc.returncode != 0:
            print(proc.stdout[-4000:], proc.stderr[-2000:], sep="\n")
            return 1
        print(f"warm-up (writes the baseline): {wall:.2f} s")

        audit: list[float] = []
        ref: list[float] = []
        for _ in range(args.runs):
            wall, proc = run_pytest(root)  # reference: same project, audits skipped
            ref.append(wall)
            wall, proc = run_pytest(root, "--fairness")
            if proc.returncode != 0:
                print(proc.stdout[-4000:], proc.stderr[-2000:], sep="\n")
                return 1
            audit.append(wall)
        replay = statistics.median(replay_only(root) for _ in range(3))
        # one more audit run through a small launcher: a child spawned from this process
        # (which holds the generated data) would count this process's pages (_peak.py)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        cmd = [sys.executable, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider"]
        peak_mb = run_measured([*cmd, "-q", "--fairness"], cwd=root, env=env)[2]
        med, med_ref = statistics.median(audit), statistics.median(ref)
        print(f"runs: {args.runs}; audit walls: {', '.join(f'{x:.2f}' for x in audit)} s")
        print(f"pytest --fairness (replay, {n} prompts, 3 metrics, bootstrap 1000):")
        print(f"  median wall      {med:.2f} s   (target < 10 s)")
        print(f"  peak child RSS   {peak_mb:.0f} MB  (target < 500 MB; one more audit run)")
        print(f"  reference        {med_ref:.2f} s   (same pytest run without --fairness)")
        print(f"  of which replay  {replay:.2f} s   (providers.run_cases alone, in-process)")
        print(f"  ratio            {med / med_ref:.1f}x the reference")
        ok = med < 10 and peak_mb < 500
        print("targets met" if ok else "TARGETS MISSED")
        return 0 if ok else 2


if __name__ == "__main__":
    raise SystemExit(main())
