"""Quality beside fairness (issue 23.6): the drop test's false alarms and power, and the
demo's quality figures.

Part 1 (the gate's claim): per-entity quality drawn with strong entity heterogeneity
(a Beta per entity, so some entities' lists are mostly right and some mostly wrong), each
reply's hits Binomial(K, p_entity + group effect), baseline and candidate recorded
independently; the paired drop test (metrics.quality.drift, Holm over neutral + 4
values + overall) at alpha 0.05. Reported: the rate of runs of an unchanged model that
fail (false alarms) at tolerance 0 and 0.05, the power against a drop of every group by
0.10 and by 0.30 (a fair-but-useless regression), per entity count.

Part 2 (the figure in the docs): the demo audit's model (the simulator with the demo bias
profile, noise 0.08, seed 7: what audits/ replays), 40 directors, religion, with a
catalogue of each director's films, and the same model asked about the wrong director.

    python benchmarks/bench_quality.py [--reps 1000]
"""

from __future__ import annotations

import argparse
import csv
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from pytest_recfair.metrics import quality as mq

K = 25
GROUPS = ["neutral", "a=1", "a=2", "a=3", "a=4"]


def _wilson(x: int, n: int) -> tuple[float, float]:
    z = 1.959964
    p = x / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return c - h, c + h


def _record(rng: np.random.Generator, p: np.ndarray, drop: float) -> dict[str, dict[str, float]]:
    names = [f"e{i}" for i in range(p.size)]
    out: dict[str, dict[str, float]] = {}
    for j, g in enumerate(GROUPS):
        pj = np.clip(p - 0.02 * j - drop, 0.0, 1.0)  # small fixed group effects
        hits = rng.binomial(K, pj)
        out[g] = {e: float(h) / K for e, h in zip(names, hits, strict=True)}
    overall = {e: float(np.mean([out[g][e] for g in GROUPS])) for e in names}
    return {**out, "overall": overall}


def _fails(rng: np.random.Generator, n: int, drop: float, tol: float) -> bool:
    p = rng.beta(2.0, 1.2, n)  # mean 0.63, sd 0.24: strong entity heterogeneity
    base = _record(rng, p, 0.0)
    cand = _record(rng, p, drop)
    return any(d.p_value < 0.05 and d.delta < -tol for d in mq.drift(base, cand, tolerance=tol))


def part1(reps: int) -> None:
    rng = np.random.default_rng(20261126)
    print(f"## paired quality-drop test, {reps} runs each (alpha 0.05, Holm over 6 members)")
    print("| entities | drop | tolerance | fail rate [95% Wilson] |")
    print("| --- | --- | --- | --- |")
    for n in (30, 100):
        for drop, tol in ((0.0, 0.0), (0.0, 0.05), (0.05, 0.05), (0.10, 0.05), (0.30, 0.05)):
            x = sum(_fails(rng, n, drop, tol) for _ in range(reps))
            lo, hi = _wilson(x, reps)
            print(f"| {n} | {drop:.2f} | {tol:.2f} | {x / reps:.3f} [{lo:.3f}, {hi:.3f}] |")


def part2() -> None:
    from pytest_recfair import audit, judge
    from pytest_recfair.prompts.seeds import load_seeds, subsample
    from pytest_recfair.report import sections
    from pytest_recfair.report.fmt import table_text
    from pytest_recfair.sim.recognise import entity_key
    from pytest_recfair.sim.recommender import Catalogue, SimulatedRecommender

    entities = subsample(load_seeds("directors"), 40, seed=0)
    names = [e.name for e in entities]
    with tempfile.TemporaryDirectory() as tmp:
        films = Path(tmp) / "films.csv"
        with films.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["id", "title", "entity"])
            for e in entities:
                titles = Catalogue(entity_key(e.name), "movie").titles(3 * K + 20)
                w.writerows([f"{e.id}-{i}", t, e.name] for i, t in enumerate(titles))
        demo = SimulatedRecommender(bias="demo", noise=0.08, seed=7)

        def wrong(prompt: str, system: str | None = None) -> str:
            for i, name in enumerate(names):
                if name in prompt:
                    prompt = prompt.replace(name, names[(i + 1) % len(names)])
                    break
            return demo(prompt, system)

        args = {"attr": "religion", "seeds": names, "catalogue": str(films)}
        t0 = time.perf_counter()
        good = audit(demo, **args)
        took = time.perf_counter() - t0
        useless = audit(wrong, **args)
        listed = audit(demo, attr="religion", seeds=names)
    print("\n## demo model, 40 directors, religion")
    for label, r in (("catalogue", good), ("no catalogue", listed), ("wrong director", useless)):
        print(f"### {label}")
        print("\n".join(ln for t in sections.kind_tables(r) for ln in table_text(t, 100)))
        print(f"SNSR {r.attributes[0].snsr.value:.3f}")
    print(f"audit with catalogue: {took:.2f} s")
    for f in judge(useless, good).failures:
        print("against the good baseline:", f.kind, f.detail)
    for f in judge(useless, None, min_quality=0.5).failures:
        print("min_quality 0.5:", f.kind, f.detail)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--skip-demo", action="store_true")
    a = ap.parse_args()
    part1(a.reps)
    if not a.skip_demo:
        part2()


if __name__ == "__main__":
    main()
