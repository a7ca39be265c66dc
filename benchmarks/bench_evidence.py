"""What keeping the evidence costs a list-overlap audit: scoring time with the bounded
keeper (engine/overlap/evidence.py) against the same audit with the keeper switched off,
measured in the same run (process CPU time: the machine is shared), and the size of
what it adds to the result's JSON.

    nice python benchmarks/bench_evidence.py [--entities 200] [--runs 5]

The audit is the in-process simulator (demo profile, noise 0.08), the whole faireval
grid (8 attributes, 30 values), Jaccard@25; the runner's own cost (prompts through the
callable provider) is in both figures alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from _machine import cpu_model

from pytest_recfair import api
from pytest_recfair.engine.overlap import evidence
from pytest_recfair.sim.recommender import SimulatedRecommender


def one(entities: int) -> tuple[float, int]:
    sim = SimulatedRecommender(bias="demo", noise=0.08, seed=7)
    start = time.process_time()
    result = api.audit(sim, entities=entities, seeds="directors", n_resamples=200)
    took = time.process_time() - start
    return took, len(json.dumps(result.evidence))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entities", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    add = evidence.Keeper.add
    on, off, size = [], [], 0
    for _ in range(args.runs):  # interleaved, so load changes hit both alike
        evidence.Keeper.add = add  # type: ignore[method-assign]
        took, size = one(args.entities)
        on.append(took)
        evidence.Keeper.add = lambda *a, **k: None  # type: ignore[method-assign]
        off.append(one(args.entities)[0])
    evidence.Keeper.add = add  # type: ignore[method-assign]
    med_on, med_off = statistics.median(on), statistics.median(off)
    print(f"machine: {cpu_model()}, load {os.getloadavg()[0]:.2f}")
    print(f"audit of {args.entities} entities x 30 values, median of {args.runs} runs")
    print(f"  keeper off: {med_off:.3f} s CPU   keeper on: {med_on:.3f} s CPU   "
          f"overhead {100 * (med_on / med_off - 1):+.1f}%")  # fmt: skip
    print(f"  evidence in the result's JSON: {size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
