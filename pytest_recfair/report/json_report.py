"""The JSON report: every result in full, plus totals and the baselines used."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from pytest_recfair.compare.models import ModelComparison
from pytest_recfair.report.failures import failure_text
from pytest_recfair.report.status import Baselines, baseline_map, check_results, counts
from pytest_recfair.results import PLUGIN_VERSION, AuditResult

__all__ = ["to_json"]


def _finite(obj: Any) -> Any:
    """``obj`` with NaN and infinities replaced by None (JSON has neither)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def _result_dict(r: AuditResult) -> dict[str, Any]:
    """``r.to_dict()`` with each structured failure's rendered sentence as ``message``."""
    d = r.to_dict()
    if r.gate is not None:
        for f, fd in zip(r.gate.failures, d["gate"]["failures"], strict=True):
            fd["message"] = failure_text(f, r)
    return d


def _dump(obj: Any) -> str:
    try:
        return json.dumps(obj, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except ValueError:  # a NaN/inf outside the fields to_dict already maps to null
        return json.dumps(_finite(obj), sort_keys=True, ensure_ascii=False)


def to_json(
    results: Sequence[AuditResult],
    baselines: Baselines = None,
    *,
    models: Sequence[ModelComparison] = (),
) -> str:
    """Every result in full (``AuditResult.to_dict``), plus totals and the baselines used.

    One result (and one baseline) per line: json's C encoder only runs without ``indent``,
    and with per-entity matrices an indented paper-scale report takes seconds to write.
    """
    rs = check_results(results)
    base = baseline_map(baselines)

    def block(items: list[str]) -> str:
        return "[\n" + ",\n".join(items) + "\n]" if items else "[]"

    head = {
        "format": "pytest-recfair report",
        "version": 1,
        "plugin_version": PLUGIN_VERSION,
        "summary": counts(rs),
    }
    parts = [f"{_dump(k)}: {_dump(v)}" for k, v in head.items()]
    parts.append('"results": ' + block([_dump(_result_dict(r)) for r in rs]))
    if base:
        items = [f"{_dump(k)}: {_dump(b.to_dict())}" for k, b in sorted(base.items())]
        parts.append('"baselines": {\n' + ",\n".join(items) + "\n}")
    if models:  # several models audited by one test: side by side (report/sidebyside.py)
        from pytest_recfair.report.terminal import json_section

        parts.append('"models": ' + block([_dump(m) for m in json_section(models)]))
    return "{\n" + ",\n".join(parts) + "\n}\n"
