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
      .venv/bin/python benchmarks/exposure_validity.py --drift --runs 200 --resamples 2000

``--drift``: the drift test against a stored baseline (``tolerance``, alpha 0.05). Each
repetition draws ``--entities`` entities from a generative model and two independent runs
of them (baseline, candidate: fresh slot draws, the same entities), builds each run's
per-entity counts with ``exposure_data`` and decides as the gate's ``_drift`` does:
``compare_exposure`` (the paired entity bootstrap, Holm over MGU, long-tail share and max
|lift|; the same call the engine's ``_paired`` makes) fails a measure when its p < alpha.
Not the simulator: an exact truth is needed at the margin. Model: the catalogue above
(quintiles Q1-Q5 by plays; Q5 the head, so long tail = Q1-Q4), neutral prompt and 4
values, K = 10 slots per list, each slot a group drawn with the entity's probabilities
then an item uniform within it, so the true shares are exactly the entities' mean
probabilities. Entities differ: each adds a zero-sum perturbation (up to about +-0.06 per
group) to the run's shares, antithetic in pairs so they average out exactly. Baseline
shares 0.2 + (-0.04, -0.02, +0.02, +0.04, 0): MGU 0.024, long-tail 0.8; "Girl" lists draw
a group's top item more often: popularity lift +0.03 (others 0).

- ``same``: the candidate is the baseline's model; a false alarm is any drift failure.
- ``*_margin``: MGU up, long-tail share down or Girl's lift up by exactly the tolerance
  (the others unchanged, or for the tail moved well under it: MGU +0.004); fails at
  most about alpha.
- ``*_power``: the same moves by tolerance + 0.03; detected = that measure fails.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from pytest_recfair.api import audit, judge
from pytest_recfair.metrics import exposure as ex
from pytest_recfair.metrics.roleplay import wilson
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


VALUES = ("Boy", "Girl", "Man", "Woman")


def drift_model(setting: str, tol: float) -> tuple[np.ndarray, float]:
    """The candidate's group shares (Q1-Q5) and Girl's lift for a drift setting."""
    move = {"same": 0.0, "margin": tol, "power": tol + 0.03}[setting.split("_")[-1]]
    gaps, lift = np.array([-0.04, -0.02, 0.02, 0.04, 0.0]), 0.03
    if setting.startswith("mgu"):  # scale the Q1-Q4 gaps: MGU 0.024 -> 0.024 + move
        gaps *= (0.024 + move) / 0.024
    elif setting.startswith("tail"):  # the head takes `move` evenly from Q1-Q4
        gaps += np.array([-1, -1, -1, -1, 4]) * move / 4
    elif setting.startswith("lift"):
        lift += move
    return 0.2 + gaps, lift


def draw_run(
    rng: np.random.Generator, het: np.ndarray, share: np.ndarray, lift: float
) -> ex.ExposureData:
    """One run's per-entity counts: per entity, the neutral list and one per value."""
    lists = []
    for e, h in enumerate(het):
        p = share + h
        for value in (None, *VALUES):
            g = rng.choice(5, size=10, p=p)
            # within a group (20 items by rising plays): uniform; for Girl, the group's
            # top item (+0.095 quantiles over the uniform mean) with chance lift / 0.095
            top = rng.random(10) < (lift / 0.095 if value == "Girl" else 0.0)
            j = np.where(top, 19, rng.integers(0, 20, 10))
            lists.append((f"Town {e}", value and f"gender: {value}", (20 * g + j).tolist()))
    plays = np.arange(100, dtype=np.float64)
    codes, groups = ex.bin_codes(plays, 5)
    return ex.exposure_data(lists, codes, groups, ex.popularity_quantiles(plays))


def drift(args: argparse.Namespace) -> None:
    tol, alpha = args.tolerance, 0.05
    print("| setting | runs | entities | failed | Wilson 95% | MGU / tail / lift failed | s/run |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for setting in args.settings.split(","):
        start, fails, by = time.perf_counter(), 0, np.zeros(3, dtype=int)
        share, lift = drift_model(setting, tol)
        for run in range(args.runs):
            rng = np.random.default_rng(run)
            half = rng.uniform(-1, 1, (args.entities // 2, 5))
            half = 0.04 * (half - half.mean(axis=1, keepdims=True))
            het = np.concatenate([half, -half])  # zero-sum per entity, mean zero per group
            base = draw_run(rng, het, *drift_model("same", tol))
            cand = draw_run(rng, het, share, lift)
            cmp = ex.compare_exposure(
                base, cand, np.full(5, 0.2), n_resamples=args.resamples, seed=run, margin=tol
            )
            assert cmp is not None
            hit = cmp.p_value < alpha
            fails, by = fails + bool(hit.any()), by + hit
        lo, hi = wilson(fails, args.runs)
        per = (time.perf_counter() - start) / args.runs
        print(
            f"| {setting} | {args.runs} | {args.entities} | {fails / args.runs:.1%} | "
            f"{lo:.1%}-{hi:.1%} | {' / '.join(f'{b / args.runs:.1%}' for b in by)} | {per:.2f} |",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--entities", type=int, default=100)
    ap.add_argument("--resamples", type=int, default=500)
    ap.add_argument("--settings", default=None, help="default: every setting of the mode")
    ap.add_argument("--drift", action="store_true", help="the drift test (see the docstring)")
    ap.add_argument("--tolerance", type=float, default=0.02)
    args = ap.parse_args()
    args.settings = args.settings or (
        "same,mgu_margin,tail_margin,lift_margin,mgu_power,tail_power,lift_power"
        if args.drift
        else "null,head,lift"
    )
    if args.drift:
        return drift(args)
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
