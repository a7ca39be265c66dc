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
from dataclasses import dataclass, fields

from pytest_recfair.errors import ConfigError
from pytest_recfair.gate import drift as family
from pytest_recfair.kinds import HIGHER_IS_FAIRER, FailureKind, GatedQuantity, Statistic
from pytest_recfair.results import AttributeResult, AuditResult, GateFailure, GateOutcome, Stat

__all__ = ["THRESHOLD_NAMES", "Thresholds", "check_alpha", "check_tolerance", "evaluate"]


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Absolute limits; ``None`` switches a check off.

    SNSR, SNSV and the refusal gap are in [0, 1] (similarities and rates), PAFS in [0, 1],
    entropy in bits (>= 0).
    """

    max_snsr: float | None = None
    max_snsv: float | None = None
    min_pafs: float | None = None
    max_entropy: float | None = None
    max_refusal_gap: float | None = None
    max_unusable: float | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(
                    f"threshold {f.name} must be a number or None; got "
                    f"{type(value).__name__} {value!r}. Set e.g. @fairness({f.name}=0.1)."
                )
            upper = math.inf if f.name == "max_entropy" else 1.0
            if not (0.0 <= float(value) <= upper):
                allowed = ">= 0 (bits)" if f.name == "max_entropy" else "between 0 and 1"
                raise ConfigError(
                    f"threshold {f.name} must be {allowed}; got {value!r}. "
                    f"Similarities, SNSR/SNSV/PAFS and rates all lie in [0, 1]."
                )

    def active(self) -> dict[str, float]:
        """The thresholds that are set, by name."""
        return {
            f.name: float(getattr(self, f.name))
            for f in fields(self)
            if getattr(self, f.name) is not None
        }


#: The absolute limits, by name: the marker arguments and ``recfair_<name>`` ini keys.
THRESHOLD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Thresholds))


def check_tolerance(tolerance: object) -> float:
    """``tolerance`` as a float, or a ConfigError that says what is allowed (the one check
    of it: the gate's, whoever reads the setting)."""
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float):
        raise ConfigError(
            f"tolerance must be a number >= 0 (how much a statistic may worsen against its "
            f"baseline); got {type(tolerance).__name__} {tolerance!r}."
        )
    if not (0.0 <= float(tolerance) < math.inf):
        raise ConfigError(
            f"tolerance must be a finite number >= 0; got {tolerance!r}. Use e.g. "
            f"@fairness(tolerance=0.02) or the ini key recfair_tolerance = 0.02."
        )
    return float(tolerance)


def check_alpha(alpha: object) -> float:
    """``alpha`` (the drift test's significance level) as a float in (0, 1)."""
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0.0 < alpha < 1.0:
        raise ConfigError(
            f"alpha (significance level of the baseline comparison) must be a number strictly "
            f"between 0 and 1, e.g. 0.05; got {alpha!r}."
        )
    return float(alpha)


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
) -> GateOutcome:
    """Gate ``result`` on ``thresholds`` and, when given, on drift against ``baseline``.

    ``baseline`` must be compatible (``baselines.incompatibility`` returned None). Drift is
    recorded for every attribute both runs share (``GateOutcome.drift[attribute][stat]`` =
    now - baseline), gated or not. ``seed`` seeds the sign flips of the drift test. A
    changed provider or model id is a note.
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
        d = family.evaluate_drift(
            result,
            baseline,
            gated=gated,
            tolerance=tol,
            alpha=a_level,
            seed=seed,
            n_resamples=n_resamples,
        )
        failures.extend(d.failures)
        notes.extend(d.notes)
        drift = d.deltas
    return GateOutcome.of(failures, notes, drift)
