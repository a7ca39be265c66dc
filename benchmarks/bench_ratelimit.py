"""Recording at the provider's limit: pacing to requests- and tokens-per-minute limits.

    nice .venv/bin/python benchmarks/bench_ratelimit.py [--runs 3] [--prompts 1200]

The simulator (``SimServer``, 200 ms per answer, in this process's background thread: at
ten requests a second its CPU is negligible) keeps a limit and states it in OpenAI's
``x-ratelimit-*`` headers on every reply, with a 429 and ``Retry-After`` past it. The
runner is told nothing about the limit (no ``rpm`` / ``tpm``): it learns it from the
headers and paces to it (``providers/pacing.py``). Each run records ``--prompts``
prompts into fresh cassettes (``CassetteStore(mode="once")``, default concurrency 8):

- reference: the same recording without any limit, measured in the same run;
- requests: ``--rpm`` requests per minute (600: 1,200 prompts take at least 120 s);
- tokens: a tokens-per-minute limit set to half the tokens the reference recording used
  (so the limit again allows the prompts in 120 s).

Targets (issue 24): each limited recording within 10% of the time the limit allows, and
at most 1% of requests answered 429 (the server's own count). Medians of ``--runs``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _machine import cpu_model  # noqa: E402

from pytest_recfair.cassettes.store import CassetteStore  # noqa: E402
from pytest_recfair.prompts.cases import PromptCase, build_cases  # noqa: E402
from pytest_recfair.prompts.seeds import load_seeds  # noqa: E402
from pytest_recfair.providers import from_config, run_cases  # noqa: E402
from pytest_recfair.sim.recommender import SimulatedRecommender  # noqa: E402
from pytest_recfair.sim.server import SimServer  # noqa: E402

LATENCY_MS = 200.0
SLACK = 0.10  # within 10% of what the limit allows
MAX_429 = 0.01


def make_cases(n: int) -> list[PromptCase]:
    per_entity = len(build_cases("faireval", "natural", ["x"], k=25))
    entities = load_seeds("directors")[: -(-n // per_entity)]
    return build_cases("faireval", "natural", entities, k=25)[:n]


def record(cases: list[PromptCase], **limits: Any) -> dict[str, Any]:
    """One recording against a fresh simulator with ``limits`` (rpm / tpm)."""
    with SimServer(SimulatedRecommender(), latency_ms=LATENCY_MS, **limits) as srv:
        provider = from_config(
            "openai", model="recfair-sim-1", base_url=srv.base_url, api_key_env=""
        )
        with tempfile.TemporaryDirectory() as tmp:
            store = CassetteStore(Path(tmp), mode="once")
            started = time.perf_counter()
            outcome = run_cases(
                provider, cases, cassettes=store, test_id="bench_ratelimit", progress=False
            )
            store.flush()
            elapsed = time.perf_counter() - started
        stats = srv.stats.as_dict()
    return {
        "elapsed": elapsed,
        "errors": len(outcome.errors),
        "tokens": outcome.usage.total_tokens,
        "requests": stats.get("ok", 0) + stats.get("429-limit", 0),
        "throttled": stats.get("429-limit", 0),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=1200)
    parser.add_argument("--rpm", type=float, default=600.0)
    args = parser.parse_args()
    cases = make_cases(args.prompts)
    allowed = len(cases) / args.rpm * 60.0
    print(f"machine: {cpu_model()}; {os.cpu_count()} cores; load {os.getloadavg()[0]:.2f}")
    print(f"{len(cases)} prompts, {LATENCY_MS:g} ms per answer, the limit allows {allowed:.1f} s")
    rows: dict[str, list[dict[str, Any]]] = {"reference": [], "requests": [], "tokens": []}
    for run in range(args.runs):
        ref = record(cases)
        tpm = ref["tokens"] / allowed * 60.0
        rows["reference"].append(ref)
        rows["requests"].append(record(cases, rpm=args.rpm))
        rows["tokens"].append(record(cases, tpm=tpm))
        load = os.getloadavg()[0]
        print(
            f"run {run + 1}: reference {ref['elapsed']:.1f} s; "
            + "; ".join(
                f"{name} {rows[name][-1]['elapsed']:.1f} s, "
                f"{rows[name][-1]['throttled']} x 429 of {rows[name][-1]['requests']}"
                for name in ("requests", "tokens")
            )
            + f" (tpm {tpm:,.0f}; load {load:.2f})",
            flush=True,
        )
    ok = True
    for name, runs in rows.items():
        took = statistics.median(r["elapsed"] for r in runs)
        share = statistics.median(r["throttled"] / max(1, r["requests"]) for r in runs)
        errors = sum(r["errors"] for r in runs)
        line = f"{name}: median {took:.1f} s, 429 share {share:.2%}, errors {errors}"
        if name != "reference":
            met = took <= allowed * (1 + SLACK) and share <= MAX_429 and not errors
            ok &= met
            line += f"; {took / allowed:.3f} x the {allowed:.0f} s allowed: " + (
                "MET" if met else "MISSED"
            )
        print(line)
    print(f"load average after: {os.getloadavg()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
