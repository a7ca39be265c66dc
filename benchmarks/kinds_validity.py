"""Do the item-side and candidate-position tests keep their promises? False alarms and power.

Every setting is repeated ``--runs`` times (>= 200) on synthetic audits with ENTITY
HETEROGENEITY, scored by the project's own statistics (``metrics.itemshift`` and
``metrics.positions``), at the family-wise level alpha = 0.05:

- item-side: ``--entities`` seed entities, the neutral prompt and ``--values`` attribute
  values, K = 10 recommended items per reply from a 400-item catalogue with a 4-level
  price field. Each entity has its own price mix (Dirichlet), so entities differ a lot;
  each reply draws its items from that mix. A planted bias moves ONE value's mix towards
  the cheapest level by ``delta`` (the true total variation distance from neutral).
  "Detected" = the family-wise permutation p-value (max-T over values x fields) of the
  biased value is < alpha; a "false alarm" = any value's p < alpha when nothing is planted.
- candidate position: K = 8 candidates, P = 5 permuted orders per (entity, group), the
  neutral prompt and 4 values. Each entity has its own preference over its candidates
  (Dirichlet); with probability ``s`` the model instead picks the FIRST candidate shown
  (position bias of strength s); 5% of replies miss. "Detected" = the uniformity test
  (conditional randomization over orders) gives p < alpha. Group difference: one value
  gets s = 0.3 while the others have s = 0 ... p_adjusted of that value's bias < alpha.

Run:  .venv/bin/python benchmarks/kinds_validity.py --runs 200
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_recfair.metrics.itemshift import group_tests, item_counts
from pytest_recfair.metrics.positions import MEASURES, position_bias, random_orders
from pytest_recfair.replies.catalogue import Catalogue, catalogue_from_records

ALPHA = 0.05
LEVELS = ("$", "$$", "$$$", "$$$$")
ITEMS_PER_LEVEL = 100


def catalogue() -> Catalogue:
    return catalogue_from_records(
        [
            {"title": f"item {i}", "price": LEVELS[i // ITEMS_PER_LEVEL]}
            for i in range(len(LEVELS) * ITEMS_PER_LEVEL)
        ]
    )


def item_audit(
    rng: np.random.Generator, E: int, V: int, delta: float, k: int = 10
) -> tuple[dict[str, list[int]], dict[str, dict[str, list[int]]]]:
    mixes = rng.dirichlet(np.full(len(LEVELS), 2.0), size=E)  # entity heterogeneity

    def draw(mix: np.ndarray) -> list[int]:
        level = rng.choice(len(LEVELS), size=k, p=mix)
        return (level * ITEMS_PER_LEVEL + rng.integers(0, ITEMS_PER_LEVEL, size=k)).tolist()

    def biased(mix: np.ndarray) -> np.ndarray:
        # move delta of mass to the cheapest level, taken proportionally from the others
        # (capped by what the others hold): the TVD from the entity's mix is min(delta, ...)
        rest = 1.0 - mix[0]
        take = min(delta, rest)
        out = mix * (1.0 - take / rest) if rest > 0 else mix.copy()
        out[0] = mix[0] + take
        return out / out.sum()

    neutral = {f"e{e}": draw(mixes[e]) for e in range(E)}
    by_value = {
        f"v{v}": {
            f"e{e}": draw(biased(mixes[e]) if (v == 0 and delta > 0) else mixes[e])
            for e in range(E)
        }
        for v in range(V)
    }
    return neutral, by_value


def item_rates(runs: int, E: int, V: int, delta: float, B: int, seed: int) -> tuple[float, float]:
    """(share of runs where value 0 is flagged, share where any value is flagged)."""
    rng = np.random.default_rng(seed)
    cat = catalogue()
    hit = anyf = 0
    for _ in range(runs):
        counts = item_counts(*item_audit(rng, E, V, delta), cat, ["price"])
        adj = group_tests(counts, B, rng)[2]
        hit += bool(adj[0, 0] < ALPHA)
        anyf += bool((adj < ALPHA).any())
    return hit / runs, anyf / runs


def position_audit(
    rng: np.random.Generator, E: int, G: int, P: int, K: int, s: float, s_group: float | None
) -> tuple[np.ndarray, np.ndarray]:
    orders = np.stack([random_orders(K, P, rng) for _ in range(E)])  # (E, P, K)
    prefs = rng.dirichlet(np.full(K, 0.5), size=E)  # entity heterogeneity
    chosen = np.empty((E, G, P), dtype=np.int64)
    for g in range(G):
        strength = s_group if (g == 1 and s_group is not None) else s
        first = rng.random((E, P)) < strength
        liked = np.array([[rng.choice(K, p=prefs[e]) for _ in range(P)] for e in range(E)])
        pick = np.where(first, orders[:, :, 0], liked)
        miss = rng.random((E, P)) < 0.05
        chosen[:, g, :] = np.where(miss, -1, pick)
    return orders, chosen


def position_rates(
    runs: int, E: int, s: float, s_group: float | None, B: int, seed: int
) -> tuple[float, float]:
    """(share with p_uniform < alpha, share with group 1's bias flagged vs neutral)."""
    rng = np.random.default_rng(seed)
    uni = grp = 0
    for _ in range(runs):
        orders, chosen = position_audit(rng, E, 5, 5, 8, s, s_group)
        res = position_bias(
            None, chosen, 8, orders=orders, n_permutations=B, n_resamples=10, seed=rng
        )
        uni += bool(res.p_uniform < ALPHA)
        grp += bool(res.p_adjusted[0, MEASURES.index("bias")] < ALPHA)
    return uni / runs, grp / runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--permutations", type=int, default=199)
    ap.add_argument("--null-runs", type=int, default=None,
                    help="runs of the no-bias rows (default --runs): false alarms near 5%%\n"
                    "need more runs than power to be told apart from 5%%")  # fmt: skip
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "kinds.md")
    args = ap.parse_args()
    R, B = args.runs, args.permutations
    R0 = args.null_runs or R
    t0 = time.perf_counter()
    lines = [
        "# Item-side and candidate-position tests: false alarms and power",
        "",
        f"`benchmarks/kinds_validity.py --runs {R} --null-runs {R0} --permutations {B}`; "
        f"alpha = {ALPHA}; each row is the share of runs flagged (family-wise over values x "
        "fields); the rows with nothing planted use the null runs.",
        "",
        "## Item-side shift (4 price levels, K = 10, entity-specific price mixes)",
        "",
        "| entities | values | planted TVD of one value | flagged: that value | "
        "flagged: any value |",
        "| --- | --- | --- | --- | --- |",
    ]
    for E, V, delta in [(100, 4, 0.0), (100, 8, 0.0), (50, 4, 0.1), (100, 4, 0.05),
                        (100, 4, 0.1), (100, 8, 0.1), (100, 4, 0.15)]:  # fmt: skip
        hit, anyf = item_rates(
            R0 if delta == 0 else R, E, V, delta, B, seed=E * 1000 + V * 10 + int(delta * 100)
        )
        lines.append(f"| {E} | {V} | {delta:.2f} | {hit:.3f} | {anyf:.3f} |")
        print(lines[-1], flush=True)
    lines += [
        "",
        "## Candidate position (K = 8 candidates, P = 5 orders, neutral + 4 values, 5% misses)",
        "",
        "| entities | first-position strength (all groups) | value 1 strength | "
        "uniformity test flags | value 1 bias differs from neutral |",
        "| --- | --- | --- | --- | --- |",
    ]
    for E, s, sg in [(100, 0.0, None), (100, 0.05, None), (100, 0.1, None), (50, 0.1, None),
                     (100, 0.0, 0.2), (100, 0.0, 0.3)]:  # fmt: skip
        runs = R0 if s == 0 and sg is None else R
        uni, grp = position_rates(
            runs, E, s, sg, B, seed=E * 7 + int(s * 100) + int((sg or 0) * 1000)
        )
        sg_text = "same" if sg is None else f"{sg:.2f}"
        lines.append(f"| {E} | {s:.2f} | {sg_text} | {uni:.3f} | {grp:.3f} |")
        print(lines[-1], flush=True)
    lines += ["", f"Wall time: {time.perf_counter() - t0:.0f} s.", ""]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
