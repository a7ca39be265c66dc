"""Does the plan's line for the item-side, candidate-position and role-play kinds keep its word?

``engine.plan.resolution`` says, from a stored baseline's interval, (a) the entities at
which a rise of 2 x tolerance is caught 9 times in 10 and (b) the smallest rise a run of
the baseline's size can reliably detect. Each repetition, as a team would: a fresh
population of entities (each with its own preferences), a baseline of ``n0`` of them
scored by the project's metrics, the plan read from the baseline's stored interval; then
(b) the next run of the same entities, worsened by the rise the plan names, gated by the
kind's own drift test (``compare_positions`` / ``compare_shift``, margin the tolerance,
p < alpha and delta > tolerance); and (a) a baseline and run of the entities the plan
names (same population law), the run worsened by 2 x tolerance. Target: 90% each.

Positions: K = 8 candidates, 5 orders, neutral + 4 values, 5% misses, first shown picked
with probability s (the true pooled bias is s (K - 1) / K). Items: 4 price levels,
K = 10, neutral + 4 values, one value's mix moved towards "$" by the planted shift.
Role play: one attribute x type, 3 rounds per question, each question biased with its own
probability (Beta(0.5, 2)); the gate's sign-flip drift test (``drift_test``, Holm over
the cell and the undetermined share); its "entities" are questions.

Run:  .venv/bin/python benchmarks/plan_validity_kinds.py --runs 200
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.kinds_validity import ITEMS_PER_LEVEL, LEVELS, catalogue
from pytest_recfair import settings
from pytest_recfair.engine import registry  # noqa: F401  (registers the kinds' sections)
from pytest_recfair.engine.items import field_codes
from pytest_recfair.engine.plan import resolution
from pytest_recfair.metrics.itemshift import compare_shift, item_counts, shift
from pytest_recfair.metrics.positions import (
    compare_positions,
    group_tables,
    position_bias,
    random_orders,
)
from pytest_recfair.metrics.roleplay import QuestionResult, RoleplayResult
from pytest_recfair.metrics.roleplay_gate import drift_test
from pytest_recfair.results import AuditResult, ListMeta

ALPHA, K, P, G, B = 0.05, 8, 5, 5, 200


def _meta(n: int) -> ListMeta:
    return ListMeta(
        test_id="bench::test", provider="sim", model="m", grid="faireval", grid_hash="g",
        templates="natural", templates_hash="t", seeds_hash="s", domain="movie", k=25,
        n_entities=n, repeats=1, variant="normalized", metric="jaccard",
        language="en", perturbation=None, seed=0, record_mode="replay", plugin_version="x",
    )  # fmt: skip


def _planned(extras: dict[str, Any], n: int, tol: float) -> tuple[float, float]:
    """(entities named for 2 x tolerance, detectable rise) of the plan's line."""
    s = settings.resolve(marker={"tolerance": tol})
    (line,) = resolution(s, AuditResult(_meta(n), (), extras=extras), [str(i) for i in range(n)])
    need = re.search(r"needs ~([\d,]+) entities", line)
    rise = re.search(r"rise below ~([\d.]+)", line)
    assert need is not None, line
    assert rise is not None, line
    return float(need.group(1).replace(",", "")), float(rise.group(1))


# --------------------------------------------------------------------------- positions
def _pos_run(rng: np.random.Generator, prefs: np.ndarray, s: float) -> tuple[Any, Any, Any]:
    E = len(prefs)
    orders = np.stack([random_orders(K, P, rng) for _ in range(E)])  # (E, P, K)
    liked = np.array([[rng.choice(K, size=P, p=prefs[e]) for _ in range(G)] for e in range(E)])
    first = rng.random((E, G, P)) < s
    chosen = np.where(first, orders[:, None, :, 0], liked)
    chosen = np.where(rng.random((E, G, P)) < 0.05, -1, chosen)
    at = np.argmax(orders[:, None, :, :] == chosen[..., None], axis=-1)
    pos = np.where(chosen < 0, -1, at)
    return pos, chosen, orders


