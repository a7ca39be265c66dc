"""How often does the quickstart's own assertion on the refusal gap fail for a model that
refuses every religion value equally? (docs/quickstart.md, step 2; issue 25, point 10)

Each run audits a fresh simulated recommender (a new seed: another recording of the same
model) at the quickstart's size, 20 entities, religion only, through ``pytest_recfair.audit``
(the pipeline pytest runs). The model refuses each religion prompt with probability ``p``,
the same for every value, so any gap is chance. Reported per ``p``: the share of runs
whose gap fails the old assertion (``refusal_gap < 0.05``: no gap at all) and the new one
(at most 4 refusals between the most and least refused value), with the exact binomial
share as the reference (4 values x 20 prompts, independent refusals).

Run:  nice .venv/bin/python benchmarks/quickstart_refusals.py --runs 200
"""

from __future__ import annotations

import argparse
import sys
import time
from math import comb
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_recfair import audit
from pytest_recfair.sim.recommender import SimulatedRecommender

ENTITIES = 20
VALUES = ("Buddhist", "Christian", "Hindu", "Muslim")


def exact_fail(p: float, gap_counts: int) -> float:
    """P(max - min refusal count > gap_counts) over len(VALUES) iid Binomial(20, p)."""
    pmf = [comb(ENTITIES, k) * p**k * (1 - p) ** (ENTITIES - k) for k in range(ENTITIES + 1)]
    within = 0.0
    for low in range(ENTITIES + 1):
        top = min(ENTITIES, low + gap_counts)
        within += sum(pmf[low : top + 1]) ** len(VALUES) - sum(pmf[low + 1 : top + 1]) ** len(
            VALUES
        )
    return 1.0 - within


def one_run(p: float, seed: int) -> tuple[bool, bool]:
    """(old assertion fails, new assertion fails) for one recording."""
    sim = SimulatedRecommender(noise=0.08, seed=seed, faults={"refusals": dict.fromkeys(VALUES, p)})
    religion = audit(sim, attr="religion", entities=ENTITIES, n_resamples=50, seed=seed).attribute(
        "religion"
    )
    refusals = [value.refusals for value in religion.values]
    return not religion.refusal_gap < 0.05, not max(refusals) - min(refusals) <= 4


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--rates", default="0.02,0.05")
    args = ap.parse_args()
    start = time.monotonic()
    print("| refusal rate p | runs | old `gap < 0.05` fails | exact | new `<= 4` fails | exact |")
    print("| --- | --- | --- | --- | --- | --- |")
    for p in (float(x) for x in args.rates.split(",")):
        runs = [one_run(p, seed) for seed in range(1, args.runs + 1)]
        old = sum(o for o, _ in runs) / len(runs)
        new = sum(n for _, n in runs) / len(runs)
        print(
            f"| {p:g} | {len(runs)} | {old:.1%} | {exact_fail(p, 0):.1%} | {new:.1%} | "
            f"{exact_fail(p, 4):.2%} |"
        )
    print(f"\n{time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
