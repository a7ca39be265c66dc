"""Fairness audits without pytest: run one, judge it, keep a run's results.

- :mod:`.pipeline` runs one audit (grid -> prompts -> recommender -> parse -> score);
- :mod:`.base` / :mod:`.registry` define the kinds of audit (:mod:`.overlap` is today's);
- :mod:`.scoring` turns list-overlap replies into attribute results;
- :mod:`.verdict` holds the baseline state, the gate and the pure :func:`judge`;
- :mod:`.record` holds a run's bookkeeping (payloads, JUnit properties, collector).
"""

from __future__ import annotations

from pytest_recfair.audit.base import AuditKind, Scored
from pytest_recfair.audit.pipeline import measure, run_audit
from pytest_recfair.audit.record import RunCollector, TestRecord, property_items
from pytest_recfair.audit.verdict import (
    BaselineState,
    Comparison,
    Verdict,
    compare,
    gate_result,
    judge,
    load_baseline,
    write_baseline,
)

__all__ = [
    "AuditKind",
    "BaselineState",
    "Comparison",
    "RunCollector",
    "Scored",
    "TestRecord",
    "Verdict",
    "compare",
    "gate_result",
    "judge",
    "load_baseline",
    "measure",
    "property_items",
    "run_audit",
    "write_baseline",
]