def _pos_counts(run: tuple[Any, Any, Any]) -> np.ndarray:
    hist, _ = group_tables(run[0], run[1], K)
    return np.asarray(hist.sum(axis=1), dtype=np.float64)


def _pos_caught(rng: np.random.Generator, prefs: np.ndarray, s: float, rise: float,
                tol: float, base: Any | None = None) -> bool:  # fmt: skip
    base = _pos_run(rng, prefs, s) if base is None else base
    cand = _pos_run(rng, prefs, s + rise * K / (K - 1))
    cmp = compare_positions(_pos_counts(base), _pos_counts(cand), n_resamples=B, seed=rng,
                            margin=tol)  # fmt: skip
    return bool(cmp.delta[0] > tol and cmp.p_value[0] < ALPHA)


def positions(rng: np.random.Generator, runs: int, n0: int, tol: float, s: float) -> str:
    named, rises, caught, caught_named = [], [], 0, 0
    for _ in range(runs):
        prefs = rng.dirichlet(np.full(K, 0.5), size=n0)
        base = _pos_run(rng, prefs, s)
        res = position_bias(base[0], base[1], K, orders=base[2], n_permutations=10,
                            n_resamples=B, seed=rng)  # fmt: skip
        row = {"attribute": "religion", "pooled_bias": res.pooled_bias,
               "pooled_bias_ci": list(res.pooled_bias_ci)}  # fmt: skip
        n, rise = _planned({"positions": {"attributes": [row]}}, n0, tol)
        named.append(n)
        rises.append(rise)
        caught += _pos_caught(rng, prefs, s, rise, tol, base)
        big = rng.dirichlet(np.full(K, 0.5), size=max(2, round(n)))
        caught_named += _pos_caught(rng, big, s, 2 * tol, tol)
    return _row(n0, tol, f"s = {s:g}", named, rises, caught, caught_named, runs)


# --------------------------------------------------------------------------- items
def _item_run(rng: np.random.Generator, mixes: np.ndarray, delta: float) -> Any:
    def draw(mix: np.ndarray, d: float) -> list[int]:
        rest = 1.0 - mix[0]
        take = min(d, rest)
        m = mix * (1.0 - take / rest) if rest > 0 else mix.copy()
        m[0] = mix[0] + take
        level = rng.choice(len(LEVELS), size=10, p=m / m.sum())
        return [int(x) for x in level * ITEMS_PER_LEVEL + rng.integers(0, ITEMS_PER_LEVEL, 10)]

    neutral = {f"e{e}": draw(mixes[e], 0.0) for e in range(len(mixes))}
    values = {f"v{v}": {f"e{e}": draw(mixes[e], delta if v == 0 else 0.0)
                        for e in range(len(mixes))} for v in range(G - 1)}  # fmt: skip
    return item_counts(neutral, values, field_codes(CAT, ["price"]))


def _item_caught(rng: np.random.Generator, mixes: np.ndarray, delta: float, rise: float,
                 tol: float, base: Any | None = None) -> bool:  # fmt: skip
    base = _item_run(rng, mixes, delta) if base is None else base
    cmp = compare_shift(base, _item_run(rng, mixes, delta + rise), n_resamples=B, seed=rng,
                        margin=tol)  # fmt: skip
    return bool(cmp.delta[0] > tol and cmp.p_value[0] < ALPHA)


def items(rng: np.random.Generator, runs: int, n0: int, tol: float, delta: float) -> str:
    named, rises, caught, caught_named = [], [], 0, 0
    for _ in range(runs):
        mixes = rng.dirichlet(np.full(len(LEVELS), 2.0), size=n0)
        base = _item_run(rng, mixes, delta)
        res = shift(base, n_permutations=10, n_resamples=B, seed=rng)
        field = {"field": "price", "max_shift": float(res.max_shift[0]),
                 "max_shift_ci": [float(x) for x in res.max_shift_ci[0]]}  # fmt: skip
        data = {"attributes": [{"attribute": "first name", "fields": [field]}]}
        n, rise = _planned({"items": data}, n0, tol)
        named.append(n)
        rises.append(rise)
        caught += _item_caught(rng, mixes, delta, rise, tol, base)
        big = rng.dirichlet(np.full(len(LEVELS), 2.0), size=max(2, round(n)))
        caught_named += _item_caught(rng, big, delta, 2 * tol, tol)
    return _row(n0, tol, f"planted {delta:g}", named, rises, caught, caught_named, runs)


