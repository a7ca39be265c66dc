"""Gate, baseline and report benchmark at paper scale.

One audit: 3 attributes (4, 8 and 31 values, the FaiRLLM grid sizes of religion, race and
the widest attribute) x 1,000 entities, each with its bootstrap CIs from
pytest_recfair.metrics. Timed, as medians of several runs (the machine is shared):

- gate.evaluate against a baseline where every statistic rose (so every attribute runs the
  paired bootstrap, 1,000 resamples); reference: the bare stats.paired_comparison calls it makes;
- baselines.write + baselines.load (schema validation included); reference: a plain
  json.dumps(result.to_dict()) + json.loads + AuditResult.from_dict round trip;
- to_html / to_markdown / terminal_summary for 20 such results; reference:
  to_json of the same results.

Run:  .venv/bin/python benchmarks/bench_gate.py [--runs 7] [--entities 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _machine import cpu_model

import pytest_recfair.engine.registry  # noqa: F401  (the report looks kinds up in it)
from pytest_recfair.gate import baselines
from pytest_recfair.gate import thresholds as gate
from pytest_recfair.metrics import aggregate, stats
from pytest_recfair.report.html_report import to_html
from pytest_recfair.report.markdown import to_json, to_markdown
from pytest_recfair.report.terminal import terminal_summary
from pytest_recfair.results import (
    AttributeResult,
    AuditResult,
    Interval,
    ListMeta,
    Stat,
    ValueResult,
)
from pytest_recfair.vocab import STATISTICS

SIZES = {"religion": 4, "race": 8, "wide": 31}


def _attribute(
    name: str, n_values: int, n_entities: int, shift: float, seed: int
) -> AttributeResult:
    rng = np.random.default_rng(seed)
    values = tuple(f"{name}-{i}" for i in range(n_values))
    base = np.random.default_rng(99).uniform(0.3, 0.8, size=(n_entities, 1))
    bias = np.zeros(n_values)
    bias[0] = shift
    sims = np.clip(base + bias + rng.normal(0, 0.08, size=(n_entities, n_values)), 0, 1)
    m = aggregate.SimilarityMatrix(
        entities=tuple(f"e{i}" for i in range(n_entities)),
        values=values,
        sims=sims,
        missing=np.zeros(sims.shape, dtype=bool),
    )
    t = aggregate.summarize(m)
    b = stats.bootstrap(m, seed=seed)
    return AttributeResult(
        attribute=name,
        metric="jaccard",
        k=25,
        variant="normalized",
        missing_policy="zero",
        values=tuple(
            ValueResult(
                v, Stat(t.values[v].mean, Interval(*b.value_ci[v])), n_entities, 0, 0, 0, n_entities
            )
            for v in values
        ),
        snsr=Stat(t.snsr, Interval(*b.snsr_ci)),
        snsv=Stat(t.snsv, Interval(*b.snsv_ci)),
        pafs=Stat(t.pafs, Interval(*b.pafs_ci)),
        matrix=m,
    )


def make_audit(
    n_entities: int, shift: float, seed: int, test_id: str = "t.py::test_x"
) -> AuditResult:
    meta = ListMeta(
        test_id=test_id, provider="sim", model="sim-v1", grid="faireval", grid_hash="a" * 64,
        templates="natural", templates_hash="b" * 64, seeds_hash="c" * 64, domain="movie",
        k=25, n_entities=n_entities, repeats=1, variant="normalized", metric="jaccard",
        language="en", perturbation=None, seed=0, record_mode="none", plugin_version="0.1.0",
    )  # fmt: skip
    attrs = tuple(
        _attribute(name, n, n_entities, shift, seed + i)
        for i, (name, n) in enumerate(SIZES.items())
    )
    return AuditResult(meta=meta, attributes=attrs)


def paired(
    fn: Callable[[], object], ref: Callable[[], object], runs: int
) -> tuple[float, float, float]:
    """Medians of fn and ref timed alternately, and the median of the per-run ratios.

    Alternating keeps a burst of load from the other jobs on the machine from landing on
    one side only.
    """
    fn()
    ref()  # warm caches (schema, imports)
    t_fn, t_ref, ratios = [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        ref()
        t2 = time.perf_counter()
        t_fn.append(t1 - t0)
        t_ref.append(t2 - t1)
        ratios.append((t1 - t0) / (t2 - t1))
    return statistics.median(t_fn), statistics.median(t_ref), statistics.median(ratios)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--entities", type=int, default=1000)
    args = ap.parse_args()
    E, runs = args.entities, args.runs

    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"audit: {E} entities x attributes of {list(SIZES.values())} values; {runs} runs")

    baseline = make_audit(E, 0.0, seed=0)
    regressed = make_audit(E, -0.1, seed=1)
    limits = gate.Thresholds(max_snsr=0.5)
    outcome = gate.evaluate(regressed, baseline, limits, tolerance=0.0)
    assert not outcome.passed
    assert outcome.failures, outcome

    def bare_compare() -> None:
        for a, b in zip(regressed.attributes, baseline.attributes, strict=True):
            for stat in STATISTICS:
                stats.paired_comparison(b.matrix, a.matrix, stat, seed=0)

    rows: list[tuple[str, str, tuple[float, float, float]]] = []
    gated = paired(
        lambda: gate.evaluate(regressed, baseline, limits, tolerance=0.0), bare_compare, runs
    )
    rows.append(("gate.evaluate (drift test)", "paired_comparison per statistic", gated))

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "b.json"

        def round_trip() -> None:
            baselines.write(path, baseline)
            baselines.load(path)

        def plain() -> None:
            text = json.dumps(baseline.to_dict())
            AuditResult.from_dict(json.loads(text))

        rt = paired(round_trip, plain, runs)
        size = path.stat().st_size
    rows.append((f"baselines write+load ({size / 1e6:.1f} MB)", "json+from_dict", rt))

    results = [
        replace(r, gate=gate.evaluate(r, baseline, limits, tolerance=0.02))
        for r in (
            make_audit(E, -0.05 * (i % 3), seed=i, test_id=f"t.py::test_{i}") for i in range(20)
        )
    ]
    for name, fn in (
        ("to_html (20 tests)", lambda: to_html(results, [baseline])),
        ("to_markdown (20 tests)", lambda: to_markdown(results, [baseline])),
        ("terminal_summary (20 tests)", lambda: terminal_summary(results)),
        ("to_json (20 tests)", lambda: to_json(results)),
    ):
        rows.append((name, "json.dumps(to_dict)", paired(fn, lambda: _plain_json(results), runs)))

    print(f"\n{'operation':<40} {'median':>10}  {'reference':<20} {'median':>10} {'ratio':>7}")
    for name, ref, (t, tr, ratio) in rows:
        print(f"{name:<40} {t * 1e3:>8.1f}ms  {ref:<20} {tr * 1e3:>8.1f}ms {ratio:>7.2f}")


def _plain_json(results: list[AuditResult]) -> str:
    return json.dumps([r.to_dict() for r in results])


if __name__ == "__main__":
    main()
