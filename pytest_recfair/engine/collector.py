"""A run's bookkeeping (no pytest, no report): each test's :class:`TestRecord`, the run's
:class:`RunCollector`, and ``--fairness-prune`` (deletes only after a run of every test)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_recfair.cassettes import compact
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.cassettes.vcrfile import Key, read_interactions, serialize, stored_key
from pytest_recfair.compare.models import ModelComparison, ModelSlot, compare_models
from pytest_recfair.results import AuditResult
from pytest_recfair.vocab import STATISTICS


@dataclass
class TestRecord:
    """One audited test as the controller will see it; updated when the gate is judged."""

    __test__ = False

    result: AuditResult
    baseline: AuditResult | None  # the one the result was compared against
    wrote: Path | None = None  # baseline written by --fairness-update
    not_written: str | None = None  # why --fairness-update wrote no baseline for this test
    changes: list[str] = field(default_factory=list)  # old -> new of the written baseline
    model_slot: ModelSlot | None = None  # the test's place in a comparison of models

    def payload(self) -> dict[str, Any]:
        """What a worker ships with the call-phase report (JSON-able)."""
        return {
            "result": self.result.to_dict(),
            "baseline": None if self.baseline is None else self.baseline.to_dict(),
            "baseline_written": str(self.wrote) if self.wrote else None,
            "baseline_not_written": self.not_written,
            "baseline_changes": list(self.changes),
            **({"model_slot": self.model_slot.to_dict()} if self.model_slot else {}),
        }


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
        written, slot = payload.get("baseline_written"), payload.get("model_slot")
        self.add_record(
            TestRecord(
                result=AuditResult.from_dict(dict(payload["result"])),
                baseline=AuditResult.from_dict(dict(base)) if base else None,
                wrote=Path(str(written)) if written else None,
                not_written=payload.get("baseline_not_written"),
                changes=[str(c) for c in payload.get("baseline_changes") or []],
                model_slot=ModelSlot.from_dict(slot) if slot else None,
            )
        )

    def add_record(self, record: TestRecord) -> None:
        """A test judged in this process: no dict round trip (millions of floats)."""
        test_id = record.result.meta.test_id
        self.results[test_id] = record.result
        if record.baseline is not None:
            self.baselines[test_id] = record.baseline
        else:  # a re-run of the same test id without a comparison drops the stale one
            self.baselines.pop(test_id, None)
        if record.model_slot:
            self.slots[test_id] = record.model_slot
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

    def models(self) -> list[ModelComparison]:
        """The side-by-side comparisons of the models audited by one test (docs/reports.md)."""
        if self._models is None:
            self._models = compare_models(self.results, self.slots)
        return self._models


def baseline_changes(old: AuditResult | None, new: AuditResult) -> list[str]:
    """One line per attribute whose stored numbers change (3 decimals, as reported)."""
    if old is None:
        return ["new baseline"]
    before = {(a.attribute, a.metric): a for a in old.attributes}
    lines = []
    for a in new.attributes:
        label = f"{a.attribute} ({a.metric})"
        prior = before.pop((a.attribute, a.metric), None)
        if prior is None:
            lines.append(f"{label}: new")
            continue
        pairs = [(s, getattr(prior, s).value, getattr(a, s).value) for s in STATISTICS]
        moved = [f"{s.upper()} {x:.3f} -> {y:.3f}" for s, x, y in pairs if f"{x:.3f}" != f"{y:.3f}"]
        if moved:
            lines.append(f"{label}: {', '.join(moved)}")
    lines += [f"{attr} ({metric}): dropped" for attr, metric in before]
    if old.meta.model != new.meta.model:
        lines.append(f"model: {old.meta.model} -> {new.meta.model}")
    return lines or ["unchanged (3 decimals)"]


def unused_baselines(root: Path, rootdir: Path, audited: Iterable[str]) -> list[tuple[Path, str]]:
    """Baseline files under ``root`` whose test was not ``audited`` although its module was
    collected, or whose module file is gone."""
    audited = set(audited)
    modules = {test_id.split("::")[0] for test_id in audited}
    unused = []
    for path in sorted(root.rglob("*.json")) if root.is_dir() else []:
        try:
            test_id = str(json.loads(path.read_text(encoding="utf-8"))["meta"]["test_id"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a baseline of ours: not ours to judge
        module = test_id.split("::")[0]
        if test_id not in audited and (module in modules or not (rootdir / module).exists()):
            unused.append((path, test_id))
    return unused


@dataclass
class PrunePlan:
    """What no test used: per cassette file the unused interactions, whole baselines."""

    cassettes: dict[Path, tuple[int, int]] = field(default_factory=dict)  # unused, total
    baselines: list[Path] = field(default_factory=list)
    used: set[tuple[str, Key]] = field(default_factory=set)

    @property
    def empty(self) -> bool:
        return not self.cassettes and not self.baselines

    def lines(self, root: Path) -> list[str]:
        out = []
        for path, (unused, total) in sorted(self.cassettes.items()):
            what = "whole file" if unused == total else f"{unused} of {total} interactions"
            out.append(f"  cassette {_rel(path, root)}: {what} unused")
        out.extend(f"  baseline {_rel(path, root)}: unused" for path in self.baselines)
        return out


def prune_plan(
    cassette_root: Path,
    used: set[tuple[str, Key]],
    baseline_root: Path,
    used_baselines: Iterable[Path],
    *,
    migrate: bool = False,
) -> PrunePlan:
    """The unused entries; ``migrate``: cassettes of the old per-test layout are moved into
    the shared files first (else not looked at)."""
    if migrate and cassette_root.is_dir():
        CassetteStore(cassette_root).migrate_legacy()
    found = PrunePlan(used=used)
    for path in compact.cassette_files(cassette_root):
        items = read_interactions(path)
        unused = sum((path.name, stored_key(item)) not in used for item in items)
        if unused:
            found.cassettes[path] = (unused, len(items))
    keep = {p.resolve() for p in used_baselines}
    found.baselines = [p for p in sorted(baseline_root.glob("*.json")) if p.resolve() not in keep]
    return found


def prune(found: PrunePlan) -> None:
    """Delete what ``found`` lists (files rewritten atomically, emptied ones removed)."""
    for path, (unused, total) in found.cassettes.items():
        if unused == total:
            path.unlink(missing_ok=True)
            continue
        items = read_interactions(path)
        kept = [item for item in items if (path.name, stored_key(item)) in found.used]
        compact.write(path, serialize(kept))  # in the file's own format
    for path in found.baselines:
        path.unlink(missing_ok=True)


def _rel(path: Path, root: Path) -> str:
    return str(path.relative_to(root) if path.is_relative_to(root) else path)
