"""The words of a failing gate, rendered from its structured ``GateFailure`` records.

``failure_text`` is the one place a failure becomes a sentence; the pytest failure text
(``verdict_message``), the terminal summary and every report format use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pytest_recfair.report.fmt import LABEL, clip, fmt, fmt_interval, fmt_p
from pytest_recfair.report.status import favoured_phrase, favoured_text
from pytest_recfair.results import AttributeResult, AuditResult, GateFailure, GateOutcome
from pytest_recfair.vocab import FAILURE_KINDS, HIGHER_IS_FAIRER, STATISTICS, accept_command

__all__ = [
    "accept_offered",
    "failure_label",
    "failure_message",
    "failure_tag",
    "failure_text",
    "format_outcome",
    "limits_advice",
    "verdict_message",
]


def _attribute(result: AuditResult | None, f: GateFailure) -> AttributeResult | None:
    if result is None or f.attribute is None:
        return None
    for a in result.attributes:
        if a.attribute.casefold() == f.attribute.casefold():
            return a
    return None


def _bound(f: GateFailure) -> str:
    """ "max 0.05" / "min 0.9" for a threshold, "tol 0.02" for a drift."""
    if f.limit is None or f.statistic is None:
        return ""
    if f.kind == "drift":
        return f"tol {f.limit:.3g}"
    return f"{'min' if f.statistic in HIGHER_IS_FAIRER else 'max'} {f.limit:g}"


def _change(f: GateFailure) -> str:
    """ "SNSR 0.1 [..] -> 0.2 [..] (+0.100, tolerance 0.02; paired p = 0.01 over 40 entities)"."""
    label = LABEL[f.statistic] if f.statistic else "?"
    delta = (f.value or 0.0) - (f.baseline or 0.0)
    p = fmt_p(f.p_value) if f.p_value is not None else "n/a"
    return (
        f"{label} {fmt_interval(f.baseline, f.baseline_ci)} -> {fmt_interval(f.value, f.value_ci)} "
        f"({delta:+.3f}, tolerance {f.limit or 0.0:.3g}; family-wise p {p} over {f.n_paired} "
        f"entities{'; ' + f.detail if f.detail else ''})"
    )


def failure_text(f: GateFailure, result: AuditResult | None = None) -> str:
    """One failure as a sentence; ``result`` adds the favoured values of its attribute."""
    label = LABEL[f.statistic] if f.statistic else "baseline"
    a = _attribute(result, f)
    fav = f"; {favoured_phrase(a)}" if a is not None else ""
    limit = f"{f.limit:g}" if f.limit is not None else "n/a"
    if f.kind == "threshold" and f.statistic == "unusable":
        return (
            f"{fmt(f.value)} of the replies had no usable list (empty, refused, prose or "
            f"unparseable), above the maximum {limit}: the model did not answer the audit, "
            f"so its fairness cannot be judged (set max_unusable to allow more)"
        )
    if f.kind == "threshold":
        low = f.statistic in HIGHER_IS_FAIRER
        word = "below the minimum" if low else "above the maximum"
        return f"{label} = {fmt_interval(f.value, f.value_ci)} is {word} {limit}{fav}"
    if f.kind == "unmeasured":
        return (
            f"{label} threshold {limit} is set but {label} was not measured (it needs "
            f"repeats >= 2; set @fairness(repeats=3) or drop max_{f.statistic})."
        )
    if f.kind == "undefined":
        return (
            f"{label} could not be computed (no scorable entity for some value), so the "
            f"threshold {limit} cannot be checked; look at the missing-reply counts and refusals."
        )
    if f.kind == "drift":
        alpha = f"{f.alpha:g}" if f.alpha is not None else "n/a"
        return f"{_change(f)} got worse than the baseline (p < alpha {alpha}){fav}"
    if f.kind == "test":
        return f"the test body failed: {f.detail}"
    if f.kind == "incomparable":
        what = f" {label}" if f.statistic else ""
        return f"cannot compare{what} with the baseline: {f.detail}"
    if f.kind == "incompatible":
        return f"baseline not compared: {f.detail}"
    return f.detail or "the fairness baseline is missing or unusable"


def kind_owned(f: GateFailure) -> bool:
    """A kind of audit's own failure (item shift, position, ...): a failure kind outside
    the gate's vocabulary, named by the kind, worded from its fields and ``detail``."""
    return f.kind not in FAILURE_KINDS


def failure_tag(f: GateFailure) -> str:
    """What failed, in one word or two: the statistic ("snsr", "unusable"), the kind's own
    failure ("item_shift"), "test body", or "baseline" (missing, unusable, incompatible)."""
    if f.statistic:
        return f.statistic
    if kind_owned(f):
        return f.kind
    return "test body" if f.kind == "test" else "baseline"


def failure_label(f: GateFailure) -> str:
    """ "religion snsr", "item_shift", "test body" or "baseline"."""
    return " ".join(x for x in (f.attribute, failure_tag(f)) if x)


def _is_limit(f: GateFailure) -> bool:
    """An absolute limit crossed (the gate's thresholds, a kind's limits): never accepted."""
    return f.kind == "threshold" or (kind_owned(f) and f.baseline is None)


def _is_drift(f: GateFailure) -> bool:
    # "compare" (--fairness-compare-fail): a stored reference, which no update changes
    return f.kind == "drift" or (kind_owned(f) and f.baseline is not None and f.kind != "compare")


