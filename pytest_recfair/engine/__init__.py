"""Fairness audits without pytest: run one, judge it, keep a run's results.

- :mod:`.pipeline` runs one audit (grid -> prompts -> recommender -> parse -> score);
- :mod:`.base` / :mod:`.registry` define the kinds of audit (:mod:`.overlap` is today's);
- :mod:`.scoring` turns list-overlap replies into attribute results;
- :mod:`.verdict` holds the baseline state, the gate and the pure :func:`judge`;
- :mod:`.record` holds a run's bookkeeping (payloads, JUnit properties, collector);
- :mod:`.changes` says what --fairness-update changed and which baselines no test used;
- :mod:`.stream` scores a list-overlap audit a chunk of entities at a time;
- :mod:`.sharding` splits an audit across CI jobs and merges it back;
- :mod:`.batch` records missing prompts through a provider's batch API.
"""

from __future__ import annotations

from pytest_recfair.engine.base import AuditKind, Scored
from pytest_recfair.engine.batch import record_batch
from pytest_recfair.engine.changes import baseline_changes, unused_baselines
from pytest_recfair.engine.pipeline import measure, run_audit
from pytest_recfair.engine.record import RunCollector, TestRecord, property_items
from pytest_recfair.engine.sharding import MergeSource, ShardWritten, run_shard
from pytest_recfair.engine.verdict import (
    BaselineCheck,
    BaselineState,
    Verdict,
    body_failed,
    compare,
    gate_result,
    judge,
    load_baseline,
    write_baseline,
)

__all__ = [
    "AuditKind",
    "BaselineCheck",
    "BaselineState",
    "MergeSource",
    "RunCollector",
    "Scored",
    "ShardWritten",
    "TestRecord",
    "Verdict",
    "baseline_changes",
    "body_failed",
    "compare",
    "gate_result",
    "judge",
    "load_baseline",
    "measure",
    "property_items",
    "record_batch",
    "run_audit",
    "run_shard",
    "unused_baselines",
    "write_baseline",
]
