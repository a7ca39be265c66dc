"""The gate under the real workflow: one frozen baseline, ties, power, subset runs.

Every verdict is the project's own: results are built as ``AuditResult``s, the baseline is
written and read back through ``gate.baselines`` (the one writing path, with its stored
standard errors) and the gate is ``pytest_recfair.judge`` (settings -> compatibility ->
``gate.evaluate`` -> drift family + the baseline floor of ``gate.thresholds.floors``). Two profiles:

- ``hetero``: ``benchmarks/hetero_model.py`` (four kinds of entity with Jaccard@25
  0.73/0.39/0.11/0.09, a fixed entity x value interaction, 3% unusable cells, ties in the
  true value means), the whole FairEval grid (8 attributes x 3 metrics);
- ``sim``: the bundled simulator with its ``realistic`` entity heterogeneity (the
  ``gate_validity.py`` ``sim`` setup), scored through the real parse + metrics path.

Sections (``--only``):

- ``conditional``: 12 stored baselines, each judged against the same pool of ``--runs``
  re-recordings of the unchanged model: the false-alarm rate PER BASELINE (target <= 8%
  each) and their mean (the unconditional whole-grid rate, target <= 5%), with the floor
  off (``baseline_floor=0``, the gate before) and at its default;
- ``ties``: a true SNSR rise equal to the tolerance (0.02) with ties appearing at both ends
  (hetero, 100 entities; target <= 5%);
- ``power``: a rise of tolerance + 0.03 at 100 entities (target >= 75%);
- ``subset``: a 30-entity run against a 100-entity baseline, same model (false alarms).

Run:  nice .venv/bin/python benchmarks/baseline_validity.py --runs 100 --draws 5000
(``--draws`` lowers the drift test's sign-flip draws from the product's STABLE_DRAWS to
keep the study's CPU reasonable; the verdict rule is unchanged.)
Results are appended to ``--out`` as they come (benchmarks/results/baseline_validity.md).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import hetero_model as hm

from pytest_recfair import judge
from pytest_recfair.gate import baselines
from pytest_recfair.metrics import _drift_core, aggregate, inference
from pytest_recfair.results import (
    AttributeResult,
    AuditResult,
    GateOutcome,
    ListMeta,
    Stat,
    ValueResult,
)

FloatArray = npt.NDArray[np.float64]
Run = dict[tuple[str, str], tuple[FloatArray, npt.NDArray[np.bool_]]]
TOL = 0.02
PRODUCT_DRAWS = _drift_core.STABLE_DRAWS


# --------------------------------------------------------------------------- results


def _attribute(attr: str, metric: str, sims: FloatArray, miss: Any) -> AttributeResult:
    values = tuple(f"v{j}" for j in range(sims.shape[1]))
    ents = tuple(f"e{i}" for i in range(sims.shape[0]))
    matrix = aggregate.SimilarityMatrix(ents, values, sims, np.asarray(miss, dtype=bool))
    t = aggregate.summarize(matrix)
    vals = tuple(
        ValueResult(v, Stat(s.mean), s.n, s.missing, 0, 0, sims.shape[0])
        for v, s in t.values.items()
    )
    return AttributeResult(
        attr, metric, 25, "normalized", "zero", vals, Stat(t.snsr), Stat(t.snsv), Stat(t.pafs),
        matrix,
    )  # fmt: skip


def to_result(run: Run, n_entities: int) -> AuditResult:
    meta = ListMeta(
        test_id="bench::test", provider="sim", model="m", grid="faireval", grid_hash="g",
        templates="natural", templates_hash="t", seeds_hash="s", domain="movie", k=25,
        n_entities=n_entities, repeats=1, variant="normalized", metric="jaccard",
        language="en", perturbation=None, seed=0, record_mode="replay", plugin_version="x",
    )  # fmt: skip
    attrs = tuple(_attribute(a, m, s, miss) for (a, m), (s, miss) in run.items())
    return AuditResult(meta, attrs)


def stored(run: Run) -> AuditResult:
    """The baseline as a team has it: written by ``baselines.dumps`` and read back."""
    return baselines.loads(baselines.dumps(to_result(run, next(iter(run.values()))[0].shape[0])))


def subset(run: Run, n: int) -> Run:
    return {k: (s[:n], m[:n]) for k, (s, m) in run.items()}


def gate(cand: Run, base: AuditResult, tol: float, floor: float, seed: int = 0) -> GateOutcome:
    res = to_result(cand, base.meta.n_entities)
    return judge(res, base, tolerance=tol, baseline_floor=floor, resample_seed=seed)


# --------------------------------------------------------------------------- profiles


class Hetero:
    name = "hetero"

    def __init__(self, rng: np.random.Generator, n: int = 100) -> None:
        self.rng = rng
        self.pop = hm.hetero_population(rng, n)

    def run(self, effects: dict[str, FloatArray] | None = None) -> Run:
        return hm.draw_run(self.rng, self.pop, hm.TIED_GRID if effects is None else effects)


class Sim:
    name = "sim (realistic)"

    def __init__(self, rng: np.random.Generator, n: int = 100) -> None:
        import gate_validity as gv

        self.gv, self.k = gv, 0
        self.audit = gv.sim_audit(n, gv._sim_profile(0.40))

    def run(self, effects: dict[str, FloatArray] | None = None) -> Run:
        self.k += 1
        sims = self.gv.sim_run(self.audit, 7_000_000 + self.k)
        return {key: (s, np.isnan(s) & False) for key, s in sims.items()}


# --------------------------------------------------------------------------- sections


def wilson(hits: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (math.nan, math.nan)
    p, z = hits / n, 1.96
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


def rate(hits: int, n: int) -> str:
    lo, hi = wilson(hits, n)
    return f"{100 * hits / n:.1f}% ({hits}/{n}; Wilson {100 * lo:.1f}-{100 * hi:.1f})"


def conditional(args: argparse.Namespace, profile: Any) -> list[str]:
    bases = [stored(profile.run()) for _ in range(12)]
    cands = [profile.run() for _ in range(args.runs)]
    rows = []
    for floor in args.floors:
        per = [
            sum(not gate(c, b, 0.0, floor, r).passed for r, c in enumerate(cands)) for b in bases
        ]
        n = len(cands)
        rates = ", ".join(f"{100 * h / n:.0f}" for h in per)
        worst = max(per)
        rows.append(
            f"| {profile.name} | {floor:g} | {rates} | {100 * worst / n:.1f}% (Wilson upper "
            f"{100 * wilson(worst, n)[1]:.1f}%) | {sum(1 for h in per if h / n > 0.08)} | "
            f"{rate(sum(per), n * len(bases))} |"
        )
    return rows


def _tie_effects() -> tuple[dict[str, FloatArray], dict[str, FloatArray]]:
    """Religion's SNSR rises by exactly the tolerance and ties appear at both ends."""
    h = TOL / 2
    before = dict(hm.TIED_GRID, religion=np.array([0.03, 0.03 - h, -0.02 + h, -0.02]))
    after = dict(hm.TIED_GRID, religion=np.array([0.03 + h, 0.03 + h, -0.02 - h, -0.02 - h]))
    return before, after


