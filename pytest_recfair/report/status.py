"""What every format shows the same way: status, favoured values, repeats, run metadata."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypeAlias

from pytest_recfair.report.fmt import LABEL, Status, Table, fmt, fmt_ci, fmt_delta
from pytest_recfair.report.sections import kind_sections, measure, run_parts
from pytest_recfair.results import TIE, AttributeResult, AuditResult, Stat
from pytest_recfair.vocab import STATISTICS, Statistic

# Baselines by test id, or a plain sequence of baseline AuditResults.
Baselines: TypeAlias = Mapping[str, AuditResult] | Sequence[AuditResult] | None


def baseline_map(baselines: Baselines) -> dict[str, AuditResult]:
    """Baselines keyed by test id, whatever form they came in."""
    if isinstance(baselines, Mapping):
        return dict(baselines)
    return {b.meta.test_id: b for b in baselines or ()}


def check_results(results: Sequence[AuditResult]) -> list[AuditResult]:
    """``results`` as a list, refusing anything that is not an AuditResult."""
    if isinstance(results, AuditResult):
        return [results]
    out = list(results)
    for i, r in enumerate(out):
        if not isinstance(r, AuditResult):
            raise TypeError(f"results[{i}] must be an AuditResult; got {type(r).__name__}.")
    return out


def attribute_status(result: AuditResult, attribute: str) -> str:
    """ "PASS", "FAIL" or "n/a" (not gated): only the attribute's own failures count."""
    if result.gate is None:
        return "n/a"
    own = {(f.attribute or "").casefold() for f in result.gate.failures if f.attribute}
    return "FAIL" if attribute.casefold() in own else "PASS"


# The method's descriptive flags (FaiRLLM/FairEval): not a gate, a reading aid. An attribute
# above them is marked FLAG even when its gate passed, so a large bias never reads as PASS.
FLAG_SNSR = 0.10
FLAG_SNSV = 0.05


def flags(a: AttributeResult) -> tuple[str, ...]:
    """Which descriptive flags ``a`` is above, e.g. ("SNSR 0.405 > 0.1",)."""
    limits: tuple[tuple[Statistic, float], ...] = (("snsr", FLAG_SNSR), ("snsv", FLAG_SNSV))
    values = [(stat, shown(a, stat).value, limit) for stat, limit in limits]
    return tuple(
        f"{s.upper()} {v:.3f} > {lim:g}" for s, v, lim in values if math.isfinite(v) and v > lim
    )


def attribute_label(result: AuditResult, a: AttributeResult) -> str:
    """FAIL, FLAG (not failed, but above the descriptive flags), else PASS or n/a."""
    status = attribute_status(result, a.attribute)
    return "FLAG" if status != "FAIL" and flags(a) else status


def result_status(result: AuditResult) -> str:
    return "n/a" if result.gate is None else "PASS" if result.gate.passed else "FAIL"


def failures_first(results: Sequence[AuditResult]) -> list[AuditResult]:
    """Failed tests first (each group in order): what needs action is seen first."""
    return sorted(check_results(results), key=lambda r: result_status(r) != "FAIL")


def counts(results: Sequence[AuditResult]) -> dict[str, int]:
    """How many results passed, failed and were not gated."""
    statuses = [result_status(r) for r in results]
    return {
        "tests": len(results),
        "passed": statuses.count("PASS"),
        "failed": statuses.count("FAIL"),
        "not_gated": statuses.count("n/a"),
    }


def favoured_text(a: AttributeResult) -> str:
    """ "most / least" for one column, or the tie marker once."""
    most, least = a.favoured()
    return TIE if most == TIE else f"{most} / {least}"


def repeat_stats(a: AttributeResult) -> str | None:
    """Entropy and noise floor (how far lists move by chance alone); None without them."""
    parts = []
    if a.entropy is not None and math.isfinite(a.entropy):
        parts.append(f"entropy {a.entropy:.2f} bits")
    if a.noise_floor is not None:
        parts.append(f"noise floor {fmt_ci(a.noise_floor)} ({a.metric}, neutral vs neutral)")
    return "; ".join(parts) or None


def describe(result: AuditResult) -> str:
    """One line of run metadata: the header, and the settings the kind's meta holds."""
    m = result.meta
    own = m.to_dict()  # the header and the kind's own settings only
    parts = [f"model {m.model} ({m.provider})", measure(result)]
    if (words := run_parts(result)) is not None:  # a kind's own description (report/sections.py)
        parts += words
    else:
        if "n_entities" in own:
            r = own.get("repeats")
            times = "" if r is None else f" x {r} repeat{'s' if r != 1 else ''}"
            parts.append(f"{own['n_entities']} entities{times}")
        if "grid" in own:
            parts.append(f"grid {own['grid']}")
        if "templates" in own:
            parts.append(f"templates {own['templates']}/{own['language']}")
    if own.get("perturbation"):
        parts.append(f"perturbation {own['perturbation']}")
    if m.role:
        parts.append(f"role {m.role!r}")
    return ", ".join(parts)


