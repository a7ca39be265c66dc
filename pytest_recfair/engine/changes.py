"""What --fairness-update changed, and which stored baselines no test used.

Like syrupy's snapshot report: an accepted baseline is a reviewed change, so the run says
old -> new for every statistic it moved, and lists baseline files that no collected test
owns any more (their test was renamed, moved or deleted).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pytest_recfair.results import AttributeResult, AuditResult
from pytest_recfair.vocab import STATISTICS

__all__ = ["baseline_changes", "unused_baselines"]


def _key(a: AttributeResult) -> tuple[str, str]:
    return a.attribute, a.metric


def _moved(old: AttributeResult, new: AttributeResult) -> str | None:
    parts = []
    for stat in STATISTICS:
        before, after = getattr(old, stat).value, getattr(new, stat).value
        if f"{before:.3f}" != f"{after:.3f}":
            parts.append(f"{stat.upper()} {before:.3f} -> {after:.3f}")
    return ", ".join(parts) or None


def baseline_changes(old: AuditResult | None, new: AuditResult) -> list[str]:
    """One line per attribute whose stored numbers change (3 decimals, as reported)."""
    if old is None:
        return ["new baseline"]
    before = {_key(a): a for a in old.attributes}
    lines = []
    for a in new.attributes:
        label = f"{a.attribute} ({a.metric})"
        prior = before.pop(_key(a), None)
        if prior is None:
            lines.append(f"{label}: new")
        elif (moved := _moved(prior, a)) is not None:
            lines.append(f"{label}: {moved}")
    lines += [f"{attr} ({metric}): dropped" for attr, metric in before]
    if old.meta.model != new.meta.model:
        lines.append(f"model: {old.meta.model} -> {new.meta.model}")
    return lines or ["unchanged (3 decimals)"]


def unused_baselines(root: Path, rootdir: Path, audited: Iterable[str]) -> list[tuple[Path, str]]:
    """Baseline files under ``root`` whose test is not among ``audited`` (node ids of this
    run) although its module was collected, or whose module file is gone."""
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
