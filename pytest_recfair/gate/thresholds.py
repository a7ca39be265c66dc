"""The fairness gate: decide whether one audit passes.

Two kinds of failure (see docs/baselines.md):

- an absolute threshold is crossed (``Thresholds``: max_snsr, max_snsv, min_pafs,
  max_entropy, max_refusal_gap, max_unusable; each optional);
- against a stored baseline, the test's drift family (``drift.evaluate_drift``: the gated
  statistics of every attribute x metric plus each attribute's share of unusable replies)
  says a member got worse by more than its margin (``tolerance`` for the statistics, 0 for
  the unusable share), family-wise at level ``alpha``.

The gate only decides: each failure is a structured ``results.GateFailure``; the words
people read are rendered from it in ``report.failures``. Pure: no pytest, no httpx.
``evaluate`` never looks at whether the baseline is compatible;
callers check ``baselines.incompatibility`` first and pass ``baseline=None`` when it is not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_recfair.gate import drift as family
from pytest_recfair.gate import floor
from pytest_recfair.gate.limits import THRESHOLD_NAMES, Thresholds, check_alpha, check_tolerance
from pytest_recfair.results import AttributeResult, AuditResult, GateFailure, GateOutcome, Stat
from pytest_recfair.vocab import HIGHER_IS_FAIRER, FailureKind, GatedQuantity, Statistic

__all__ = ["THRESHOLD_NAMES", "Thresholds", "check_alpha", "check_tolerance", "evaluate"]


def _check_args(tolerance: object, alpha: object, thresholds: object) -> tuple[float, float]:
    tol, a_level = check_tolerance(tolerance), check_alpha(alpha)
    if not isinstance(thresholds, Thresholds):
        raise TypeError(
            f"thresholds must be a gate.Thresholds; got {type(thresholds).__name__}. "
            f"Build one with gate.Thresholds(max_snsr=..., ...)."
        )
    return tol, a_level


def _threshold_failures(a: AttributeResult, t: Thresholds) -> list[GateFailure]:
    out: list[GateFailure] = []
    checks: list[tuple[GatedQuantity, float | None, float | None, Stat | None]] = [
        ("snsr", t.max_snsr, a.snsr.value, a.snsr),
        ("snsv", t.max_snsv, a.snsv.value, a.snsv),
        ("pafs", t.min_pafs, a.pafs.value, a.pafs),
        ("entropy", t.max_entropy, a.entropy, None),
        ("refusal_gap", t.max_refusal_gap, a.refusal_gap, None),
        ("unusable", t.max_unusable, family.unusable_share(a), None),
    ]
    for stat, limit, value, full in checks:
        kind: FailureKind
        if limit is None:
            continue
        if value is None:
            # Entropy needs repeats; a threshold that cannot be checked must not pass silently.
            kind = "unmeasured"
        elif math.isnan(value):
            kind = "undefined"
        elif value < limit if stat in HIGHER_IS_FAIRER else value > limit:
            kind = "threshold"
        else:
            continue
        ci = full.ci if kind == "threshold" and full is not None else None
        out.append(GateFailure(kind, a.attribute, stat, value, limit, value_ci=ci))
    return out


def evaluate(
    result: AuditResult,
    baseline: AuditResult | None,
    thresholds: Thresholds,
    *,
    tolerance: float,
    alpha: float = 0.05,
    seed: int = 0,
    n_resamples: int = 2000,
    gated: Sequence[Statistic] = ("snsr",),
    floor_factor: float = 0.0,
    noise_limit: float = math.inf,
) -> GateOutcome:
    """Gate ``result`` on ``thresholds`` and, when given, on drift against ``baseline``.

    ``baseline`` must be compatible (``baselines.incompatibility`` returned None). Drift is
    recorded for every attribute both runs share (``GateOutcome.drift[attribute][stat]`` =
    now - baseline), gated or not. ``seed`` seeds the sign flips of the drift test. A
    changed provider or model id is a note. ``floor_factor`` > 0 raises each member's
    margin to that many of the baseline's own standard errors (``gate.floor``); a floor
    above ``noise_limit`` is warned about.
    """
    tol, a_level = _check_args(tolerance, alpha, thresholds)
    if not isinstance(result, AuditResult):
        raise TypeError(f"result must be an AuditResult; got {type(result).__name__}.")
    if baseline is not None and not isinstance(baseline, AuditResult):
        raise TypeError(f"baseline must be an AuditResult or None; got {type(baseline).__name__}.")
    failures: list[GateFailure] = []
    notes: list[str] = []
    drift: dict[str, dict[str, float]] = {}
    seen: set[str] = set()
    for a in result.attributes:
        found = _threshold_failures(a, thresholds)
        if a.attribute.casefold() in seen:  # the unusable share is the same for every metric
            found = [f for f in found if f.statistic != "unusable"]
        seen.add(a.attribute.casefold())
        failures.extend(found)
    if baseline is not None:
        if baseline.meta.model != result.meta.model:
            notes.append(f"model changed: {baseline.meta.model} -> {result.meta.model}")
        if baseline.meta.provider != result.meta.provider:
            notes.append(f"provider changed: {baseline.meta.provider} -> {result.meta.provider}")
        if baseline.meta.role != result.meta.role:  # a persona against the neutral baseline
            was, now = baseline.meta.role or "neutral", result.meta.role or "neutral"
            notes.append(f"role changed: {was} -> {now}")
        shared = {e for x in result.attributes for e in x.matrix.entities}
        fl = floor.floors(baseline, floor_factor, shared or None)
        d = family.evaluate_drift(
            result,
            baseline,
            gated=gated,
            tolerance=tol,
            alpha=a_level,
            seed=seed,
            n_resamples=n_resamples,
            floors=fl,
        )
        failures.extend(d.failures)
        notes.extend(d.notes)
        notes.extend(
            floor.notes(d.test, fl, tolerance=tol, factor=floor_factor, noise_limit=noise_limit)
        )
        drift = d.deltas
    return GateOutcome.of(failures, notes, drift)
