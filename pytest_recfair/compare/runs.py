"""Two stored runs compared test by test (``compare A B``), as the gate compares a run with
A as its baseline (``drift.evaluate_drift``, or the kind's ``compare_kind``); Bonferroni
over the tests tested keeps "B is worse" at ``alpha``. And one audit gated against a stored
run (``--fairness-compare=REF``, ``--fairness-compare-fail=EXPR``). Pure."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Final, Literal, get_args

from pytest_recfair.errors import ConfigError, DataError, RecfairError
from pytest_recfair.gate import baselines, drift
from pytest_recfair.report.fmt import LABEL, Table, fmt, fmt_delta, p_cell, table_text
from pytest_recfair.report.history import find_entry, load_run
from pytest_recfair.report.markdown import finite, table_markdown
from pytest_recfair.report.sections import compare_kind, extra_properties
from pytest_recfair.results import AuditResult, GateFailure, GateOutcome
from pytest_recfair.vocab import HIGHER_IS_FAIRER, STATISTICS

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
    """Drift between two stored runs: every row, notes on what was not compared, levels."""

    rows: tuple[DriftRow, ...]
    notes: tuple[str, ...]
    alpha: float  # overall
    tests: int  # tests tested (the Bonferroni divisor)

    @property
    def worse(self) -> bool:
        return any(r.worse for r in self.rows)


def _one(
    a: AuditResult, b: AuditResult, alpha: float, tolerance: float, n_resamples: int, seed: int
) -> tuple[list[DriftRow], list[str]]:
    """The rows of one test, and notes on what was not compared."""
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
    tid = b.meta.test_id
    if not b.attributes:  # another kind of audit: its own numbers and test
        kind = compare_kind(a, b, tolerance=tolerance, n_resamples=n_resamples, seed=seed)
        if kind is None:
            return [], [*notes, f"not compared: A has no {b.meta.kind} results to compare"]
        rows = [
            DriftRow(tid, r.attribute, r.metric, r.statistic, r.a, r.b,
                     math.nan if r.p is None else r.p, r.n_paired,
                     r.p is not None and r.p < alpha, kind.test)
            for r in kind.rows
        ]  # fmt: skip
        return rows, [*notes, *kind.notes]
    ka, kb = ({(x.attribute.casefold(), x.metric): x for x in r.attributes} for r in (a, b))
    notes += [
        f"{x.attribute} ({x.metric}) only in {side}"
        for side, mine, other in (("A", ka, kb), ("B", kb, ka))
        for k, x in mine.items()
        if k not in other
    ]
    d = drift.evaluate_drift(
        b, a, gated=STATISTICS, tolerance=tolerance, alpha=alpha, seed=seed, n_resamples=n_resamples
    )
    # what evaluate_drift could not test (different values, too few shared entities)
    notes += [f"not compared: {f.detail}" for f in d.failures if f.kind != "drift" and f.detail]
    if d.test is None:
        return [], notes
    rows = []
    for v in d.test.members:
        key = (v.key[0].casefold(), v.key[1])
        x, y = (float(drift.unusable_share(z) if v.statistic == "unusable"
                      else getattr(z, v.statistic).value) for z in (ka[key], kb[key]))  # fmt: skip
        rows.append(
            DriftRow(tid, v.key[0], f"{v.key[1]}@{kb[key].k}", v.statistic, x, y, v.p_adjusted,
                     v.n_paired, v.failed)
        )  # fmt: skip
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

    # Bonferroni over the tests actually tested: a test whose stored results allow none
    # spends no alpha, so the others are tested again at alpha over those that are
    def at(level: float, which: Sequence[AuditResult]) -> dict[str, Any]:
        return {
            r.meta.test_id: _one(by_id[r.meta.test_id], r, level, tolerance, n_resamples, seed)
            for r in which
        }

    found = at(alpha / max(len(shared), 1), shared)
    tested = {
        row.test_id for rs, _ in found.values() for row in rs if not math.isnan(row.p_adjusted)
    }
    if tested and len(tested) < len(shared):
        found |= at(alpha / len(tested), [r for r in shared if r.meta.test_id in tested])
    notes += [f"{tid}: {n}" for tid, (_, more) in found.items() for n in more]
    rows = tuple(row for got, _ in found.values() for row in got)
    return RunDrift(rows, tuple(notes), alpha, len(tested))


def drift_tables(c: RunDrift) -> list[Table]:
    """A table per test, a row per statistic; its test and pairs in the lead."""
    head = ("attribute", "metric", "statistic", "A", "B", "Δ (B-A)", "p", "")
    out = []
    for tid in dict.fromkeys(r.test_id for r in c.rows):
        rows = [r for r in c.rows if r.test_id == tid]
        cells = [
            (r.attribute, r.metric, LABEL.get(r.statistic, r.statistic), fmt(r.a), fmt(r.b),
             fmt_delta(r.delta), p_cell(None if math.isnan(r.p_adjusted) else r.p_adjusted),
             "WORSE" if r.worse else "")
            for r in rows
        ]  # fmt: skip
        how = "" if rows[0].test == "no test" else f"; {rows[0].n_paired} paired"
        out.append(Table(tid, head, cells, f"{rows[0].test}{how}", labels=3))
    return out


def _verdict(c: RunDrift) -> str:
    return "B is significantly worse than A" if c.worse else "B is not significantly worse"


def table_lines(c: RunDrift) -> list[str]:
    """The drift tables as text lines (never wrapped), the levels, the notes, the verdict."""
    lines = [line for t in drift_tables(c) for line in table_text(t, sys.maxsize)]
    level = c.alpha / max(c.tests, 1)
    lines.append(
        f"p: family-wise within each test (its test in its heading; n/a: not tested); WORSE: "
        f"B less fair than A at alpha {c.alpha:g} overall ({level:.3g} per test over the "
        f"{c.tests} tested)"
    )
    return [*lines, *(f"note: {n}" for n in c.notes), _verdict(c)]


CompareFormat = Literal["text", "json", "markdown", "csv"]
COMPARE_FORMATS: Final[tuple[CompareFormat, ...]] = get_args(CompareFormat)
_FORMAT: Final = "pytest-recfair comparison"
_FIELDS: Final = tuple(f.name for f in fields(DriftRow))
_COLUMNS: Final = (*_FIELDS[:6], "delta", *_FIELDS[6:])  # the JSON and CSV columns
_HINT = "give a JSON file written by python -m pytest_recfair compare A B --format json"


@dataclass(frozen=True)
class Compared:
    """A comparison and what its two sides were (file paths or history entries)."""

    drift: RunDrift
    a: str
    b: str


def comparison_dict(c: Compared) -> dict[str, Any]:
    """The comparison as JSON-ready data (``--format json``): NaN as null."""
    rows = [{k: finite(getattr(r, k)) for k in _COLUMNS} for r in c.drift.rows]
    d = c.drift
    return {"format": _FORMAT, "version": 1, "a": c.a, "b": c.b, "alpha": d.alpha,
            "tests": d.tests, "worse": d.worse, "rows": rows, "notes": list(d.notes)}  # fmt: skip


def _float(x: Any) -> float:
    if x is None:
        return math.nan
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise TypeError(f"expected a number or null, got {x!r}")
    return float(x)


def parse_comparison(text: str, path: Path) -> Compared:
    """A comparison from its ``--format json`` text (``path`` names it in errors)."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise DataError(f"{path} is not JSON; {_HINT}.") from None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise DataError(f'{path} is not a comparison (expected "format": "{_FORMAT}"); {_HINT}.')
    if doc.get("version") != 1:
        raise DataError(
            f"{path} is a version {doc.get('version')!r} comparison; this pytest-recfair reads "
            f"version 1. Compare the two runs again."
        )
    try:
        rows = []
        for d in doc["rows"]:
            if not isinstance(d["worse"], bool) or not isinstance(d["n_paired"], int):
                raise TypeError("worse must be true/false and n_paired a whole number")
            tid, attr, metric, stat = (str(d[k]) for k in _FIELDS[:4])
            a, b, p = (_float(d[k]) for k in _FIELDS[4:7])
            # "test": absent from a comparison written before kinds were compared
            test = str(d.get("test", _OVERLAP_TEST))
            rows.append(DriftRow(tid, attr, metric, stat, a, b, p, d["n_paired"], d["worse"], test))
        if not isinstance(doc["tests"], int):
            raise TypeError("tests must be a whole number")
        notes = tuple(str(n) for n in doc["notes"])
        drift = RunDrift(tuple(rows), notes, _float(doc["alpha"]), doc["tests"])
        return Compared(drift, str(doc["a"]), str(doc["b"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{path} is invalid ({type(exc).__name__}: {exc}); {_HINT}.") from None


def render_comparison(c: Compared, fmt: CompareFormat = "text") -> str:
    """The comparison as ``fmt``."""
    d = c.drift
    if fmt == "json":
        return json.dumps(comparison_dict(c), indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(_COLUMNS)
        rows = comparison_dict(c)["rows"]
        w.writerows(["" if v is None else v for v in row.values()] for row in rows)
        return buf.getvalue()
    if fmt == "text":
        return "\n".join([f"A: {c.a}", f"B: {c.b}", *table_lines(d)]) + "\n"
    verdict = f"**{_verdict(d)}**" if d.worse else _verdict(d)
    out = [
        "# Fairness comparison",
        "",
        f"- A: `{c.a}`",
        f"- B: `{c.b}`",
        f"- {verdict} (alpha {d.alpha:g} overall, Bonferroni over the {d.tests} tests "
        "tested; p family-wise within each test, by the test named in its heading)",
        "",
    ]
    out += [line for t in drift_tables(d) for line in table_markdown(t)]
    out += [f"- note: {n}" for n in d.notes]
    return "\n".join(out).rstrip() + "\n"


COMPARE_KIND = "compare"  # the gate failure kind of a figure worse than the reference
_RULE = re.compile(
    r"^\s*([A-Za-z0-9_.\-]+)\s*:\s*([+-]?)\s*([0-9]*\.?[0-9]+(?:e-?\d+)?)\s*(%?)\s*$"
)
_GRAMMAR = (
    "rules NAME:[+|-]LIMIT[%] separated by commas, e.g. snsr:0.02,pafs:0.05 or "
    "religion.snsr:10% (docs/reports.md)"
)


@dataclass(frozen=True, slots=True)
class Rule:
    """One ``NAME:[+|-]LIMIT[%]`` rule."""

    parts: tuple[str, ...]  # the name's dotted parts, casefolded; the last is the figure
    limit: float
    relative: bool  # LIMIT% of the reference value
    sign: int  # +1: a rise is worse, -1: a fall is worse, 0: by the figure's name

    def picks(self, key: str) -> bool:
        have = key.casefold().split(".")
        return have[-1] == self.parts[-1] and set(self.parts[:-1]) <= set(have[:-1])

    def worse(self, key: str) -> int:
        """+1 when a rise of ``key`` is worse, -1 when a fall is."""
        if self.sign:
            return self.sign
        return -1 if key.rsplit(".", 1)[-1] in HIGHER_IS_FAIRER else 1

    def text(self) -> str:
        sign = {1: "+", -1: "-", 0: ""}[self.sign]
        return f"{'.'.join(self.parts)}:{sign}{self.limit:g}{'%' if self.relative else ''}"


def parse_rules(text: str) -> tuple[Rule, ...]:
    """The rules of ``--fairness-compare-fail``; a ConfigError names a bad one."""
    rules = []
    for part in text.split(","):
        m = _RULE.match(part)
        if m is None or not math.isfinite(float(m.group(3))):
            raise ConfigError(f"--fairness-compare-fail {part.strip()!r}: expected {_GRAMMAR}.")
        name, sign, limit, pct = m.groups()
        parts = tuple(name.casefold().split("."))
        rules.append(Rule(parts, float(limit), bool(pct), {"+": 1, "-": -1, "": 0}[sign]))
    return tuple(rules)


@dataclass(frozen=True)
class Reference:
    """The stored run a pytest run is gated against, and how the messages name it."""

    label: str
    results: Mapping[str, AuditResult]


def load_reference(ref: str, *, history_dir: Path | None, cwd: Path) -> Reference:
    """The run ``--fairness-compare=REF`` names: a file, else an entry of ``history_dir``."""
    path = cwd / ref
    if not path.is_file() and history_dir is None:
        raise ConfigError(
            f"--fairness-compare {ref!r}: no such file; give a JSON run report, or "
            f"name an entry (number, latest, -N, commit prefix) of --fairness-history=DIR."
        )
    try:
        run = load_run(path if path.is_file() else find_entry(history_dir or path, ref))
    except RecfairError as exc:
        raise ConfigError(f"--fairness-compare {ref!r}: {exc}") from None
    label = f"--fairness-compare {ref}" if run.path == path else f"history entry {run.path.name}"
    extra = [str(run.entry[k])[:n] for k, n in (("commit", 7), ("date", 10)) if run.entry.get(k)]
    if extra:
        label += f" ({', '.join(extra)})"
    return Reference(label, {r.meta.test_id: r for r in run.results})


def figures(result: AuditResult) -> dict[str, float]:
    """Every figure of ``result`` by dotted key (the names the rules pick from)."""
    out: dict[str, float] = {}
    for a in result.attributes:
        key = f"{a.attribute.casefold().replace(' ', '_')}.{a.metric}"
        values = {s: getattr(a, s).value for s in STATISTICS} | {"refusal_gap": a.refusal_gap,
                  "entropy": a.entropy, "unusable": drift.unusable_share(a)}  # fmt: skip
        out |= {f"{key}.{s}": float(v) for s, v in values.items() if v is not None}
    for name, prop in extra_properties(result):
        if isinstance(prop, int | float) and not isinstance(prop, bool):
            out[name.removeprefix("recfair.")] = float(prop)
    return out


def _failure(key: str, before: float, now: float, rule: Rule, label: str) -> GateFailure | None:
    worse = rule.worse(key)
    change = (now - before) * worse  # > 0: worse by this much
    allowed = rule.limit * abs(before) / 100 if rule.relative else rule.limit
    if not (math.isfinite(change) and change > allowed + 1e-12):
        return None
    verb = "rose" if now > before else "fell"
    return GateFailure(
        COMPARE_KIND,
        attribute=key.split(".", 1)[0],
        value=now,
        limit=allowed,
        baseline=before,
        detail=(
            f"{key} {verb} by {abs(now - before):.3f} ({before:.3f} -> {now:.3f}) against "
            f"the reference {label}; --fairness-compare-fail {rule.text()} allows "
            f"{allowed:.3g}: fix the model, or compare with another reference"
        ),
    )


def apply_reference(
    result: AuditResult, reference: Reference, rules: Sequence[Rule]
) -> AuditResult:
    """``result`` with its comparison's failures and notes added (no rules: notes only)."""
    ref, label = reference.results.get(result.meta.test_id), reference.label
    why = None if ref is None else baselines.result_incompatibility(ref, result)
    failures: list[GateFailure] = []
    if ref is None:
        notes = [f"not in the reference {label}: not compared"]
    elif why is not None:
        notes = [f"not compared with the reference {label}: {why.split('. ')[0]}"]
        if rules:  # the failure says it
            failures, notes = [GateFailure(COMPARE_KIND, detail=notes[0])], []
    else:
        before, now = figures(ref), figures(result)
        changes = []
        for key in sorted(set(before) & set(now)):
            for rule in (r for r in rules if r.picks(key)):
                if (f := _failure(key, before[key], now[key], rule, label)) is not None:
                    failures.append(f)
                    break
            if not rules and key.endswith(".snsr"):
                changes.append(f"{key} {before[key]:.3f} -> {now[key]:.3f}")
        notes = [f"against the reference {label}: " + "; ".join(changes)] if changes else []
    gate = result.gate or GateOutcome(passed=True)
    outcome = GateOutcome.of((*gate.failures, *failures), (*gate.notes, *notes), gate.drift)
    return replace(result, gate=outcome)
