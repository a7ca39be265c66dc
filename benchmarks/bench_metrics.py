"""Paper-scale scoring benchmark: 1,000 entities x 31 values x K = 25.

Measures, per variant, the vectorised path (``similarity_cube``: Jaccard, SERP*, PRAG* at
every k = 1..25 for all 31,000 pairs, plus 1,000 bootstrap resamples of the attribute
table of each metric at k = 25) against a plain pure-Python implementation of the
reference definitions (nested loops, one call per pair and k). The pure-Python side is
timed on a subset of entities / resamples and extrapolated linearly (it is linear in
both). Reports medians of several runs; the machine is shared and noisy.

Run:  .venv/bin/python benchmarks/bench_metrics.py [--runs 5] [--ref-entities 20]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _machine import cpu_model

from pytest_recfair.metrics.aggregate import similarity_cube
from pytest_recfair.metrics.stats import bootstrap
from pytest_recfair.vocab import METRICS, VARIANTS

E, V, K, B = 1000, 31, 25, 1000


# ----------------------------------------------------------------- reference (pure Python)


def ref_jaccard(x: list[str], y: list[str]) -> float:
    a, b = set(x), set(y)
    return len(a & b) / len(a | b) if a | b else 0.0


def ref_serp(x: list[str], y: list[str], variant: str) -> float:
    """x = sensitive, y = neutral, as the references call it."""
    if variant == "fairllm":
        if not y:
            return 0.0
        temp = 0
        for i, xi in enumerate(x):
            for yj in y:
                if xi == yj:
                    temp += len(x) - i + 1
        return temp * 0.5 / ((len(y) + 1) * len(y))
    if variant == "langfair":
        if not y or not x:
            return 0.0
        score = sum(len(x) - i + 1 for i, item in enumerate(x) if item in y)
        return score * 0.5 / ((len(x) + 1) * len(x))
    xs, ys = list(dict.fromkeys(x)), list(dict.fromkeys(y))
    big = max(len(xs), len(ys))
    if big == 0:
        return 0.0
    return sum(big - r for r, item in enumerate(xs) if item in ys) / (big * (big + 1) // 2)


def ref_prag(x: list[str], y: list[str], variant: str) -> float:
    if variant == "normalized":
        x, y = list(dict.fromkeys(x)), list(dict.fromkeys(y))
        if not x or not y:
            return 0.0
        if len(x) == 1:
            return 1.0 if x[0] in y else 0.0
    else:
        if not x or not y:
            return 0.0
        if len(x) == 1:
            return 1.0 if x == y else 0.0
    temp = 0
    total = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            id1 = id2 = -1
            for p, item in enumerate(y):
                if item == x[i] and (variant != "langfair" or id1 == -1):
                    id1 = p
                if item == x[j] and (variant != "langfair" or id2 == -1):
                    id2 = p
            total += 1
            if id1 == -1:
                continue
            if id2 == -1 or id1 < id2:
                temp += 1
    if variant == "langfair":
        return temp / (len(x) * (len(x) + 1))
    return temp / total


def ref_cube(
    neutral: dict[str, list[str]], by_value: dict[str, dict[str, list[str]]], variant: str
) -> dict[str, np.ndarray]:
    ents = list(neutral)
    out: dict[str, np.ndarray] = {m: np.zeros((len(ents), len(by_value), K)) for m in METRICS}
    for e_i, e in enumerate(ents):
        for v_i, col in enumerate(by_value.values()):
            for k in range(1, K + 1):
                n, s = neutral[e][:k], col[e][:k]
                out["jaccard"][e_i, v_i, k - 1] = ref_jaccard(s, n)
                out["serp"][e_i, v_i, k - 1] = ref_serp(s, n, variant)
                out["prag"][e_i, v_i, k - 1] = ref_prag(s, n, variant)
    return out


def ref_bootstrap(sims: list[list[float]], n_resamples: int, seed: int) -> list[float]:
    """Per resample: value means over resampled entities, then SNSR (as SNSV, PAFS cost)."""
    rnd = random.Random(seed)
    n_e = len(sims)
    snsrs = []
    for _ in range(n_resamples):
        rows = [sims[rnd.randrange(n_e)] for _ in range(n_e)]
        means = [sum(r[v] for r in rows) / n_e for v in range(len(sims[0]))]
        mu = sum(means) / len(means)
        _ = (sum((m - mu) ** 2 for m in means) / len(means)) ** 0.5
        _ = 1 - sum(abs(m - mu) for m in means) / len(means)
        snsrs.append(max(means) - min(means))
    return snsrs


# ----------------------------------------------------------------- data


def make_data(seed: int = 0) -> tuple[dict[str, list[str]], dict[str, dict[str, list[str]]]]:
    """Lists shaped like real replies: mostly shared titles, reordered, a few duplicates,
    some short lists and a few empty (refused) replies."""
    rnd = random.Random(seed)
    pool = [f"The Title Number {i}" for i in range(5000)]
    neutral: dict[str, list[str]] = {}
    by_value: dict[str, dict[str, list[str]]] = {f"value {v}": {} for v in range(V)}
    for e in range(E):
        base = rnd.sample(pool, K)
        if rnd.random() < 0.03:
            base[rnd.randrange(1, K)] = base[0]  # a repeated title in the neutral list
        neutral[f"entity {e}"] = base
        for col in by_value.values():
            lst = list(base)
            for _ in range(rnd.randint(0, 15)):
                lst[rnd.randrange(K)] = rnd.choice(pool)
            for _ in range(rnd.randint(0, 5)):
                i, j = rnd.randrange(K), rnd.randrange(K)
                lst[i], lst[j] = lst[j], lst[i]
            r = rnd.random()
            if r < 0.01:
                lst = []
            elif r < 0.05:
                lst = lst[: rnd.randint(1, K - 1)]
            col[f"entity {e}"] = lst
    return neutral, by_value


# ----------------------------------------------------------------- timing


def median_time(fn: Callable[[], object], runs: int) -> tuple[float, list[float], float]:
    """Median wall time, all wall times, and median CPU time (less sensitive to load)."""
    times, cpu = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(times), times, statistics.median(cpu)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="timed runs of the fast path")
    ap.add_argument("--ref-entities", type=int, default=10, help="entities timed in pure Python")
    ap.add_argument("--ref-resamples", type=int, default=10, help="resamples timed in Python")
    args = ap.parse_args(argv)

    print(
        f"machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()},"
        f" numpy {np.__version__}"
    )
    print(
        f"workload: {E} entities x {V} values x K={K}; 3 metrics at every k; "
        f"{B} bootstrap resamples of each metric's table"
    )
    neutral, by_value = make_data()

    sub = list(neutral)[: args.ref_entities]
    sub_n = {e: neutral[e] for e in sub}
    sub_v = {v: {e: col[e] for e in sub} for v, col in by_value.items()}

    for variant in VARIANTS:

        def fast(variant: str = variant) -> None:
            cube = similarity_cube(neutral, by_value, K=K, variant=variant)  # type: ignore[arg-type]
            for m in METRICS:
                bootstrap(cube.matrix(m), n_resamples=B, seed=0)

        fast()  # warm-up
        med_fast, runs_fast, cpu_fast = median_time(fast, args.runs)

        # Correctness spot check on the subset: the fast path equals the reference.
        cube = similarity_cube(sub_n, sub_v, K=K, variant=variant)
        t = time.perf_counter()
        ref = ref_cube(sub_n, sub_v, variant)
        t_ref_pairs = (time.perf_counter() - t) * (E / len(sub))
        for m in METRICS:
            assert np.array_equal(ref[m], cube.sims[m]), f"{variant}/{m} differs from reference"
        full_sims = [[0.5] * V for _ in range(E)]
        t = time.perf_counter()
        ref_bootstrap(full_sims, args.ref_resamples, 0)
        t_ref_boot = (time.perf_counter() - t) * (B / args.ref_resamples) * len(METRICS)
        t_ref = t_ref_pairs + t_ref_boot
        print(
            f"{variant:>10}: vectorised median {med_fast:.3f} s "
            f"(runs: {', '.join(f'{x:.3f}' for x in runs_fast)}; CPU median {cpu_fast:.3f} s); "
            f"pure Python {t_ref:.1f} s (extrapolated: pairs from {len(sub)} entities "
            f"{t_ref_pairs:.1f} s + bootstrap from {args.ref_resamples} resamples "
            f"{t_ref_boot:.1f} s); speed-up x{t_ref / med_fast:.0f}"
        )


if __name__ == "__main__":
    main()
