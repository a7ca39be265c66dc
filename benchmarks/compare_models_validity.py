"""Does the side-by-side model comparison keep its promises? False alarms and power.

The comparison (``pytest_recfair.metrics.pairs.paired_models``, shown by the plugin when
``recfair_recommender`` is parametrized) tests, for each pair of models, every attribute
of the test at once: a two-sided paired sign-flip test per attribute on the shared
entities, Westfall–Young step-down over the attributes, Bonferroni over the pairs. The
promise: when the models are equally fair, the chance that ANY attribute names a fairer
model is at most alpha; a clear difference is found.

Sources (each setting repeated ``--runs`` times, >= 200):

- ``synthetic``: the entity-heterogeneity model of benchmarks/gate_validity.py (per-entity
  base similarity, noise and sensitivity; fresh reply noise per run; scores on a 1/50
  grid). Two models = two independent runs on the same seed entities. The family is the
  eight FairEval attributes, Jaccard@25;
- ``simulator``: the bundled simulated recommender with the demo profile and realistic
  heterogeneity, scored through the real parse + metrics path; two models = the same
  profile answering with independent noise draws.

Run:  .venv/bin/python benchmarks/compare_models_validity.py --quick   (about 2 minutes)
      .venv/bin/python benchmarks/compare_models_validity.py --runs 1000
Figures go to benchmarks/results/compare_models_validity.md and docs/reports.md.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import gate_validity as gv
from pytest_recfair.metrics.aggregate import SimilarityMatrix
from pytest_recfair.metrics.pairs import PairMember, paired_models

ALPHA = 0.05
Run = Mapping[tuple[str, str], np.ndarray]


class Rate:
    """A share with its binomial standard error, printed in percent."""

    def __init__(self) -> None:
        self.hits = 0
        self.n = 0

    def add(self, hit: bool) -> None:
        self.hits += int(hit)
        self.n += 1

    def text(self) -> str:
        p = self.hits / self.n if self.n else math.nan
        se = math.sqrt(p * (1 - p) / self.n) if self.n else math.nan
        return f"{100 * p:5.1f}% ± {100 * se:.1f} ({self.hits}/{self.n})"


def _matrix(sims: np.ndarray, entities: Sequence[str]) -> SimilarityMatrix:
    values = tuple(f"v{j}" for j in range(sims.shape[1]))
    return SimilarityMatrix(tuple(entities), values, sims, np.zeros(sims.shape, dtype=bool))


def verdicts(
    a: Run, b: Run, entities: Sequence[str], seed: int, resamples: int, n_pairs: int = 1
) -> dict[str, tuple[bool, float, float]]:
    """attribute -> (significant, delta b - a, raw p), Jaccard only, as the plugin decides."""
    members = [
        PairMember(attr, _matrix(a[(attr, m)], entities), _matrix(b[(attr, m)], entities))
        for (attr, m) in a
        if m == "jaccard"
    ]
    out = paired_models(members, n_resamples=resamples, seed=seed, interval=False)
    return {v.key: (min(1.0, v.p_adjusted * n_pairs) <= ALPHA, v.delta, v.p_value) for v in out}


def _names(n: int) -> list[str]:
    return [f"e{i}" for i in range(n)]


def null_synthetic(args: argparse.Namespace, rng: np.random.Generator) -> list[str]:
    rows = []
    for fair in (True, False):
        for n in (12, 25, 100):
            rate, per_attr = Rate(), Rate()
            for r in range(args.runs):
                pop = gv.population(rng, n)
                effects = gv.grid_effects(rng, fair)
                a, b = gv.draw_run(rng, pop, effects), gv.draw_run(rng, pop, effects)
                v = verdicts(a, b, _names(n), r, args.resamples)
                rate.add(any(sig for sig, _, _ in v.values()))
                per_attr.add(v["religion"][2] <= ALPHA)
            model = "fair" if fair else "mildly unfair"
            rows.append(f"| {model} | {n} | {rate.text()} | {per_attr.text()} |")
    return rows


def null_three(args: argparse.Namespace, rng: np.random.Generator) -> list[str]:
    """Three equally fair models: any of the 3 pairs x 8 attributes called different."""
    rows = []
    for n in (25, 100):
        rate = Rate()
        for r in range(args.runs):
            pop = gv.population(rng, n)
            effects = gv.grid_effects(rng, False)
            runs = [gv.draw_run(rng, pop, effects) for _ in range(3)]
            hit = False
            for i, j in ((0, 1), (0, 2), (1, 2)):
                v = verdicts(runs[i], runs[j], _names(n), r, args.resamples, n_pairs=3)
                hit = hit or any(sig for sig, _, _ in v.values())
            rate.add(hit)
        rows.append(f"| 3 models, 3 pairs | {n} | {rate.text()} |")
    return rows


def power(args: argparse.Namespace, rng: np.random.Generator) -> list[str]:
    """Model b favours religion's first value less by ``rise``: SNSR(b) = SNSR(a) + rise
    (the values are otherwise equal). Caught: a named fairer on religion; wrong: b named."""
    rows = []
    for rise in (0.03, 0.05, 0.10):
        for n in (25, 50, 100):
            caught, wrong = Rate(), Rate()
            for r in range(args.runs):
                pop = gv.population(rng, n)
                effects = gv.grid_effects(rng, True)
                moved = dict(effects)
                moved["religion"] = effects["religion"] - rise * (np.arange(4) == 0)
                a, b = gv.draw_run(rng, pop, effects), gv.draw_run(rng, pop, moved)
                sig, delta, _ = verdicts(a, b, _names(n), r, args.resamples)["religion"]
                caught.add(sig and delta > 0)
                wrong.add(sig and delta < 0)
            rows.append(f"| +{rise:.2f} | {n} | {caught.text()} | {wrong.text()} |")
    return rows


def _sim_run(sa: gv.SimAudit, repeat: int) -> dict[tuple[str, str], np.ndarray]:
    """gate_validity.sim_run for Jaccard@25 only (what a plugin audit scores by default)."""
    from pytest_recfair.metrics import aggregate

    neutral: dict[str, list[str]] = {}
    by: dict[str, dict[str, dict[str, list[str]]]] = {}
    for c in sa.cases:
        items = list(sa.rec.respond(c.prompt, c.system, repeat=repeat).items)
        if c.attribute is None:
            neutral[c.entity] = items
        else:
            by.setdefault(c.attribute, {}).setdefault(c.value, {})[c.entity] = items
    return {
        (attr, "jaccard"): np.asarray(aggregate.similarity_matrix(neutral, values, k=25).sims)
        for attr, values in by.items()
    }


def _sim_chunk(job: tuple[list[int], int, int]) -> list[bool]:
    rs, n, resamples = job
    sa = gv.sim_audit(n, gv._sim_profile(0.40))
    out = []
    for r in rs:
        a = _sim_run(sa, 2 * r)
        b = _sim_run(sa, 2 * r + 1)
        out.append(any(s for s, _, _ in verdicts(a, b, sa.entities, r, resamples).values()))
    return out


def null_simulator(args: argparse.Namespace, rng: np.random.Generator) -> list[str]:
    from concurrent.futures import ProcessPoolExecutor

    rows = []
    for n in (25,):
        jobs = [(list(range(j, args.runs, args.jobs)), n, args.resamples) for j in range(args.jobs)]
        with ProcessPoolExecutor(args.jobs) as pool:
            parts = list(pool.map(_sim_chunk, jobs))
        rate = Rate()
        for part in parts:
            for hit in part:
                rate.add(hit)
        rows.append(f"| simulator, demo profile, same model twice | {n} | {rate.text()} |")
    return rows


SECTIONS: dict[str, tuple[str, Callable[[argparse.Namespace, np.random.Generator], list[str]]]] = {
    "null": (
        "| two equally fair models | entities | any of 8 attributes called different "
        "(family-wise) | religion alone: raw p <= 0.05 |\n| --- | --- | --- | --- |",
        null_synthetic,
    ),
    "three": ("| setting | entities | any call |\n| --- | --- | --- |", null_three),
    "power": (
        "| SNSR difference | entities | fairer model named | wrong model named |\n"
        "| --- | --- | --- | --- |",
        power,
    ),
    "sim": (
        "| source | entities | any of 8 attributes called different |\n| --- | --- | --- |",
        null_simulator,
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="200 runs, 800 sign flips")
    ap.add_argument("--runs", type=int, default=500, help="runs per setting (>= 200)")
    ap.add_argument("--resamples", type=int, default=2000, help="sign-flip draws per test")
    ap.add_argument("--only", choices=sorted(SECTIONS), action="append")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--jobs", type=int, default=2, help="processes for the simulator runs")
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.resamples = 200, 800
    if args.runs < 200:
        ap.error("--runs must be at least 200 (the study's minimum per setting)")
    rng = np.random.default_rng(args.seed)
    print(f"model comparison: {args.runs} runs per setting, alpha {ALPHA}, ", end="")
    print(f"{args.resamples} sign flips\n")
    for key in args.only or list(SECTIONS):
        header, fn = SECTIONS[key]
        t0 = time.perf_counter()
        rows = fn(args, rng)
        print(f"## {key} ({time.perf_counter() - t0:.0f} s)\n\n{header}")
        print("\n".join(rows), "\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
