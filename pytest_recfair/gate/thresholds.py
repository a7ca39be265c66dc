"""The fairness gate (docs/baselines.md): absolute thresholds, and drift family-wise at
``alpha``. A stored baseline is ONE noisy draw (one that drew low fails an unchanged model
forever), so each margin is at least ``factor`` standard errors of the baseline's own
statistic (delta method: deterministic); above ``noise_limit`` the baseline is warned of."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from pytest_recfair.gate import drift as family
from pytest_recfair.gate.limits import Thresholds, check_alpha, check_tolerance
from pytest_recfair.metrics import inference
from pytest_recfair.results import AttributeResult, AuditResult, GateFailure, GateOutcome, Stat
from pytest_recfair.vocab import HIGHER_IS_FAIRER, STATISTICS, FailureKind, GatedQuantity, Statistic


def _threshold_failures(a: AttributeResult, t: Thresholds, unusable: bool) -> list[GateFailure]:
    out: list[GateFailure] = []
    checks: list[tuple[GatedQuantity, float | None, float | None, Stat | None]] = [
        ("snsr", t.max_snsr, a.snsr.value, a.snsr),
        ("snsv", t.max_snsv, a.snsv.value, a.snsv),
        ("pafs", t.min_pafs, a.pafs.value, a.pafs),
        ("entropy", t.max_entropy, a.entropy, None),
        ("refusal_gap", t.max_refusal_gap, a.refusal_gap, None),
        ("unusable", t.max_unusable if unusable else None, family.unusable_share(a), None),
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
    """Gate ``result`` on ``thresholds`` and, when given, on drift against a compatible
    ``baseline``: every shared attribute's drift is recorded (now - baseline), a changed
    model or provider is a note, ``floor_factor`` > 0 raises each margin to that many of
    the baseline's own standard errors (warned about above ``noise_limit``)."""
    tol, a_level = check_tolerance(tolerance), check_alpha(alpha)
    if not isinstance(thresholds, Thresholds):
        raise TypeError(
            f"thresholds must be a gate.Thresholds; got {type(thresholds).__name__}. "
            f"Build one with gate.Thresholds(max_snsr=..., ...)."
        )
    if not isinstance(result, AuditResult):
        raise TypeError(f"result must be an AuditResult; got {type(result).__name__}.")
    if baseline is not None and not isinstance(baseline, AuditResult):
        raise TypeError(f"baseline must be an AuditResult or None; got {type(baseline).__name__}.")
    failures: list[GateFailure] = []
    notes: list[str] = []
    drift: dict[str, dict[str, float]] = {}
    seen: set[str] = set()
    for a in result.attributes:  # the unusable share is the same for every metric: once
        failures += _threshold_failures(a, thresholds, a.attribute.casefold() not in seen)
        seen.add(a.attribute.casefold())
    if baseline is not None:
        for name in ("model", "provider", "role"):
            was, now = getattr(baseline.meta, name), getattr(result.meta, name)
            if was != now:  # role None: the neutral recommender (no persona)
                was, now = (x or "neutral" if name == "role" else x for x in (was, now))
                notes.append(f"{name} changed: {was} -> {now}")
        shared = {e for x in result.attributes for e in x.matrix.entities}
        fl = floors(baseline, floor_factor, shared or None)
        d = family.evaluate_drift(
            result, baseline, gated=gated, tolerance=tol, alpha=a_level, seed=seed,
            n_resamples=n_resamples, floors=fl,
        )  # fmt: skip
        failures.extend(d.failures)
        notes.extend(d.notes)
        notes.extend(
            floor_notes(d.test, fl, tolerance=tol, factor=floor_factor, noise_limit=noise_limit)
        )
        drift = d.deltas
    return GateOutcome.of(failures, notes, drift)


FloatArray = npt.NDArray[np.float64]
#: A drift member: (attribute casefolded, metric, statistic or "unusable").
MemberKey = tuple[str, str, str]


def _gradient(means: FloatArray, statistic: str) -> FloatArray:
    """d statistic / d value means (a worsening's sign does not matter for its size)."""
    V = means.size
    hi, lo = int(np.argmax(means)), int(np.argmin(means))
    pair = np.zeros(V)
    pair[hi], pair[lo] = 1.0, -1.0  # SNSR = mean[hi] - mean[lo]
    dev = means - means.mean()
    if statistic == "snsr" or not np.any(np.abs(dev) > 1e-12):
        # every mean tied: SNSV and PAFS are not differentiable there; the extreme pair
        # scaled as each statistic scales a single value's move is their first-order size
        return pair * {"snsr": 1.0, "snsv": 0.5, "pafs": 1.0 / V}[statistic]
    if statistic == "snsv":
        return np.asarray(dev / (V * float(np.sqrt(np.mean(dev**2)))), dtype=np.float64)
    sign = np.sign(dev)  # PAFS = 1 - mean |mean_v - centre|
    return np.asarray(-(sign - sign.mean()) / V, dtype=np.float64)