def _rise_effects(rise: float) -> tuple[dict[str, FloatArray], dict[str, FloatArray]]:
    moved = hm.TIED_GRID["religion"].copy()
    moved[0] += rise  # unique top value: SNSR rises by exactly ``rise``
    return dict(hm.TIED_GRID), dict(hm.TIED_GRID, religion=moved)


def _moved(args: argparse.Namespace, effects: tuple[dict[str, Any], dict[str, Any]]) -> int:
    rng, hits = np.random.default_rng(args.seed + 1), 0
    for r in range(args.runs):
        prof = Hetero(rng)
        base = stored(prof.run(effects[0]))
        hits += not gate(prof.run(effects[1]), base, args.tol, args.floor, r).passed
    return hits


def ties(args: argparse.Namespace, _: Any) -> list[str]:
    b, a = _tie_effects()
    pop = hm.hetero_population(np.random.default_rng(3), 100)
    truth = [
        float(np.ptp(hm.true_means(pop, "religion", d))) for d in (b["religion"], a["religion"])
    ]
    hits = _moved(args, (b, a))
    return [
        f"| hetero, religion {truth[0]:.3f} -> {truth[1]:.3f} (ties appear at both ends) | "
        f"{TOL:g} | {rate(hits, args.runs)} |"
    ]


def power(args: argparse.Namespace, _: Any) -> list[str]:
    rise = max(args.tol, 0.02) + 0.03
    hits = _moved(args, _rise_effects(rise))
    return [
        f"| hetero, religion SNSR +{rise:g}, baseline_floor {args.floor:g} | {args.tol:g} | "
        f"{rate(hits, args.runs)} |"
    ]


