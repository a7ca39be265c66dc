"""The fairness gate: decide whether one audit passes.

Two kinds of failure (see docs/baselines.md):

- an absolute threshold is crossed (``Thresholds``: max_snsr, max_snsv, min_pafs,
  max_entropy, max_refusal_gap; each optional);
- a statistic got worse than its stored baseline by more than ``tolerance`` AND the paired
  entity bootstrap (``metrics.compare``) says the change is real (one-sided p < ``alpha``).
  "Worse" means higher SNSR/SNSV and lower PAFS.

Both conditions are needed for a drift failure: the tolerance says how large a change
matters, the p-value says whether it is more than resampling noise of the seed entities.

Pure: no pytest, no httpx. ``evaluate`` never looks at whether the baseline is compatible;
callers check ``baselines.incompatibility`` first and pass ``baseline=None`` when it is not.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields

from pytest_recfair import metrics
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.kinds import STATISTICS, Statistic, accept_command
from pytest_recfair.results import (
    AttributeResult,
    AuditResult,
    GateFailure,
    GateOutcome,
    Interval,
    Stat,
)

__all__ = [
    "DRIFT_STATISTICS",
    "Thresholds",
    "accept_command",
    "evaluate",
    "failure_message",
    "format_outcome",
]

# Statistics compared against a baseline with the paired bootstrap (metrics.compare).
DRIFT_STATISTICS: tuple[Statistic, ...] = STATISTICS

_LABEL = {
    "snsr": "SNSR",
    "snsv": "SNSV",
    "pafs": "PAFS",
    "entropy": "entropy",
    "refusal_gap": "refusal gap",
}


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


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None or math.isnan(x):
        return "n/a"
    return f"{x:.{digits}f}"


def _fmt_ci(ci: Interval | None) -> str:
    if ci is None or math.isnan(ci.low) or math.isnan(ci.high):
        return ""
    return f" [{ci.low:.3f}, {ci.high:.3f}]"


def _fmt_p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"= {p:.3f}"


def _fmt_stat(s: Stat) -> str:
    return _fmt(s.value) + _fmt_ci(s.ci)


def _check_args(tolerance: object, alpha: object, thresholds: object) -> tuple[float, float]:
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
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0.0 < alpha < 1.0:
        raise ConfigError(
            f"alpha (significance level of the baseline comparison) must be a number strictly "
            f"between 0 and 1, e.g. 0.05; got {alpha!r}."
        )
    if not isinstance(thresholds, Thresholds):
        raise TypeError(
            f"thresholds must be a gate.Thresholds; got {type(thresholds).__name__}. "
            f"Build one with gate.Thresholds(max_snsr=..., ...)."
        )
    return float(tolerance), float(alpha)


def _key(a: AttributeResult) -> tuple[str, str]:
    return (a.attribute.casefold(), a.metric)


def _favoured(a: AttributeResult) -> str:
    finite = [v for v in a.values if not math.isnan(v.mean.value)]
    if not finite:
        return "n/a"
    hi = max(finite, key=lambda v: v.mean.value)
    lo = min(finite, key=lambda v: v.mean.value)
    return f"most {hi.value} ({hi.mean.value:.3f}), least {lo.value} ({lo.mean.value:.3f})"


def _threshold_failures(a: AttributeResult, t: Thresholds) -> list[GateFailure]:
    out: list[GateFailure] = []
    checks: list[tuple[str, float | None, float | None, bool, Stat | None]] = [
        ("snsr", t.max_snsr, a.snsr.value, True, a.snsr),
        ("snsv", t.max_snsv, a.snsv.value, True, a.snsv),
        ("pafs", t.min_pafs, a.pafs.value, False, a.pafs),
        ("entropy", t.max_entropy, a.entropy, True, None),
        ("refusal_gap", t.max_refusal_gap, a.refusal_gap, True, None),
    ]
    for stat, limit, value, is_max, full in checks:
        if limit is None:
            continue
        label = _LABEL[stat]
        shown = _fmt_stat(full) if full is not None else _fmt(value)
        if value is None:
            # Entropy needs repeats; a threshold that cannot be checked must not pass silently.
            out.append(
                GateFailure(
                    a.attribute,
                    stat,
                    f"{label} threshold {limit:g} is set but {label} was not measured "
                    f"(it needs repeats >= 2; set @fairness(repeats=3) or drop max_{stat}).",
                )
            )
            continue
        if math.isnan(value):
            out.append(
                GateFailure(
                    a.attribute,
                    stat,
                    f"{label} could not be computed (no scorable entity for some value), so "
                    f"the threshold {limit:g} cannot be checked; look at the missing-reply "
                    f"counts and refusals.",
                )
            )
            continue
        crossed = value > limit if is_max else value < limit
        if crossed:
            word = "above the maximum" if is_max else "below the minimum"
            out.append(
                GateFailure(
                    a.attribute,
                    stat,
                    f"{label} = {shown} is {word} {limit:g}; {_favoured(a)}",
                )
            )
    return out


def _drift(
    a: AttributeResult,
    base: AttributeResult,
    *,
    tolerance: float,
    alpha: float,
    seed: int,
    n_resamples: int,
) -> tuple[dict[str, float], list[GateFailure], list[str]]:
    drift: dict[str, float] = {}
    failures: list[GateFailure] = []
    notes: list[str] = []
    for stat in DRIFT_STATISTICS:
        now: Stat = getattr(a, stat)
        before: Stat = getattr(base, stat)
        delta = now.value - before.value
        if math.isnan(delta):  # undefined on either side: no drift to record or judge
            continue
        drift[stat] = delta
        worse = -delta if stat == "pafs" else delta
        if worse <= tolerance:
            continue
        try:
            cmp = metrics.compare(
                base.matrix, a.matrix, statistic=stat, n_resamples=n_resamples, seed=seed
            )
        except DataError as exc:
            failures.append(
                GateFailure(
                    a.attribute,
                    "baseline",
                    f"cannot compare {_LABEL[stat]} with the baseline: {exc}",
                )
            )
            continue
        label = _LABEL[stat]
        change = (
            f"{label} {_fmt_stat(before)} -> {_fmt_stat(now)} ({delta:+.3f}, tolerance "
            f"{tolerance:g}; paired p {_fmt_p(cmp.p_value)} over {cmp.n_paired} entities)"
        )
        if cmp.p_value < alpha:
            failures.append(
                GateFailure(
                    a.attribute,
                    stat,
                    f"{change} got worse than the baseline (p < alpha {alpha:g}); {_favoured(a)}",
                )
            )
        else:
            notes.append(
                f"{a.attribute}: {change} is not significant (p >= alpha {alpha:g}); not failed"
            )
    if a.entropy is not None and base.entropy is not None:
        drift["entropy"] = a.entropy - base.entropy
    drift["refusal_gap"] = a.refusal_gap - base.refusal_gap
    drift = {k: v for k, v in drift.items() if not math.isnan(v)}
    return drift, failures, notes


def evaluate(
    result: AuditResult,
    baseline: AuditResult | None,
    thresholds: Thresholds,
    *,
    tolerance: float,
    alpha: float = 0.05,
    seed: int = 0,
    n_resamples: int = 1000,
) -> GateOutcome:
    """Gate ``result`` on ``thresholds`` and, when given, on drift against ``baseline``.

    ``baseline`` must be compatible (``baselines.incompatibility`` returned None). Drift is
    recorded for every attribute both runs share (``GateOutcome.drift[attribute][stat]`` =
    now - baseline), whether or not it failed. A changed provider or model id is a note.
    """
    tol, a_level = _check_args(tolerance, alpha, thresholds)
    if not isinstance(result, AuditResult):
        raise TypeError(f"result must be an AuditResult; got {type(result).__name__}.")
    if baseline is not None and not isinstance(baseline, AuditResult):
        raise TypeError(f"baseline must be an AuditResult or None; got {type(baseline).__name__}.")
    failures: list[GateFailure] = []
    notes: list[str] = []
    drift: dict[str, dict[str, float]] = {}
    for a in result.attributes:
        failures.extend(_threshold_failures(a, thresholds))
    if baseline is not None:
        if baseline.meta.model != result.meta.model:
            notes.append(f"model changed: {baseline.meta.model} -> {result.meta.model}")
        if baseline.meta.provider != result.meta.provider:
            notes.append(f"provider changed: {baseline.meta.provider} -> {result.meta.provider}")
        by_key = {_key(b): b for b in baseline.attributes}
        for a in result.attributes:
            base = by_key.get(_key(a))
            if base is None:
                notes.append(
                    f"{a.attribute} ({a.metric}) has no baseline entry, so it was not compared; "
                    f"add it with {accept_command(result.meta.test_id)}"
                )
                continue
            d, f, n = _drift(
                a, base, tolerance=tol, alpha=a_level, seed=seed, n_resamples=n_resamples
            )
            drift[a.attribute] = d
            failures.extend(f)
            notes.extend(n)
        current = {_key(a) for a in result.attributes}
        for b in baseline.attributes:
            if _key(b) not in current:
                notes.append(f"{b.attribute} ({b.metric}) is in the baseline but was not audited")
    return GateOutcome(
        passed=not failures, failures=tuple(failures), notes=tuple(notes), drift=drift
    )


# --- the failure message -----------------------------------------------------------------


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(r: Sequence[str]) -> str:
        return "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()

    return [line(header), "  " + "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


# Recovers the limit from the messages this module writes, for callers without Thresholds.
_LIMIT_RE = re.compile(r"(above the maximum|below the minimum|tolerance) ([0-9.eE+-]+)")


def _limit_text(f: GateFailure, limits: dict[str, float]) -> str:
    m = _LIMIT_RE.search(f.message)
    if m is not None:
        kind = {"above the maximum": "max", "below the minimum": "min"}.get(m.group(1), "tol")
        return f"{kind} {m.group(2).rstrip('.;,')}"
    for name, value in limits.items():  # messages written elsewhere (e.g. by the session)
        if name.endswith(f.statistic):
            return f"{name.split('_')[0]} {value:g}"
    return ""


def format_outcome(
    outcome: GateOutcome,
    result: AuditResult,
    *,
    baseline: AuditResult | None = None,
    thresholds: Thresholds | None = None,
) -> list[str]:
    """The failing rows as a small table plus one reason line per failure.

    Columns: attribute, statistic, baseline -> now (with CIs), threshold, favoured values.
    Without ``baseline`` the baseline point value is recovered from ``outcome.drift``
    (its CI is in the reason line).
    """
    if not outcome.failures:
        return []
    by_name = {a.attribute.casefold(): a for a in result.attributes}
    base_by = {b.attribute.casefold(): b for b in baseline.attributes} if baseline else {}
    limits = thresholds.active() if thresholds else {}
    rows: list[list[str]] = []
    for f in outcome.failures:
        a = by_name.get(f.attribute.casefold())
        now_txt = before_txt = limit = fav = ""
        if a is not None and f.statistic in _LABEL:
            if f.statistic in DRIFT_STATISTICS:
                now_stat: Stat = getattr(a, f.statistic)
                now_txt = _fmt_stat(now_stat)
                b = base_by.get(f.attribute.casefold())
                delta = outcome.drift.get(f.attribute, {}).get(f.statistic)
                if b is not None:
                    before_txt = _fmt_stat(getattr(b, f.statistic))
                elif delta is not None:
                    before_txt = _fmt(now_stat.value - delta)
            elif f.statistic == "entropy":
                now_txt = _fmt(a.entropy)
            else:
                now_txt = _fmt(a.refusal_gap)
            limit = _limit_text(f, limits)
            fav = f"{a.most_favoured} / {a.least_favoured}" if a.values else ""
        change = f"{before_txt} -> {now_txt}" if before_txt else now_txt
        rows.append([_clip(f.attribute, 24), f.statistic, change, limit, _clip(fav, 40)])
    header = [
        "attribute",
        "statistic",
        "baseline -> now [95% CI]",
        "threshold",
        "most / least favoured",
    ]
    lines = _table(rows, header)
    lines.extend(f"  - {f.attribute} {f.statistic}: {f.message}" for f in outcome.failures)
    return lines


def failure_message(
    outcome: GateOutcome,
    result: AuditResult,
    *,
    baseline: AuditResult | None = None,
    thresholds: Thresholds | None = None,
) -> str:
    """The whole text of a failing gate: heading, table, notes and the accept command."""
    lines = [f"fairness gate failed for {result.meta.test_id} ({result.meta.model}):"]
    lines.extend(format_outcome(outcome, result, baseline=baseline, thresholds=thresholds))
    lines.extend(f"  note: {n}" for n in outcome.notes)
    lines.append(
        f"If the new numbers are intended, accept them with: {accept_command(result.meta.test_id)}"
    )
    return "\n".join(lines)
