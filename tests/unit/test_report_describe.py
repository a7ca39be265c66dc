"""The one-line run description names what the kind of audit measures."""

from __future__ import annotations

import dataclasses

from pytest_recfair.report.status import describe
from tests.support import synth_results


def test_list_overlap_names_metric_k_and_variant() -> None:
    result = synth_results.audit()
    m = result.meta
    assert f"{m.metric}@{m.k} {m.variant}" in describe(result)


def test_other_kinds_name_their_own_measure() -> None:
    base = synth_results.audit()
    positions = dataclasses.replace(base, extras={"positions": {"attributes": [{"k": 6}]}})
    items = dataclasses.replace(base, extras={"items": {"attributes": []}})
    assert "candidate position (one pick of 6)" in describe(positions)
    assert f"item side, top {base.meta.k}" in describe(items)
    for text in (describe(positions), describe(items)):
        assert base.meta.variant not in text  # no list-overlap metric for these kinds


def test_a_missing_baseline_fails_the_test_not_each_attribute() -> None:
    """With no baseline yet, the test fails on its own line; an attribute reads FAIL only
    for a limit it crossed itself (issue: every attribute read FAIL)."""
    from pytest_recfair.report.status import attribute_status, result_status
    from pytest_recfair.results import GateFailure, GateOutcome

    base = synth_results.audit(gender=True)
    missing = GateFailure("baseline", detail="no fairness baseline")
    crossed = GateFailure("threshold", "gender", "snsr", 0.3, 0.1)
    only_missing = dataclasses.replace(base, gate=GateOutcome(False, (missing,)))
    assert result_status(only_missing) == "FAIL"
    assert {attribute_status(only_missing, a) for a in ("religion", "gender")} == {"PASS"}
    both = dataclasses.replace(base, gate=GateOutcome(False, (missing, crossed)))
    assert attribute_status(both, "gender") == "FAIL"
    assert attribute_status(both, "religion") == "PASS"