def accept_offered(outcome: GateOutcome) -> bool:
    """Whether --fairness-update would accept this run as the new baseline: it gates
    without a baseline, so only drifts go away; a crossed absolute limit fails again."""
    return not any(_is_limit(f) for f in outcome.failures) and any(
        _is_drift(f) for f in outcome.failures
    )


def limits_advice(outcome: GateOutcome) -> str | None:
    """The sentence for crossed absolute limits (None when none was crossed)."""
    names = sorted(
        {
            _limit_name(f) if f.kind == "threshold" else f.kind
            for f in outcome.failures
            if _is_limit(f)
        }
    )
    if not names:
        return None
    return (
        f"Absolute limits crossed ({', '.join(names)}): they are set by the @fairness marker "
        f"argument of that name or the recfair_<name> ini key; a run that crosses them "
        f"is never accepted as a baseline: fix the model or change the limit."
    )


def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(r: Sequence[str]) -> str:
        return "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()

    return [line(header), "  " + "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def _row(f: GateFailure, outcome: GateOutcome, result: AuditResult) -> list[str]:
    a = _attribute(result, f)
    now_txt = before_txt = fav = ""
    if a is not None and f.statistic is not None:
        if f.statistic in STATISTICS:
            now_stat = getattr(a, f.statistic)
            now_txt = fmt_interval(now_stat.value, now_stat.ci)
            delta = outcome.drift.get(a.attribute, {}).get(f.statistic)
            if f.baseline is not None:
                before_txt = fmt_interval(f.baseline, f.baseline_ci)
            elif delta is not None:
                before_txt = fmt(now_stat.value - delta)
        elif f.value is not None:  # entropy, refusal gap, unusable share: the gate's value
            now_txt = fmt(f.value)
            before_txt = fmt(f.baseline) if f.baseline is not None else ""
        else:
            now_txt = fmt(a.entropy if f.statistic == "entropy" else a.refusal_gap)
        fav = favoured_text(a) if a.values else ""
    change = f"{before_txt} -> {now_txt}" if before_txt else now_txt
    attribute = clip(f.attribute or "(all)", 24)
    if kind_owned(f):  # other kinds of audit say the rest in detail
        return [attribute, f.kind, _other_change(f), _other_bound(f), clip(f.group or "", 40)]
    return [attribute, failure_tag(f), change, _bound(f), clip(fav, 40)]


def _other_change(f: GateFailure) -> str:
    """ "0.112 -> 0.260" for a drift of another kind of audit, "0.260" for a limit."""
    now = fmt(f.value) if f.value is not None else ""
    return f"{fmt(f.baseline)} -> {now}" if f.baseline is not None else now


def _other_bound(f: GateFailure) -> str:
    """A drift is held to the tolerance, an item shift without baseline to max_shift; a
    position limit may be a maximum or a group-difference tolerance: its reason says which."""
    if f.limit is None or (f.baseline is None and f.kind == "position"):
        return ""
    return f"{'tol' if f.baseline is not None else 'max'} {f.limit:g}"


def format_outcome(outcome: GateOutcome, result: AuditResult) -> list[str]:
    """The failing rows as a small table plus one reason line per failure.

    Columns: attribute, statistic, baseline -> now (with CIs), threshold, favoured values.
    """
    if not outcome.failures:
        return []
    rows = [_row(f, outcome, result) for f in outcome.failures]
    header = ["attribute", "statistic", "baseline -> now [95% CI]", "threshold"]
    lines = _table(rows, [*header, "most / least favoured"])
    lines.extend(f"  - {failure_label(f)}: {failure_text(f, result)}" for f in outcome.failures)
    return lines


def failure_message(outcome: GateOutcome, result: AuditResult) -> str:
    """The whole text of a failing gate: heading, table, notes and the accept command."""
    lines = [f"fairness gate failed for {result.meta.test_id} ({result.meta.model}):"]
    lines.extend(format_outcome(outcome, result))
    lines.extend(f"  note: {n}" for n in outcome.notes)
    advice = limits_advice(outcome)
    if advice is not None:
        lines.append(advice)
    # accepting is offered only when it would work: never past a crossed absolute limit
    if accept_offered(outcome):
        lines.append(
            "If the new numbers are intended, accept them with: "
            f"{accept_command(result.meta.test_id)}"
        )
    return "\n".join(lines)


def verdict_message(result: AuditResult) -> str:
    """What pytest says for a judged test (``engine.judge``): the gate's failure message,
    then why its baseline is missing or unusable; else the test body's error. "" if it
    passed."""
    outcome = result.gate
    if outcome is None or outcome.passed:
        return ""
    said = ("baseline", "test")
    gated = tuple(f for f in outcome.failures if f.kind not in said)
    missing = [f.detail or "" for f in outcome.failures if f.kind == "baseline"]
    lines = [failure_message(replace(outcome, failures=gated), result)] if gated else []
    lines.extend(missing)
    if not lines:  # only the body failed: its error is the message
        lines = [f.detail or "" for f in outcome.failures if f.kind == "test"]
    return "\n".join(lines)


def _limit_name(f: GateFailure) -> str:
    """The threshold a "threshold" failure crossed: max_snsr, min_pafs, max_unusable, ..."""
    return ("min_" if f.statistic in HIGHER_IS_FAIRER else "max_") + str(f.statistic)