def failed_text(r: AuditResult) -> str:
    """'3 of 600 prompts got no valid response, left out (neutral 2, gender=female 1)', or ''."""
    if not r.failed:
        return ""
    groups = ", ".join(f"{g} {n}" for g, n in r.failed.items())
    return f"{r.n_failed} of {r.prompts} prompts got no valid response, left out ({groups})"


def same_attribute(baseline: AuditResult | None, a: AttributeResult) -> AttributeResult | None:
    """The baseline's entry for the same attribute and metric."""
    key = (a.attribute.casefold(), a.metric)
    attributes = baseline.attributes if baseline is not None else ()
    return next((b for b in attributes if (b.attribute.casefold(), b.metric) == key), None)


def value_table(a: AttributeResult, base: AttributeResult | None) -> Table:
    """The per-value table: mean similarity [CI], baseline mean, entities, missing, refusals."""
    base_mean = {v.value: v.mean.value for v in base.values} if base else {}
    rows = [
        [v.value, fmt_ci(v.mean), fmt(base_mean[v.value]) if v.value in base_mean else "—",
         str(v.n), str(v.missing), f"{v.refusal_rate:.1%}", f"{v.short_rate:.1%}"]
        for v in a.values
    ]  # fmt: skip
    head = ["value", "mean similarity [95% CI]", "baseline", "entities", "missing"]
    return Table("", [*head, "refusals", "short lists"], rows)


def stats_table(r: AuditResult) -> Table:
    """Each attribute's gate, statistics [CI], drift, refusal gap, favoured values, repeats."""
    head = ["attribute", "gate", *(f"{LABEL[s]} [95% CI]" for s in STATISTICS)]
    head += ["drift SNSR / SNSV / PAFS", "refusal gap", "most favoured", "least favoured"]
    drift = r.gate.drift if r.gate is not None else {}  # now - baseline, when compared
    rows = [
        [a.attribute, Status(attribute_label(r, a)), *(fmt_ci(shown(a, s)) for s in STATISTICS),
         " / ".join(fmt_delta(drift.get(a.attribute, {}).get(s)) for s in STATISTICS),
         f"{a.refusal_gap:.1%}", *a.favoured()]
        for a in r.attributes
    ]  # fmt: skip
    n = getattr(r.meta, "repeats", 1)
    notes = [f"{a.attribute} over {n} repeats: {x}" for a in r.attributes if (x := repeat_stats(a))]
    return Table("", head, rows, notes=notes, text=(1, 7, 8))


def shown(a: AttributeResult, statistic: Statistic) -> Stat:
    """ "n/a" when nothing was usable: SNSR 0.000 over no list would read as fair."""
    if a.values and all(v.total and v.missing >= v.total for v in a.values):
        return Stat(math.nan)
    stat: Stat = getattr(a, statistic)
    return stat


# What a drift test could detect and the baseline's noise floor (gate/drift.py,
# gate/thresholds.py): routine on every run, so the short terminal output leaves them to -v.
_ROUTINE = (
    ": this test can detect ",
    ": warning: this test is too noisy ",
    "baseline noise floor:",
)


def lead_notes(notes: Sequence[str]) -> list[str]:
    """The notes the short terminal output shows: all but the routine power and floor ones."""
    return [n for n in notes if not any(r in n for r in _ROUTINE)]


def usage_text(r: AuditResult) -> str | None:
    """Tokens and cost of the audit's replies (None when no reply reported usage)."""
    if not (r.prompt_tokens or r.completion_tokens):
        return None
    cost = "n/a (set recfair_prices)" if r.cost is None else f"${r.cost:,.4f}"
    return f"tokens: {r.prompt_tokens:,} input + {r.completion_tokens:,} output; cost {cost}"


def headline(r: AuditResult) -> str:
    """A test's one figure in every summary: the largest SNSR (a failing one first), or its
    kind's own."""
    own = "; ".join(b for s, d in kind_sections(r) if (b := s.brief(d)))
    if not r.attributes:
        return own

    def order(a: AttributeResult) -> tuple[bool, float]:
        snsr = shown(a, "snsr").value  # NaN: nothing usable, shown as n/a
        return attribute_label(r, a) == "FAIL", snsr if math.isfinite(snsr) else -1.0

    a = max(r.attributes, key=order)
    least = a.favoured()[1]
    text = f"{a.attribute} SNSR {fmt(shown(a, 'snsr').value)} {attribute_label(r, a)}"
    text += f", {least} least favoured" if a.values and least != favoured_text(a) else ""
    return "; ".join(x for x in (text, own) if x)