def statistic_se(sims: FloatArray, statistic: str) -> float:
    """Standard error over entities of a spread statistic of ``sims`` (E, V; NaN = left
    out), by the delta method: the sd of each entity's influence over sqrt(E)."""
    x = np.asarray(sims, dtype=np.float64)
    seen = ~np.isnan(x)
    n_v = seen.sum(axis=0)
    E = x.shape[0]
    if E < 2 or np.any(n_v < 2):
        return math.nan
    means = np.nansum(x, axis=0) / n_v
    centred = np.where(seen, x - means, 0.0) * (E / n_v)
    influence = centred @ _gradient(means, statistic)
    return float(math.sqrt(float(np.sum(influence**2)) / (E * (E - 1))))


def standard_errors(a: AttributeResult, within: Collection[str] | None = None) -> dict[str, float]:
    """The baseline's own standard error of each floored quantity, on the entities ``within``."""
    rows = np.array([within is None or e in within for e in a.matrix.entities], dtype=bool)
    sims = np.asarray(a.matrix.sims, dtype=np.float64)[rows]
    out: dict[str, float] = {s: statistic_se(sims, s) for s in STATISTICS}
    missing = np.asarray(a.matrix.missing, dtype=bool)[rows]
    answered = missing | ~np.isnan(sims)
    E, total = missing.shape[0], answered.sum()
    out["unusable"] = math.nan
    if E >= 2 and total > 0:  # the unusable share: cells flagged, of the cells answered
        share = missing[answered].mean()
        influence = (missing.sum(axis=1) - share * answered.sum(axis=1)) / (total / E)
        out["unusable"] = float(math.sqrt(float(np.sum(influence**2)) / (E * (E - 1))))
    return out


def floors(
    baseline: AuditResult, factor: float, within: Collection[str] | None = None
) -> dict[MemberKey, float]:
    """``factor`` x the baseline's standard error of every member it can gate, on the
    entities ``within`` a subset run shares with it (0 disables; a member whose error is
    undefined, too few entities, gets no floor). A subset's floor is larger: the test
    compares on fewer entities, so the baseline's share of the noise is larger too."""
    if factor <= 0:
        return {}
    return {
        (a.attribute.casefold(), a.metric, stat): factor * se
        for a in baseline.attributes
        for stat, se in standard_errors(a, within).items()
        if math.isfinite(se)
    }


def floor_notes(
    test: inference.DriftResult | None,
    fl: Mapping[MemberKey, float],
    *,
    tolerance: float,
    factor: float,
    noise_limit: float,
) -> list[str]:
    """The floor of the gated statistics (always: the tolerance in effect), and a warning
    when the baseline is too noisy to gate on."""
    members = test.members if test is not None else ()
    n = {(v.key[0].casefold(), v.key[1], v.statistic): v.n_paired for v in members}
    spread = {k: fl[k] for k in n if k in fl and k[2] != "unusable"}
    if not spread:
        return []
    raised = [f for f in spread.values() if f > tolerance]
    # the floor falls as 1 / sqrt(entities): where the worst one reaches the tolerance
    worst = max(spread, key=lambda k: spread[k] ** 2 * n[k])
    needs = ""
    if raised and tolerance > 0:
        at = math.ceil(n[worst] * (spread[worst] / tolerance) ** 2)
        needs = f" (the tolerance applies from ~{at:,} entities in baseline and run)"
    lo, hi = min(spread.values()), max(spread.values())
    span = f"{lo:.3f}" if math.isclose(lo, hi, abs_tol=5e-4) else f"{lo:.3f}-{hi:.3f}"
    out = [
        f"baseline noise floor: {len(spread)} gated comparison(s) need a worsening beyond "
        f"max(tolerance {tolerance:g}, {factor:g} x the baseline's own standard error = "
        f"{span}); the floor is above the tolerance for "
        f"{len(raised)} of them{needs}"
    ]
    noisy = sorted((k for k, f in spread.items() if f > noise_limit), key=lambda k: -spread[k])
    if noisy:
        a, m, s = noisy[0]
        out.append(
            f"warning: the baseline is too noisy to gate on for {len(noisy)} comparison(s) "
            f"(worst {a} ({m}) {s.upper()}: floor {spread[noisy[0]]:.3f} > "
            f"{noise_limit:g}); a real worsening below the floor cannot fail. Re-record the "
            f"baseline with more entities or repeats to lower it"
        )
    return out