def _reported_detectable(args: argparse.Namespace) -> float:
    """The median minimum detectable SNSR rise the drift test reports for religion
    (jaccard) under the gate's defaults (tolerance 0.02, the baseline floor), over pilots."""
    from pytest_recfair.gate import drift
    from pytest_recfair.gate import thresholds as floor

    rng, out = np.random.default_rng(args.seed + 3), []
    for _ in range(20):
        prof = Hetero(rng)
        base = stored(prof.run())
        now = to_result(prof.run(), base.meta.n_entities)
        d = drift.evaluate_drift(now, base, tolerance=TOL, floors=floor.floors(base, args.floor))
        assert d.test is not None
        (v,) = [v for v in d.test.members if v.key == ("religion", "jaccard", "snsr")]
        out.append(v.detectable)
    return float(np.median(out))


def mde(args: argparse.Namespace, _: Any) -> list[str]:
    rise = _reported_detectable(args)
    hits = _moved(args, _rise_effects(rise))
    return [
        f"| hetero, religion SNSR +{rise:.4f} (reported MDE) | {TOL:g} | {rate(hits, args.runs)} |"
    ]


def subset_runs(args: argparse.Namespace, profile: Any) -> list[str]:
    rng, hits, n = np.random.default_rng(args.seed + 2), 0, 0
    for r in range(args.runs):
        prof = Hetero(rng)
        base = stored(prof.run())
        hits += not gate(subset(prof.run(), 30), base, 0.0, args.floor, r).passed
        n += 1
    return [f"| hetero, 30 of 100 baseline entities, tolerance 0 | {rate(hits, n)} |"]


def seed_stability(args: argparse.Namespace, _: Any) -> list[str]:
    """The same data judged with ``resample_seed`` 0 and 1, the product's sign-flip draws
    (not ``--draws``): |delta p| of every member's family-wise p, and verdicts that move."""
    from pytest_recfair.gate import drift
    from pytest_recfair.gate import thresholds as floor

    draws = _drift_core.STABLE_DRAWS
    _drift_core.STABLE_DRAWS = inference.STABLE_DRAWS = PRODUCT_DRAWS  # type: ignore[misc]
    rng, deltas, flips, unusable = np.random.default_rng(args.seed + 4), [], 0, []
    try:
        for _ in range(args.runs):
            prof = Hetero(rng)
            base = stored(prof.run())
            now = to_result(prof.run(), base.meta.n_entities)
            fl = floor.floors(base, args.floor)
            ta, tb = (
                drift.evaluate_drift(now, base, tolerance=TOL, floors=fl, seed=s).test
                for s in (0, 1)
            )
            assert ta is not None
            assert tb is not None
            for x, y in zip(ta.members, tb.members, strict=True):
                deltas.append(abs(x.p_adjusted - y.p_adjusted))
                unusable.append(x.statistic == "unusable")
            flips += ta.failed != tb.failed
    finally:
        _drift_core.STABLE_DRAWS = inference.STABLE_DRAWS = draws  # type: ignore[misc]
    d, u = np.asarray(deltas), np.asarray(unusable, dtype=bool)
    return [
        f"| hetero, tolerance {TOL:g}, {PRODUCT_DRAWS} draws | {d.size} | "
        f"{np.quantile(d, 0.99):.4f} | {np.quantile(d[~u], 0.99):.4f} | "
        f"{np.quantile(d[u], 0.99):.4f} | {d.max():.4f} | {flips} of {args.runs} |"
    ]


def _planned(base: AuditResult, tol: float, floor: float) -> tuple[float, float]:
    """(entities needed, detectable rise) the plan prints (``engine.plan.resolution``)."""
    import re

    from pytest_recfair import settings
    from pytest_recfair.engine.plan import resolution

    s = settings.resolve(marker={"tolerance": tol}, cli={"baseline_floor": floor})
    (line,) = resolution(s, base, base.attributes[0].matrix.entities)
    needed = re.search(r"needs ~([\d,]+) entities", line)
    n = float(needed.group(1).replace(",", "")) if needed else 0.0
    found = re.search(r"rise below ~([\d.]+)", line)
    assert found is not None, line
    return n, float(found.group(1))


def _religion(pop: hm.HeteroPopulation, rng: np.random.Generator, rise: float = 0.0) -> Run:
    """One run of religion alone, Jaccard alone: the single comparison the plan speaks of."""
    delta = hm.TIED_GRID["religion"].copy()
    delta[0] += rise  # unique top value: SNSR rises by exactly ``rise``
    return {
        ("religion", "jaccard"): hm.draw_run(rng, pop, {"religion": delta})[("religion", "jaccard")]
    }


