"""Is the item-side shift test valid on the implicit grid's shapes? Size and power (issue 21).

The shape: with ``grid="implicit"`` each group is ~22 first names pooled, each name one
list of 10 items, so a group has ~220 items per entity (city) against ONE neutral list of
10 items. Each city has its own price-level distribution over levels 1-4 (all cities
alike, or drawn from a Dirichlet around (0.3, 0.4, 0.2, 0.1)); every list draws 10 items
from it. Under the null every list of a city draws from the same distribution; under the
alternative, group B's lists draw from the distribution shifted DOWN by ``delta`` price
levels on average (a share s = delta / (1 - p1) of each level's mass moves one level
down), group A's unchanged.

Three tests on the same data, family-wise at alpha = 0.05 over the 2 groups x 1 field:

- ``old``: permute the POOLED group rows within a city (the test before issue 21);
- ``neutral``: permute the city's LISTS within the city, then pool (the shift of each
  group from the neutral prompt; what ``max_shift`` gates);
- ``between``: the same permutations, each group against the other groups (LMRec).

Run:  .venv/bin/python benchmarks/itemside_validity.py            (200 simulations each)
      .venv/bin/python benchmarks/itemside_validity.py --sims 1000
Writes benchmarks/results/itemside_validity.md.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_recfair.metrics import itemshift

LEVELS = ("1", "2", "3", "4")
GROUPS = ("A", "B")
MEAN = np.asarray([0.3, 0.4, 0.2, 0.1])  # Yelp-like: most restaurants at levels 1-2


def _shifted(p: np.ndarray, delta: float) -> np.ndarray:
    """``p`` with its mean level lowered by ``delta`` (mass moves one level down)."""
    if delta == 0:
        return p
    down = np.concatenate([[p[0] + p[1]], p[2:], [0.0]])
    s = min(1.0, delta / max(1e-9, 1.0 - p[0]))
    return (1 - s) * p + s * down


def simulate(
    rng: np.random.Generator, cities: int, names: int, items: int, delta: float, spread: float
) -> itemshift.ItemCounts:
    """Per-list counts: list 0 the neutral prompt, then ``names`` lists per group."""
    lists = 1 + names * len(GROUPS)
    group = np.asarray([0] + [1 + g for g in range(len(GROUPS)) for _ in range(names)])
    cube = np.zeros((cities, lists, len(LEVELS)), dtype=np.int64)
    for e in range(cities):
        # spread: Dirichlet concentration around the mean levels (0: every city the same)
        p = MEAN if spread == 0 else rng.dirichlet(MEAN * spread)
        q = _shifted(p, delta)
        for v in range(lists):
            cube[e, v] = rng.multinomial(items, q if group[v] == 2 else p)
    pooled = np.stack([cube[:, group == g].sum(axis=1) for g in range(1 + len(GROUPS))], axis=1)
    entities = tuple(f"city{e}" for e in range(cities))
    return itemshift.ItemCounts(
        entities,
        (itemshift.NEUTRAL, *GROUPS),
        ("price",),
        (LEVELS,),
        pooled,
        cube,
        group,
    )


def rejections(
    sims: int,
    setting: tuple[str, int, int, float, float],
    perms: int,
    seed: int,
    alpha: float,
) -> dict[str, int]:
    _, cities, names, delta, spread = setting
    rng = np.random.default_rng(seed)
    hits = {"old": 0, "neutral": 0, "between": 0}
    for i in range(sims):
        counts = simulate(rng, cities, names, 10, delta, spread)
        _, _, adj, _, adj_between = itemshift.group_tests(counts, perms, seed + i)
        old = replace(counts, lists=None, list_group=None)  # pooled rows permuted
        adj_old = itemshift.group_tests(old, perms, seed + i)[2]
        hits["neutral"] += bool((adj < alpha).any())
        hits["between"] += bool((adj_between < alpha).any())
        hits["old"] += bool((adj_old < alpha).any())
    return hits


def _cell(k: int, n: int) -> str:
    p = k / n
    return f"{100 * p:5.1f}% ± {100 * 1.96 * math.sqrt(p * (1 - p) / n):.1f} ({k}/{n})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=200)
    ap.add_argument("--perms", type=int, default=500)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results/itemside_validity.md"))
    args = ap.parse_args(argv)
    settings = [
        ("size, 220 vs 10 items, cities alike", 100, 22, 0.0, 0.0),
        ("size, 220 vs 10 items, cities differ (Dirichlet 20)", 100, 22, 0.0, 20.0),
        ("size, 220 vs 10 items, cities differ (Dirichlet 4)", 100, 22, 0.0, 4.0),
        ("size, equal rows (1 list per group), cities alike", 100, 1, 0.0, 0.0),
        ("size, 220 vs 10 items, 20 cities", 20, 22, 0.0, 20.0),
        ("power, -0.1 price level, cities differ (Dirichlet 20)", 100, 22, 0.1, 20.0),
        ("power, -0.3 price level, cities differ (Dirichlet 20)", 100, 22, 0.3, 20.0),
        ("power, -0.1 price level, cities alike", 100, 22, 0.1, 0.0),
        ("power, -0.3 price level, cities alike", 100, 22, 0.3, 0.0),
    ]
    lines = [
        "# benchmarks/itemside_validity.py",
        "",
        f"{args.sims} simulations per setting, {args.perms} permutations, alpha 0.05, "
        f"seed {args.seed}; family-wise rejection of any group (2 groups x 1 field).",
        "",
        "| setting | cities | old (pooled rows permuted) | from neutral (lists permuted) "
        "| between groups (lists permuted) |",
        "| --- | --- | --- | --- | --- |",
    ]
    t0 = time.perf_counter()
    for setting in settings:
        h = rejections(args.sims, setting, args.perms, args.seed, 0.05)
        row = f"| {setting[0]} | {setting[1]} | {_cell(h['old'], args.sims)} | "
        row += f"{_cell(h['neutral'], args.sims)} | {_cell(h['between'], args.sims)} |"
        lines.append(row)
        print(row, flush=True)
    lines += ["", f"({time.perf_counter() - t0:.0f} s on 2 shared cores)", ""]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
