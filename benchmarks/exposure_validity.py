"""Does the exposure audit keep its promises? False alarms and power, end to end.

Each run is a whole ``kind="exposure"`` audit through the engine (``pytest_recfair.audit``)
of the simulated recommender (``sim``, in process): ``--entities`` towns, the fairllm
grid's gender attribute (the neutral prompt and 4 values), K = 10 titles from a 100-item
catalogue whose ``plays`` rise with the index; popularity groups ``bins=5`` (quintiles),
reference = the catalogue. Every entity has its own mix over the quintiles (the
simulator's uniform(0.5, 1.5) weights: entities differ). Gate: ``max_exposure_gap=0.05``,
``max_popularity_lift=0.1``, alpha 0.05, family-wise.

- ``null``: items in proportion to the catalogue (nothing planted); a false alarm is any
  gate failure.
- ``head``: every list moves 10 points of exposure from the tail quintile to the head
  (``items.mix`` Q1 0.5, Q5 1.5); detected = a gap failure naming Q1 and Q5.
- ``lift``: prompts for one value ("Girl") move half their mix to the head quintile
  (+0.2 popularity quantiles in expectation); detected = a lift failure naming Girl.

Run:  .venv/bin/python benchmarks/exposure_validity.py --runs 200   (200 per setting)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_recfair.api import audit, judge
from pytest_recfair.sim.recommender import SimulatedRecommender

PLANTS: dict[str, dict[str, Any]] = {
    "null": {},
    "head": {"mix": {"Q1": 0.5, "Q5": 1.5}},
    "lift": {"shift": {"Girl": {"Q5": 0.5}}},
}


def catalogue(folder: Path) -> Path:
    path = folder / "catalogue.csv"
    rows = ["title,tier,plays"] + [
        f"Cafe {i:03d},Q{i // 20 + 1},{(i + 1) * 37}" for i in range(100)
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def one_run(cat: Path, setting: str, run: int, entities: int, resamples: int) -> set[str]:
    """The groups and values the gate failed on in one audit."""
    items = {"catalogue": str(cat), "field": "tier", "domain": "restaurant", **PLANTS[setting]}
    sim = SimulatedRecommender(bias={"items": items}, seed=run)
    marker: dict[str, Any] = {
        "kind": "exposure", "attr": "gender", "grid": "fairllm", "domain": "restaurant",
        "k": 10, "item_field": "plays", "bins": 5, "catalogue": str(cat),
        "max_exposure_gap": 0.05, "max_popularity_lift": 0.1, "n_resamples": resamples,
        "seed": run,
    }  # fmt: skip
    result = audit(sim, seeds=[f"Town {i}" for i in range(entities)], **marker)
    gate = judge(result, None, **marker)
    return {f.group or "" for f in gate.failures if f.kind == "exposure"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--entities", type=int, default=100)
    ap.add_argument("--resamples", type=int, default=500)
    ap.add_argument("--settings", default="null,head,lift")
    args = ap.parse_args()
    want = {"null": set(), "head": {"Q1", "Q5"}, "lift": {"Girl"}}
    with tempfile.TemporaryDirectory() as tmp:
        cat = catalogue(Path(tmp))
        print("| setting | runs | entities | flagged | named right | s/run |")
        print("| --- | --- | --- | --- | --- | --- |")
        for setting in args.settings.split(","):
            start, flagged, right = time.perf_counter(), 0, 0
            for run in range(args.runs):
                failed = one_run(cat, setting, run, args.entities, args.resamples)
                flagged += bool(failed)
                right += bool(want[setting]) and want[setting] <= failed
            per = (time.perf_counter() - start) / args.runs
            print(
                f"| {setting} | {args.runs} | {args.entities} | {flagged / args.runs:.1%} | "
                f"{'—' if setting == 'null' else f'{right / args.runs:.1%}'} | {per:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
