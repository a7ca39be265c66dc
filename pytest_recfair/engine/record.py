"""Run bookkeeping: what one test ships to the controller, JUnit properties, the collector.

No pytest here: the plugin keeps one :class:`TestRecord` per audited test (its payload is
built once, on the call-phase report) and one :class:`RunCollector` per pytest run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_recfair.compare.models import ModelComparison, ModelSlot, compare_models
from pytest_recfair.kinds import STATISTICS
from pytest_recfair.results import AuditResult

if TYPE_CHECKING:
    from pytest_recfair.report.history import HistoryRun

__all__ = ["RunCollector", "TestRecord", "property_items"]


@dataclass
class TestRecord:
    """One audited test as the controller will see it; updated when the gate is judged."""

    __test__ = False  # not a pytest test class

    result: AuditResult
    baseline: AuditResult | None  # the one the result was compared against
    wrote: Path | None = None  # baseline written by --fairness-update
    not_written: str | None = None  # why --fairness-update wrote no baseline for this test
    changes: list[str] = field(default_factory=list)  # old -> new of the written baseline
    model_slot: dict[str, Any] | None = None  # sidebyside.ModelSlot of a compared model

    def payload(self) -> dict[str, Any]:
        """What a worker ships to the controller with the call-phase report (JSON-able).

        The baseline travels as its dict, so the controller's report shows baseline
        figures without reading the baselines directory.
        """
        return {
            "result": self.result.to_dict(),
            "baseline": None if self.baseline is None else self.baseline.to_dict(),
            "baseline_written": str(self.wrote) if self.wrote else None,
            "baseline_not_written": self.not_written,
            "baseline_changes": list(self.changes),
            **({"model_slot": self.model_slot} if self.model_slot else {}),
        }


def property_items(result: AuditResult) -> list[tuple[str, float | int | str]]:
    """JUnit XML properties: recfair.<attribute>.<statistic> = value, and recfair.gate
    (pass/fail) once the test is judged."""
    props: list[tuple[str, float | int | str]] = [("recfair.model", result.meta.model)]
    for a in result.attributes:
        key = "recfair." + a.attribute.casefold().replace(" ", "_")
        for stat in STATISTICS:
            props.append((f"{key}.{stat}", _round(getattr(a, stat).value)))
        props.append((f"{key}.refusal_gap", _round(a.refusal_gap)))
        if a.entropy is not None:
            props.append((f"{key}.entropy", _round(a.entropy)))
    from pytest_recfair.report.sections import extra_properties  # the kinds' own numbers

    props += extra_properties(result)
    if result.gate is not None:
        props.append(("recfair.gate", "pass" if result.gate.passed else "fail"))
    return props


def _round(x: float) -> float:
    return x if math.isnan(x) else round(float(x), 6)


@dataclass
class RunCollector:
    """The results of one pytest run, gathered on the controller (or the only process)."""

    results: dict[str, AuditResult] = field(default_factory=dict)
    # the baseline each test was compared against, by test id (for the report's markers)
    baselines: dict[str, AuditResult] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    changes: dict[Path, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # e.g. "fairness report written: PATH"
    slots: dict[str, ModelSlot] = field(default_factory=dict)  # compared models, by test id
    _models: list[ModelComparison] | None = None  # computed once, when first asked

    def add(self, payload: Mapping[str, Any]) -> None:
        """Add a test's payload as a worker shipped it (``TestRecord.payload``)."""
        base = payload.get("baseline")
        written = payload.get("baseline_written")
        self.add_record(
            TestRecord(
                result=AuditResult.from_dict(dict(payload["result"])),
                baseline=AuditResult.from_dict(dict(base)) if base else None,
                wrote=Path(str(written)) if written else None,
                not_written=payload.get("baseline_not_written"),
                changes=[str(c) for c in payload.get("baseline_changes") or []],
                model_slot=payload.get("model_slot"),
            )
        )

    def add_record(self, record: TestRecord) -> None:
        """Add a test judged in this process: its objects as they are, no dict round trip
        (the payload of a 10,000-entity audit is millions of Python floats)."""
        result = record.result
        test_id = result.meta.test_id
        self.results[test_id] = result
        if record.baseline is not None:
            self.baselines[test_id] = record.baseline
        else:  # a re-run of the same test id without a comparison drops the stale one
            self.baselines.pop(test_id, None)
        if record.model_slot:
            self.slots[test_id] = ModelSlot.from_dict(record.model_slot)
        else:
            self.slots.pop(test_id, None)
        self._models = None
        if record.wrote is not None:
            self.written.append(record.wrote)
            self.changes[record.wrote] = list(record.changes)
        if record.not_written:
            self.notes.append(f"fairness baseline NOT written for {test_id}: {record.not_written}")

    def ordered(self) -> list[AuditResult]:
        return [self.results[k] for k in sorted(self.results)]

    def summary_lines(self, width: int = 100) -> list[str]:
        from pytest_recfair import report  # used once, at the end of a run

        lines = list(report.terminal_summary(self.ordered(), width))
        if self.models():
            from pytest_recfair.report.sidebyside import terminal_lines

            lines += terminal_lines(self.models(), width)
        # one line each, unwrapped: a file path stays whole and easy to copy
        for p in sorted(self.written):
            lines.append(f"fairness baseline written: {p}")
            lines.extend(f"  {change}" for change in self.changes.get(p, []))
        lines.extend(self.notes)
        return lines

    def models(self) -> list[ModelComparison]:
        """The side-by-side comparisons of the models audited by one test (docs/reports.md)."""
        if self._models is None:
            self._models = compare_models(self.results, self.slots)
        return self._models

    def write_report(self, path: Path, history: Sequence[HistoryRun] = ()) -> None:
        from pytest_recfair import report

        report.write_report(
            path, self.ordered(), self.baselines, models=self.models(), history=history
        )

    def append_history(self, directory: Path) -> Path:
        from pytest_recfair.report.history import append_run

        return append_run(directory, self.ordered(), self.baselines, models=self.models())