def plan(args: argparse.Namespace, _: Any) -> list[str]:
    """The plan's two figures against the gate: the entities it names for a tolerance
    (does the floor of a baseline that size fall to the tolerance?) and the rise it says a
    run can detect (is it caught 9 times in 10?). Each repetition plans from the stored
    baseline of a fresh population, as a team does: a baseline of the size it names, on
    another population, gives the floor; the next run of the first population, worsened by
    the rise it names, is gated against that baseline."""
    from pytest_recfair.gate import thresholds as floors

    rng, rows = np.random.default_rng(args.seed + 5), []
    for n0, tol in ((20, 0.01), (20, 0.02), (100, 0.02)):
        below, needed, ratio, caught, rises = 0, [], [], 0, []
        for r in range(args.runs):
            pilot = hm.hetero_population(rng, n0)
            base = stored(_religion(pilot, rng))
            n, rise = _planned(base, tol, args.floor)
            needed.append(n)
            rises.append(rise)
            if n > n0:  # a baseline of the planned size: is its floor at the tolerance?
                big = stored(_religion(hm.hetero_population(rng, math.ceil(n)), rng))
                f = max(floors.floors(big, args.floor).get(("religion", "jaccard", "snsr"), 0), 0)
                below += f <= tol
                ratio.append(f / tol)
            # the model's next run worsened by the planned rise, gated against the baseline
            caught += not gate(_religion(pilot, rng, rise), base, tol, args.floor, r).passed
        planned = (
            f"~{np.median(needed):,.0f} (median); floor <= tolerance at that size in "
            f"{rate(below, len(ratio))}, floor / tolerance median {np.median(ratio):.2f}"
            if ratio
            else "none: the floor is below the tolerance"
        )
        rows.append(
            f"| {n0} | {tol:g} | {planned} | ~{np.median(rises):.3f} (median) | "
            f"{rate(caught, args.runs)} |"
        )
    return rows


SECTIONS: dict[str, tuple[str, Callable[[argparse.Namespace, Any], list[str]]]] = {
    "conditional": (
        "| profile | baseline_floor | false alarms per stored baseline (%) | worst | "
        "baselines > 8% | all (unconditional) |\n| --- | --- | --- | --- | --- | --- |",
        conditional,
    ),
    "ties": ("| setting | tolerance | fails |\n| --- | --- | --- |", ties),
    "power": ("| setting | tolerance | caught |\n| --- | --- | --- |", power),
    "mde": ("| setting | tolerance | caught (target 90 ± 5) |\n| --- | --- | --- |", mde),
    "subset": ("| setting | false alarms |\n| --- | --- |", subset_runs),
    "plan": (
        "| entities | tolerance | entities the plan names for the tolerance | detectable rise "
        "the plan names | that rise caught (target 90) |\n| --- | --- | --- | --- | --- |",
        plan,
    ),
    "seed": (
        "| setting | p-values | 99th pct abs(delta p) | spreads | unusable shares | max | "
        "verdicts that move |\n| --- | --- | --- | --- | --- | --- | --- |",
        seed_stability,
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200, help="runs per setting")
    ap.add_argument("--draws", type=int, default=_drift_core.STABLE_DRAWS)
    ap.add_argument("--tol", type=float, default=TOL, help="power: the tolerance")
    ap.add_argument("--floor", type=float, default=1.645, help="baseline_floor studied")
    ap.add_argument(
        "--floors", type=float, nargs="+", default=[0.0, 1.645], help="conditional: floors"
    )
    ap.add_argument("--profile", choices=("hetero", "sim"), action="append")
    ap.add_argument("--only", choices=sorted(SECTIONS), action="append")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results/baseline_validity.md"))
    args = ap.parse_args(argv)
    _drift_core.STABLE_DRAWS = inference.STABLE_DRAWS = args.draws  # type: ignore[misc]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    head = f"runs {args.runs}, sign-flip draws {args.draws}, baseline_floor {args.floor:g}"
    print(head)
    with out.open("a", encoding="utf-8") as fh:
        fh.write(f"\n# {time.strftime('%Y-%m-%d %H:%M')} UTC: {head}\n")
    for key in args.only or list(SECTIONS):
        header, fn = SECTIONS[key]
        profiles = args.profile or ["hetero"]
        for name in profiles if key in ("conditional",) else ["hetero"]:
            t0 = time.process_time()
            prof = Hetero(rng) if name == "hetero" else Sim(rng)
            rows = fn(args, prof)
            text = f"\n## {key} ({time.process_time() - t0:.0f} s CPU)\n\n{header}\n" + "\n".join(
                rows
            )
            print(text, flush=True)
            with out.open("a", encoding="utf-8") as fh:
                fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