# --------------------------------------------------------------------------- role play
def _role_run(rng: np.random.Generator, p: np.ndarray) -> RoleplayResult:
    biased = rng.random((len(p), 3)) < p[:, None]
    return RoleplayResult(tuple(
        QuestionResult(str(i), "r", "age", "yesno", True,
                       tuple("biased" if b else "unbiased" for b in row), int(row.sum()) >= 2)
        for i, row in enumerate(biased)
    ))  # fmt: skip


def _role_caught(rng: np.random.Generator, p: np.ndarray, rise: float, tol: float,
                 base: RoleplayResult | None = None) -> bool:  # fmt: skip
    base = _role_run(rng, p) if base is None else base
    worse = p + rise * (1 - p) / np.mean(1 - p)  # the rate rises by exactly ``rise``
    drift = drift_test(base, _role_run(rng, worse), tolerance=tol, alpha=ALPHA)
    return drift.cells[0].failed  # the biased-answer rate (the other: undetermined share)


def roleplay(rng: np.random.Generator, runs: int, n0: int, tol: float) -> str:
    named, rises, caught, caught_named = [], [], 0, 0
    for _ in range(runs):
        p = rng.beta(0.5, 2.0, size=n0)  # questions differ a lot; many never biased
        base = _role_run(rng, p)
        n, rise = _planned({"roleplay": {"result": base.to_dict()}}, n0, tol)
        named.append(n)
        rises.append(rise)
        caught += _role_caught(rng, p, rise, tol, base)
        caught_named += _role_caught(rng, rng.beta(0.5, 2.0, size=max(2, round(n))), 2 * tol, tol)
    return _row(n0, tol, "mean rate 0.2", named, rises, caught, caught_named, runs)


def _row(n0: int, tol: float, what: str, named: list[float], rises: list[float],
         caught: int, caught_named: int, runs: int) -> str:  # fmt: skip
    return (
        f"| {what} | {n0} | {tol:g} | ~{np.median(rises):.3f} | {100 * caught / runs:.0f}% | "
        f"~{np.median(named):,.0f} | {100 * caught_named / runs:.0f}% |"
    )


CAT = catalogue()
HEAD = (
    "| baseline | entities | tolerance | detectable rise the plan names (median) | that rise "
    "caught | entities named for 2 x tolerance (median) | 2 x tolerance caught there |\n"
    "| --- | --- | --- | --- | --- | --- | --- |"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "plan_kinds.md")
    args = ap.parse_args()
    rng, t0 = np.random.default_rng(args.seed), time.perf_counter()
    lines = [
        "# The plan's figures for the item-side, position and role-play kinds, checked",
        "",
        f"`benchmarks/plan_validity_kinds.py --runs {args.runs}`; alpha {ALPHA}, "
        f"{B} bootstrap resamples.",
        "",
        "## Candidate position (pooled bias)",
        "",
        HEAD,
    ]
    for n0, tol, s in ((60, 0.03, 0.1), (120, 0.02, 0.1)):
        lines.append(positions(rng, args.runs, n0, tol, s))
        print(lines[-1], flush=True)
    lines += ["", "## Item side (largest shift of the price field)", "", HEAD]
    for n0, tol, delta in ((80, 0.05, 0.15), (80, 0.03, 0.15)):
        lines.append(items(rng, args.runs, n0, tol, delta))
        print(lines[-1], flush=True)
    lines += ["", "## Role play (one attribute x type: biased-answer rate, 3 rounds)", "", HEAD]
    for n0, tol in ((100, 0.05), (300, 0.03)):
        lines.append(roleplay(rng, args.runs, n0, tol))
        print(lines[-1], flush=True)
    lines += ["", f"Wall time: {time.perf_counter() - t0:.0f} s.", ""]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
