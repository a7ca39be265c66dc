"""The drift table between two stored runs (``python -m pytest_recfair compare A.json B.json``).

Each test audited in both runs is compared the way the gate compares a run with its
baseline (``drift.evaluate_drift``: paired sign-flip swaps of the shared entities,
Westfall–Young step-down max-T over every attribute × metric × statistic of the test, plus
each attribute's unusable share), with A in the baseline's place. SNSR, SNSV and PAFS are
all tested (one-sided: is B less fair than A by more than ``tolerance``?). The tests are
combined by Bonferroni: each family is tested at ``alpha / number of compared tests``, so
two runs of one model are called worse with probability at most ``alpha`` overall.
Pure: no pytest, no httpx.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_recfair.gate import baselines, drift
from pytest_recfair.metrics.inference import DriftResult
from pytest_recfair.report.fmt import LABEL, fmt, fmt_delta
from pytest_recfair.results import AttributeResult, AuditResult
from pytest_recfair.vocab import STATISTICS, DriftQuantity

__all__ = ["DriftRow", "RunDrift", "compare_runs", "table_lines"]


@dataclass(frozen=True)
class DriftRow:
    """One attribute × metric × statistic of one test: A, B, and the paired test."""

    test_id: str
    attribute: str
    metric: str
    statistic: DriftQuantity
    a: float
    b: float
    p_adjusted: float  # family-wise (within the test) p of "B is worse than A"
    n_paired: int
    worse: bool  # significantly worse at the Bonferroni-split alpha

    @property
    def delta(self) -> float:
        return self.b - self.a


@dataclass(frozen=True)
class RunDrift:
    """Drift between two stored runs: every row, notes on what was not compared, and the
    levels used."""

    rows: tuple[DriftRow, ...]
    notes: tuple[str, ...]
    alpha: float  # overall
    tests: int  # tests compared (the Bonferroni divisor)

    @property
    def worse(self) -> bool:
        return any(r.worse for r in self.rows)


def _value(a: AttributeResult, statistic: DriftQuantity) -> float:
    if statistic == "unusable":
        return drift.unusable_share(a)
    return float(getattr(a, statistic).value)


def _key(a: AttributeResult) -> tuple[str, str]:
    return (a.attribute.casefold(), a.metric)


def _rows(b: AuditResult, a: AuditResult, res: DriftResult) -> list[DriftRow]:
    before = {_key(x): x for x in a.attributes}
    after = {_key(x): x for x in b.attributes}
    rows = []
    for v in res.members:
        key = (v.key[0].casefold(), v.key[1])
        rows.append(
            DriftRow(
                b.meta.test_id,
                v.key[0],
                f"{v.key[1]}@{after[key].k}",
                v.statistic,
                _value(before[key], v.statistic),
                _value(after[key], v.statistic),
                v.p_adjusted,
                v.n_paired,
                v.failed,
            )
        )
    return rows


def _attribute_notes(a: AuditResult, b: AuditResult) -> list[str]:
    ka, kb = {_key(x): x for x in a.attributes}, {_key(x): x for x in b.attributes}
    return [
        f"{x.attribute} ({x.metric}) only in {side}"
        for side, mine, other in (("A", ka, kb), ("B", kb, ka))
        for k, x in mine.items()
        if k not in other
    ]


def _one(
    a: AuditResult, b: AuditResult, alpha: float, tolerance: float, n_resamples: int, seed: int
) -> tuple[list[DriftRow], list[str]]:
    """The rows of one test, and notes (prefixed by its id) on what was not compared."""
    why = baselines.result_incompatibility(a, b)
    if why is not None:  # another grid, K, metric...: a change of yardstick, not a drift
        what = why.split(". ")[0].replace("the baseline was recorded with ", "")
        what = what.replace(": baseline ", ": A ").replace(", this run ", ", B ")
        return [], [f"not compared: {what}"]
    notes = [
        f"{name} {getattr(a.meta, name)} -> {getattr(b.meta, name)}"
        for name in ("provider", "model")
        if getattr(a.meta, name) != getattr(b.meta, name)
    ]
    notes += _attribute_notes(a, b)
    d = drift.evaluate_drift(
        b,
        a,
        gated=STATISTICS,
        tolerance=tolerance,
        alpha=alpha,
        seed=seed,
        n_resamples=n_resamples,
    )
    # what evaluate_drift could not test (different values, too few shared entities)
    notes += [f"not compared: {f.detail}" for f in d.failures if f.kind != "drift" and f.detail]
    rows = [] if d.test is None else _rows(b, a, d.test)
    if d.test is not None:
        n_a, n_b = len(baselines.entity_ids(a)), len(baselines.entity_ids(b))
        if d.test.n_entities < max(n_a, n_b):
            notes.append(f"paired on {d.test.n_entities} shared entities (A {n_a}, B {n_b})")
    return rows, notes


def compare_runs(
    a: Sequence[AuditResult],
    b: Sequence[AuditResult],
    *,
    alpha: float = 0.05,
    tolerance: float = 0.0,
    n_resamples: int = 2000,
    seed: int = 0,
) -> RunDrift:
    """Compare run ``b`` with run ``a``, test by test (see the module docstring)."""
    by_id = {r.meta.test_id: r for r in a}
    shared = [r for r in b if r.meta.test_id in by_id]
    notes = [f"{r.meta.test_id}: only in B" for r in b if r.meta.test_id not in by_id]
    ids_b = {r.meta.test_id for r in b}
    notes += [f"{t}: only in A" for t in by_id if t not in ids_b]
    level = alpha / max(len(shared), 1)
    rows: list[DriftRow] = []
    for r in shared:
        found, more = _one(by_id[r.meta.test_id], r, level, tolerance, n_resamples, seed)
        rows += found
        notes += [f"{r.meta.test_id}: {n}" for n in more]
    return RunDrift(tuple(rows), tuple(notes), alpha, len(shared))


def _p(p: float) -> str:
    return "n/a" if math.isnan(p) else ("<0.001" if p < 0.001 else f"{p:.3f}")


def table_lines(c: RunDrift) -> list[str]:
    """The drift table as text lines: one block per test, one row per statistic."""
    head = ("attribute", "metric", "statistic", "A", "B", "Δ (B-A)", "p", "")
    lines: list[str] = []
    for tid in dict.fromkeys(r.test_id for r in c.rows):
        rows = [r for r in c.rows if r.test_id == tid]
        cells = [head] + [
            (
                r.attribute,
                r.metric,
                LABEL[r.statistic],
                fmt(r.a),
                fmt(r.b),
                fmt_delta(r.delta),
                _p(r.p_adjusted),
                "WORSE" if r.worse else "",
            )
            for r in rows
        ]
        widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
        lines.append(f"{tid}  ({rows[0].n_paired} shared entities)")
        for row in cells:
            text = "  ".join(
                cell.ljust(w) if i < 3 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
            lines.append("  " + text.rstrip())
    level = c.alpha / max(c.tests, 1)
    lines.append(
        f"p: family-wise within each test (paired sign flips, step-down max-T); WORSE: B less "
        f"fair than A at alpha {c.alpha:g} overall ({level:.3g} per test over {c.tests})"
    )
    lines += [f"note: {n}" for n in c.notes]
    verdict = "B is significantly worse than A" if c.worse else "B is not significantly worse"
    return [*lines, verdict]
