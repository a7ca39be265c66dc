"""Fairness reports: terminal summary, JSON, Markdown and a self-contained HTML page.

Pure: takes ``AuditResult`` objects (with their gate outcome) and returns text. The HTML
renderer lives in ``report_html``; ``write_report`` picks the format from the file
extension and writes atomically. See docs/reports.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from pytest_recfair import __version__
from pytest_recfair.errors import ConfigError
from pytest_recfair.fileio import atomic_write_text
from pytest_recfair.kinds import REPORT_FORMATS as KIND_REPORT_FORMATS
from pytest_recfair.kinds import accept_command
from pytest_recfair.results import AttributeResult, AuditResult, GateOutcome, Stat

__all__ = [
    "REPORT_FORMATS",
    "TIE",
    "Baselines",
    "attribute_status",
    "baseline_map",
    "favoured",
    "favoured_text",
    "repeat_stats",
    "terminal_summary",
    "to_html",
    "to_json",
    "to_markdown",
    "write_report",
]

REPORT_FORMATS = KIND_REPORT_FORMATS
WIDTH = 100  # the terminal summary never exceeds this many columns

# Baselines by test id, or a plain sequence of baseline AuditResults.
Baselines: TypeAlias = Mapping[str, AuditResult] | Sequence[AuditResult] | None


def baseline_map(baselines: Baselines) -> dict[str, AuditResult]:
    """Baselines keyed by test id, whatever form they came in."""
    if baselines is None:
        return {}
    if isinstance(baselines, Mapping):
        return dict(baselines)
    return {b.meta.test_id: b for b in baselines}


def _check(results: Sequence[AuditResult]) -> list[AuditResult]:
    if isinstance(results, AuditResult):
        return [results]
    out = list(results)
    for i, r in enumerate(out):
        if not isinstance(r, AuditResult):
            raise TypeError(f"results[{i}] must be an AuditResult; got {type(r).__name__}.")
    return out


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None or math.isnan(x):
        return "n/a"
    return f"{x:.{digits}f}"


def fmt_delta(x: float | None) -> str:
    if x is None or math.isnan(x):
        return "—"
    return f"{x:+.3f}"


def fmt_ci(s: Stat) -> str:
    if s.ci is None or math.isnan(s.ci.low) or math.isnan(s.ci.high):
        return fmt(s.value)
    return f"{fmt(s.value)} [{s.ci.low:.3f}, {s.ci.high:.3f}]"


def attribute_status(result: AuditResult, attribute: str) -> str:
    """ "PASS", "FAIL" or "n/a" (not gated) for one attribute of one result."""
    gate = result.gate
    if gate is None:
        return "n/a"
    for f in gate.failures:
        if f.attribute.casefold() in (attribute.casefold(), "*"):
            return "FAIL"
    return "PASS"


def result_status(result: AuditResult) -> str:
    if result.gate is None:
        return "n/a"
    return "PASS" if result.gate.passed else "FAIL"


TIE = "— (all equal)"  # shown instead of a most/least favoured value when all means tie


def favoured(a: AttributeResult) -> tuple[str, str]:
    """(most, least) favoured values, ignoring values whose mean is undefined.

    When every mean ties (SNSR = 0) no value is favoured: both are :data:`TIE`, never the
    first value twice ("Asian / Asian").
    """
    finite = [v for v in a.values if not math.isnan(v.mean.value)]
    if not finite:
        return ("n/a", "n/a")
    hi = max(finite, key=lambda v: v.mean.value)
    lo = min(finite, key=lambda v: v.mean.value)
    if math.isclose(hi.mean.value, lo.mean.value, rel_tol=0.0, abs_tol=1e-12):
        return (TIE, TIE)
    return (hi.value, lo.value)


def favoured_text(a: AttributeResult) -> str:
    """ "most / least" for one column, or the tie marker once."""
    most, least = favoured(a)
    return TIE if most == TIE else f"{most} / {least}"


def repeat_stats(a: AttributeResult) -> str | None:
    """Entropy and noise floor of a run with repeats > 1 (None when it has neither).

    The noise floor is the neutral-vs-neutral similarity across repeats: how far the
    model's lists move by chance alone, the scale against which a value's drop is read.
    """
    parts = []
    if a.entropy is not None and math.isfinite(a.entropy):
        parts.append(f"entropy {a.entropy:.2f} bits")
    if a.noise_floor is not None:
        parts.append(f"noise floor {fmt_ci(a.noise_floor)} ({a.metric}, neutral vs neutral)")
    return "; ".join(parts) or None


def _drift(gate: GateOutcome | None, attribute: str, stat: str) -> float | None:
    if gate is None:
        return None
    return gate.drift.get(attribute, {}).get(stat)


def describe(result: AuditResult) -> str:
    """One line of run metadata."""
    m = result.meta
    parts = [
        f"model {m.model} ({m.provider})",
        f"{m.metric}@{m.k} {m.variant}",
        f"{m.n_entities} entities x {m.repeats} repeat{'s' if m.repeats != 1 else ''}",
        f"grid {m.grid}",
        f"templates {m.templates}/{m.language}",
    ]
    if m.perturbation:
        parts.append(f"perturbation {m.perturbation}")
    return ", ".join(parts)


# --- terminal ----------------------------------------------------------------------------


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


_COLS = (("attribute", 18), ("gate", 4), ("SNSR", 6), ("SNSV", 6), ("PAFS", 6))
_DRIFT_COLS = (("ΔSNSR", 7), ("ΔSNSV", 7), ("ΔPAFS", 7))


def _row(cells: Sequence[str], widths: Sequence[int], rest: str) -> str:
    head = "  " + " ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))
    return _clip((head + " " + rest).rstrip(), WIDTH)


def terminal_summary(results: Sequence[AuditResult]) -> list[str]:
    """The "fairness summary" lines: one small table per test, at most 100 columns wide."""
    lines: list[str] = []
    widths = [w for _, w in _COLS + _DRIFT_COLS]
    for r in _check(results):
        lines.append(_clip(f"{r.meta.test_id}  {result_status(r)}  {describe(r)}", WIDTH))
        header = [name for name, _ in _COLS + _DRIFT_COLS]
        lines.append(_row(header, widths, "most / least favoured"))
        for a in r.attributes:
            cells = [
                _clip(a.attribute, 18),
                attribute_status(r, a.attribute),
                fmt(a.snsr.value),
                fmt(a.snsv.value),
                fmt(a.pafs.value),
                *(fmt_delta(_drift(r.gate, a.attribute, s)) for s in ("snsr", "snsv", "pafs")),
            ]
            lines.append(_row(cells, widths, favoured_text(a)))
        for a in r.attributes:
            stats = repeat_stats(a)
            if stats:
                lines.append(_clip(f"  {a.attribute}: {stats}", WIDTH))
        if r.gate is not None:
            for f in r.gate.failures:
                lines.append(_clip(f"  ✗ {f.attribute} {f.statistic}: {f.message}", WIDTH))
            for n in r.gate.notes:
                lines.append(_clip(f"  note: {n}", WIDTH))
    return lines


# --- JSON --------------------------------------------------------------------------------


def _counts(results: Sequence[AuditResult]) -> dict[str, int]:
    statuses = [result_status(r) for r in results]
    return {
        "tests": len(results),
        "passed": statuses.count("PASS"),
        "failed": statuses.count("FAIL"),
        "not_gated": statuses.count("n/a"),
    }


def _finite(obj: Any) -> Any:
    """``obj`` with NaN and infinities replaced by None (JSON has neither)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def to_json(results: Sequence[AuditResult], baselines: Baselines = None) -> str:
    """Every result in full (``AuditResult.to_dict``), plus totals and the baselines used.

    One result (and one baseline) per line: json's C encoder only runs without ``indent``,
    and with per-entity matrices an indented paper-scale report takes seconds to write.
    """
    rs = _check(results)
    base = baseline_map(baselines)

    def dump(obj: Any) -> str:
        try:
            return json.dumps(obj, sort_keys=True, ensure_ascii=False, allow_nan=False)
        except ValueError:  # a NaN/inf outside the fields to_dict already maps to null
            return json.dumps(_finite(obj), sort_keys=True, ensure_ascii=False)

    def block(items: list[str]) -> str:
        return "[\n" + ",\n".join(items) + "\n]" if items else "[]"

    head = {
        "format": "pytest-recfair report",
        "version": 1,
        "plugin_version": __version__,
        "summary": _counts(rs),
    }
    parts = [f"{dump(k)}: {dump(v)}" for k, v in head.items()]
    parts.append('"results": ' + block([dump(r.to_dict()) for r in rs]))
    if base:
        items = [f"{dump(k)}: {dump(b.to_dict())}" for k, b in sorted(base.items())]
        parts.append('"baselines": {\n' + ",\n".join(items) + "\n}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


# --- Markdown ----------------------------------------------------------------------------

_ICON = {"PASS": "✅", "FAIL": "❌", "n/a": "➖"}


def _md(text: str) -> str:
    """A table cell: no pipes, no line breaks, no HTML."""
    return (
        text.replace("\\", "\\\\")
        .replace("|", "\\|")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\r", " ")
        .replace("\n", " ")
    )


def _code(text: str) -> str:
    tick = "``" if "`" in text else "`"
    return f"{tick}{text.replace(chr(10), ' ')}{tick}"


def to_markdown(results: Sequence[AuditResult], baselines: Baselines = None) -> str:
    """A report for a GitHub job summary ($GITHUB_STEP_SUMMARY): tables with ✅/❌."""
    rs = _check(results)
    base = baseline_map(baselines)
    c = _counts(rs)
    out = [
        "## Fairness summary",
        "",
        f"{_ICON['PASS']} {c['passed']} passed · {_ICON['FAIL']} {c['failed']} failed"
        + (f" · {_ICON['n/a']} {c['not_gated']} not gated" if c["not_gated"] else "")
        + f" — pytest-recfair {__version__}",
        "",
    ]
    for r in rs:
        out += [f"### {_ICON[result_status(r)]} {_code(r.meta.test_id)}", "", _md(describe(r)), ""]
        out += [
            "| Attribute | Gate | SNSR [95% CI] | SNSV [95% CI] | PAFS [95% CI] "
            "| Drift SNSR / SNSV / PAFS | Most favoured | Least favoured |",
            "|---|:-:|---|---|---|---|---|---|",
        ]
        for a in r.attributes:
            most, least = favoured(a)
            drift = " / ".join(
                fmt_delta(_drift(r.gate, a.attribute, s)) for s in ("snsr", "snsv", "pafs")
            )
            cells = [
                _md(a.attribute),
                _ICON[attribute_status(r, a.attribute)],
                fmt_ci(a.snsr),
                fmt_ci(a.snsv),
                fmt_ci(a.pafs),
                drift,
                _md(most),
                _md(least),
            ]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
        repeats = [(a.attribute, repeat_stats(a)) for a in r.attributes]
        out += [f"- **{_md(name)}** over repeats: {_md(st)}" for name, st in repeats if st]
        if any(st for _, st in repeats):
            out.append("")
        if r.gate is not None and r.gate.failures:
            out += ["**Failures**", ""]
            out += [
                f"- **{_md(f.attribute)}** `{f.statistic}`: {_md(f.message)}"
                for f in r.gate.failures
            ]
            out += [
                "",
                f"Accept the new numbers with `{accept_command(r.meta.test_id)}`",
                "",
            ]
        if r.gate is not None and r.gate.notes:
            out += ["**Notes**", ""] + [f"- {_md(n)}" for n in r.gate.notes] + [""]
        out += _md_values(r, base.get(r.meta.test_id))
    return "\n".join(out).rstrip() + "\n"


def _md_values(r: AuditResult, baseline: AuditResult | None) -> list[str]:
    out = ["<details><summary>Per-value similarity</summary>", ""]
    for a in r.attributes:
        b = _same_attribute(baseline, a)
        out += [
            f"**{_md(a.attribute)}** ({a.metric}@{a.k})",
            "",
            "| Value | Mean similarity [95% CI] | Baseline | Entities | Missing | Refusal rate |",
            "|---|---|---|--:|--:|--:|",
        ]
        for v in a.values:
            bv = _baseline_value(b, v.value)
            out.append(
                f"| {_md(v.value)} | {fmt_ci(v.mean)} | {fmt(bv) if bv is not None else '—'} "
                f"| {v.n} | {v.missing} | {v.refusal_rate:.1%} |"
            )
        out.append("")
    out += ["</details>", ""]
    return out


def _same_attribute(baseline: AuditResult | None, a: AttributeResult) -> AttributeResult | None:
    if baseline is None:
        return None
    for b in baseline.attributes:
        if b.attribute.casefold() == a.attribute.casefold() and b.metric == a.metric:
            return b
    return None


def _baseline_value(b: AttributeResult | None, value: str) -> float | None:
    if b is None:
        return None
    for v in b.values:
        if v.value == value:
            return v.mean.value
    return None


# --- HTML and files ----------------------------------------------------------------------


def to_html(results: Sequence[AuditResult], baselines: Baselines = None) -> str:
    """ONE self-contained HTML page (inline CSS and SVG, no external resources)."""
    from pytest_recfair.report_html import render

    return render(_check(results), baseline_map(baselines))


def write_report(path: Path, results: Sequence[AuditResult], baselines: Baselines = None) -> None:
    """Write a report whose format follows the extension of ``path`` (atomic write)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        text = to_json(results, baselines)
    elif suffix == ".md":
        text = to_markdown(results, baselines)
    elif suffix == ".html":
        text = to_html(results, baselines)
    else:
        raise ConfigError(
            f"--fairness-report (ini recfair_report) must end in one of "
            f"{', '.join(REPORT_FORMATS)}; got {str(path)!r}. Pick the format by the file "
            f"name, e.g. --fairness-report=fairness.html."
        )
    atomic_write_text(path, text)
