"""The drift table between two stored runs (``python -m pytest_recfair compare A.json B.json``).

Each test audited in both runs is compared the way the gate compares a run with its
baseline, with A in the baseline's place. A list-overlap test: ``drift.evaluate_drift``
(paired sign-flip swaps of the shared entities, Westfall–Young step-down max-T over every
attribute × metric × statistic of the test, plus each attribute's unusable share; SNSR,
SNSV and PAFS all tested, one-sided: is B less fair than A by more than ``tolerance``?).
Any other kind: the kind's own comparison (``report.sections.compare_kind``: its numbers
and the paired test its gate runs against a baseline, family-wise within the test; when
the stored results do not allow a test, the numbers and "no test"). The tests are
combined by Bonferroni over the tests actually tested: each is tested at
``alpha / number of tested tests``, so two runs of one model are called worse with
probability at most ``alpha`` overall. Pure: no pytest, no httpx.

The drift table of two stored runs in every output format of ``python -m pytest_recfair
compare A B --format text|json|markdown|csv``, and the JSON read back.

The JSON holds every row with its numbers unrounded (NaN as null), the notes, the levels
and what A and B were, so :func:`parse_comparison` gives back the same
:class:`~pytest_recfair.compare.runs.RunDrift` (``compare CMP.json --format markdown``
renders a stored comparison again). Pure.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, get_args

from pytest_recfair.errors import DataError
from pytest_recfair.gate import baselines, drift
from pytest_recfair.metrics.inference import DriftResult
from pytest_recfair.report.fmt import LABEL, fmt, fmt_delta
from pytest_recfair.report.sections import compare_kind
from pytest_recfair.results import AttributeResult, AuditResult
from pytest_recfair.vocab import STATISTICS, DriftQuantity

__all__ = [
    "COMPARE_FORMATS",
    "CompareFormat",
    "Compared",
    "DriftRow",
    "RunDrift",
    "compare_runs",
    "comparison_dict",
    "parse_comparison",
    "render_comparison",
    "table_lines",
]


_OVERLAP_TEST: Final = "paired sign flips, step-down max-T"


@dataclass(frozen=True)
class DriftRow:
    """One attribute × metric × statistic of one test: A, B, and the paired test."""

    test_id: str
    attribute: str
    metric: str
    statistic: str  # a DriftQuantity for a list-overlap test, a kind's own words otherwise
    a: float
    b: float
    p_adjusted: float  # family-wise (within the test) p of "B is worse than A"; NaN: no test
    n_paired: int
    worse: bool  # significantly worse at the Bonferroni-split alpha
    test: str = _OVERLAP_TEST  # which test gave p (the kind's), or "no test"

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
    tests: int  # tests tested (the Bonferroni divisor)

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
    if not b.attributes:  # another kind of audit: its own numbers and test
        kind = compare_kind(a, b, tolerance=tolerance, n_resamples=n_resamples, seed=seed)
        if kind is None:
            return [], [*notes, f"not compared: A has no {b.meta.kind} results to compare"]
        rows = [
            DriftRow(b.meta.test_id, r.attribute, r.metric, r.statistic, r.a, r.b,
                     math.nan if r.p is None else r.p, r.n_paired,
                     r.p is not None and r.p < alpha, kind.test)
            for r in kind.rows
        ]  # fmt: skip
        return rows, [*notes, *kind.notes]
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


def _tested(rows: Sequence[DriftRow]) -> set[str]:
    """The tests with at least one tested row."""
    return {r.test_id for r in rows if not math.isnan(r.p_adjusted)}


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

    # Bonferroni over the tests actually tested: a test whose stored results allow none
    # (its numbers shown, "no test") spends no alpha, so when some are not tested the
    # others are tested again at alpha over the tests that are (testing does not depend
    # on the level)
    def at(level: float, which: Sequence[AuditResult]) -> dict[str, Any]:
        return {
            r.meta.test_id: _one(by_id[r.meta.test_id], r, level, tolerance, n_resamples, seed)
            for r in which
        }

    found = at(alpha / max(len(shared), 1), shared)
    tested = _tested([row for rows, _ in found.values() for row in rows])
    if tested and len(tested) < len(shared):
        found |= at(alpha / len(tested), [r for r in shared if r.meta.test_id in tested])
    rows: list[DriftRow] = []
    for tid, (got, more) in found.items():
        rows += got
        notes += [f"{tid}: {n}" for n in more]
    return RunDrift(tuple(rows), tuple(notes), alpha, len(tested))


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
                _label(r.statistic),
                fmt(r.a),
                fmt(r.b),
                fmt_delta(r.delta),
                _p(r.p_adjusted),
                "WORSE" if r.worse else "",
            )
            for r in rows
        ]
        widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
        lines.append(f"{tid}  ({_how(rows[0])})")
        for row in cells:
            text = "  ".join(
                cell.ljust(w) if i < 3 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
            lines.append("  " + text.rstrip())
    level = c.alpha / max(c.tests, 1)
    lines.append(
        f"p: family-wise within each test (its test in its heading; n/a: not tested); WORSE: "
        f"B less fair than A at alpha {c.alpha:g} overall ({level:.3g} per test over the "
        f"{c.tests} tested)"
    )
    lines += [f"note: {n}" for n in c.notes]
    verdict = "B is significantly worse than A" if c.worse else "B is not significantly worse"
    return [*lines, verdict]


def _label(statistic: str) -> str:
    return next((w for k, w in LABEL.items() if k == statistic), statistic)


def _how(r: DriftRow) -> str:
    """ "paired sign flips, step-down max-T; 40 paired" or "no test"."""
    return r.test if r.test == "no test" else f"{r.test}; {r.n_paired} paired"


CompareFormat = Literal["text", "json", "markdown", "csv"]


COMPARE_FORMATS: Final[tuple[CompareFormat, ...]] = get_args(CompareFormat)


FORMAT: Final = "pytest-recfair comparison"


VERSION: Final = 1


_FIELDS: Final = (
    "test_id",
    "attribute",
    "metric",
    "statistic",
    "a",
    "b",
    "delta",
    "p_adjusted",
    "n_paired",
    "worse",
    "test",
)


_HINT = "give a JSON file written by python -m pytest_recfair compare A B --format json"


@dataclass(frozen=True)
class Compared:
    """A comparison and what its two sides were (file paths or history entries)."""

    drift: RunDrift
    a: str
    b: str


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def comparison_dict(c: Compared) -> dict[str, Any]:
    """The comparison as JSON-ready data (``--format json``)."""
    rows = [
        {
            "test_id": r.test_id,
            "attribute": r.attribute,
            "metric": r.metric,
            "statistic": r.statistic,
            "a": _num(r.a),
            "b": _num(r.b),
            "delta": _num(r.delta),
            "p_adjusted": _num(r.p_adjusted),
            "n_paired": r.n_paired,
            "worse": r.worse,
            "test": r.test,
        }
        for r in c.drift.rows
    ]
    return {
        "format": FORMAT,
        "version": VERSION,
        "a": c.a,
        "b": c.b,
        "alpha": c.drift.alpha,
        "tests": c.drift.tests,
        "worse": c.drift.worse,
        "rows": rows,
        "notes": list(c.drift.notes),
    }


def _float(x: Any) -> float:
    if x is None:
        return math.nan
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise TypeError(f"expected a number or null, got {x!r}")
    return float(x)


def _row(d: Mapping[str, Any]) -> DriftRow:
    if not isinstance(d["worse"], bool) or not isinstance(d["n_paired"], int):
        raise TypeError("worse must be true/false and n_paired a whole number")
    return DriftRow(
        str(d["test_id"]),
        str(d["attribute"]),
        str(d["metric"]),
        str(d["statistic"]),
        _float(d["a"]),
        _float(d["b"]),
        _float(d["p_adjusted"]),
        d["n_paired"],
        d["worse"],
        str(d.get("test", _OVERLAP_TEST)),  # a comparison written before kinds were compared
    )


def parse_comparison(text: str, path: Path) -> Compared:
    """A comparison from its ``--format json`` text (``path`` names it in errors)."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise DataError(f"{path} is not JSON; {_HINT}.") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DataError(f'{path} is not a comparison (expected "format": "{FORMAT}"); {_HINT}.')
    if doc.get("version") != VERSION:
        raise DataError(
            f"{path} is a version {doc.get('version')!r} comparison; this pytest-recfair reads "
            f"version {VERSION}. Compare the two runs again."
        )
    try:
        rows = tuple(_row(r) for r in doc["rows"])
        drift = RunDrift(
            rows, tuple(str(n) for n in doc["notes"]), _float(doc["alpha"]), doc["tests"]
        )
        if not isinstance(drift.tests, int):
            raise TypeError("tests must be a whole number")
        return Compared(drift, str(doc["a"]), str(doc["b"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{path} is invalid ({type(exc).__name__}: {exc}); {_HINT}.") from None


def _text(c: Compared) -> str:
    return "\n".join([f"A: {c.a}", f"B: {c.b}", *table_lines(c.drift)]) + "\n"


def _json(c: Compared) -> str:
    return json.dumps(comparison_dict(c), indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def _cell(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3f}"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _markdown(c: Compared) -> str:
    d = c.drift
    verdict = "**B is significantly worse than A**" if d.worse else "B is not significantly worse"
    out = [
        "# Fairness comparison",
        "",
        f"- A: `{_md(c.a)}`",
        f"- B: `{_md(c.b)}`",
        f"- {verdict} (alpha {d.alpha:g} overall, Bonferroni over the {d.tests} tests "
        "tested; p family-wise within each test, by the test named in its row)",
        "",
        "| test | attribute | metric | statistic | A | B | Δ (B-A) | p | | by |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in d.rows:
        p = "n/a" if math.isnan(r.p_adjusted) else f"{r.p_adjusted:.3f}"
        delta = "—" if math.isnan(r.delta) else f"{r.delta:+.3f}"
        out.append(
            f"| {_md(r.test_id)} | {_md(r.attribute)} | {r.metric} | {r.statistic} | "
            f"{_cell(r.a)} | {_cell(r.b)} | {delta} | {p} | {'WORSE' if r.worse else ''} | "
            f"{_md(r.test)} |"
        )
    out += ["", *(f"- note: {_md(n)}" for n in d.notes)]
    return "\n".join(out).rstrip() + "\n"


def _csv(c: Compared) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(_FIELDS)
    for row in comparison_dict(c)["rows"]:
        w.writerow(["" if row[f] is None else row[f] for f in _FIELDS])
    return buf.getvalue()


_RENDERERS: Final[dict[CompareFormat, Callable[[Compared], str]]] = {
    "text": _text,
    "json": _json,
    "markdown": _markdown,
    "csv": _csv,
}


def render_comparison(c: Compared, fmt: CompareFormat = "text") -> str:
    """The comparison as ``fmt``."""
    return _RENDERERS[fmt](c)
