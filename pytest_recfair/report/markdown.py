"""The Markdown report, for a GitHub job summary ($GITHUB_STEP_SUMMARY)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pytest_recfair.compare.models import ModelComparison
from pytest_recfair.report.failures import (
    accept_offered,
    evidence_markdown,
    failure_tag,
    failure_text,
    limits_advice,
)
from pytest_recfair.report.fmt import fmt, fmt_ci, fmt_delta
from pytest_recfair.report.sections import extra_lines
from pytest_recfair.report.status import (
    Baselines,
    attribute_label,
    baseline_map,
    baseline_value,
    counts,
    describe,
    drift_of,
    failed_text,
    failures_first,
    favoured,
    repeat_stats,
    result_status,
    same_attribute,
    shown,
    usage_text,
)
from pytest_recfair.results import PLUGIN_VERSION, AuditResult
from pytest_recfair.vocab import STATISTICS, accept_command

__all__ = ["to_markdown"]

_ICON = {"PASS": "✅", "FAIL": "❌", "FLAG": "⚠️ flagged", "n/a": "➖"}


def _md(text: str) -> str:
    """A table cell or list text: no pipes, no line breaks, no raw HTML or entities.

    Backslash escapes, not HTML entities: GitHub renders ``\\<`` as ``<`` and leaves ``->``
    alone, while ``&gt;`` shows up literally wherever Markdown is read as text."""
    out = (
        text.replace("\\", "\\\\")
        .replace("|", "\\|")
        .replace("<", "\\<")
        .replace("&", "\\&")
        .replace("\r", " ")
        .replace("\n", " ")
    )
    return "\\" + out if out.startswith(">") else out  # not a block quote


def _code(text: str) -> str:
    tick = "``" if "`" in text else "`"
    return f"{tick}{text.replace(chr(10), ' ')}{tick}"


def _stats_table(r: AuditResult) -> list[str]:
    out = [
        "| Attribute | Gate | SNSR [95% CI] | SNSV [95% CI] | PAFS [95% CI] "
        "| Drift SNSR / SNSV / PAFS | Most favoured | Least favoured |",
        "|---|:-:|---|---|---|---|---|---|",
    ]
    for a in r.attributes:
        most, least = favoured(a)
        drift = " / ".join(fmt_delta(drift_of(r.gate, a.attribute, s)) for s in STATISTICS)
        cells = [
            _md(a.attribute),
            _ICON[attribute_label(r, a)],
            *(fmt_ci(shown(a, s)) for s in STATISTICS),
            drift,
            _md(most),
            _md(least),
        ]
        out.append("| " + " | ".join(cells) + " |")
    return [*out, ""]


def _gate(r: AuditResult) -> list[str]:
    out: list[str] = []
    if r.gate is not None and r.gate.failures:
        out += ["**Failures**", ""]
        out += [
            f"- **{_md(f.attribute or '(all)')}** `{failure_tag(f)}`: {_md(failure_text(f, r))}"
            for f in r.gate.failures
        ]
        advice = limits_advice(r.gate)
        out += ["", advice] if advice is not None else []
        if accept_offered(r.gate):
            out += ["", f"Accept the new numbers with `{accept_command(r.meta.test_id)}`"]
        out += [""]
    if r.gate is not None and r.gate.notes:
        out += ["**Notes**", ""] + [f"- {_md(n)}" for n in r.gate.notes] + [""]
    return out


def _values(r: AuditResult, baseline: AuditResult | None) -> list[str]:
    if not r.attributes:  # item-side and candidate-position audits have no value table
        return []
    out = ["<details><summary>Per-value similarity</summary>", ""]
    for a in r.attributes:
        b = same_attribute(baseline, a)
        out += [
            f"**{_md(a.attribute)}** ({a.metric}@{a.k})",
            "",
            "| Value | Mean similarity [95% CI] | Baseline | Entities | Missing | Refusal rate |",
            "|---|---|---|--:|--:|--:|",
        ]
        for v in a.values:
            bv = baseline_value(b, v.value)
            out.append(
                f"| {_md(v.value)} | {fmt_ci(v.mean)} | {fmt(bv) if bv is not None else '—'} "
                f"| {v.n} | {v.missing} | {v.refusal_rate:.1%} |"
            )
        out.append("")
    return [*out, "</details>", ""]


def _body(r: AuditResult) -> list[str]:
    """One test's section below its heading: run line, tables, failures, notes."""
    out = [_md(describe(r)), ""]
    out += [f"**Failed prompts:** {_md(failed_text(r))}", ""] if r.failed else []
    out += _stats_table(r) if r.attributes else []
    extra = extra_lines(r)
    out += [f"- {_md(line.strip())}" for line in extra] + ([""] if extra else [])
    repeats = [(a.attribute, repeat_stats(a)) for a in r.attributes]
    out += [f"- **{_md(name)}** over repeats: {_md(st)}" for name, st in repeats if st]
    if any(st for _, st in repeats):
        out.append("")
    out += _gate(r)
    out += evidence_markdown(r, _md)
    usage = usage_text(r)
    return out + ([f"- {_md(usage)}", ""] if usage else [])


def _summary(r: AuditResult) -> str:
    """The one line a folded test shows: status, test id, largest SNSR, flags.

    Inside HTML, so the id is escaped the HTML way (``<`` and ``&`` only: ``->`` stays)."""
    line = f"{_ICON[result_status(r)]} <code>{_html(r.meta.test_id)}</code>"
    if r.attributes:
        top = max(r.attributes, key=lambda a: shown(a, "snsr").value)
        flagged = sum(attribute_label(r, a) == "FLAG" for a in r.attributes)
        line += (f" — {_count(len(r.attributes), 'attribute')}, largest SNSR "
                 f"{fmt(shown(top, 'snsr').value)} ({_html(top.attribute)})")  # fmt: skip
        line += f", {flagged} flagged" if flagged else ""
    return line


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;")


def to_markdown(
    results: Sequence[AuditResult],
    baselines: Baselines = None,
    *,
    models: Sequence[ModelComparison] = (),
) -> str:
    """A report for a GitHub job summary ($GITHUB_STEP_SUMMARY): tables with ✅/❌."""
    rs = failures_first(results)
    base = baseline_map(baselines)
    c = counts(rs)
    out = [
        "## Fairness summary",
        "",
        f"{_ICON['PASS']} {c['passed']} passed · {_ICON['FAIL']} {c['failed']} failed"
        + (f" · {_ICON['n/a']} {c['not_gated']} not gated" if c["not_gated"] else "")
        + f" — pytest-recfair {PLUGIN_VERSION}",
        "",
    ]
    if models:  # several models audited by one test: side by side (report/sidebyside.py)
        from pytest_recfair.report.terminal import markdown_lines

        out += markdown_lines(models)
    for r in rs:
        if result_status(r) == "FAIL":
            out += [f"### {_ICON['FAIL']} {_code(r.meta.test_id)}", "", *_body(r)]
            out += _values(r, base.get(r.meta.test_id))
        else:  # folded to one line: a job summary is read for what failed
            out += [f"<details><summary>{_summary(r)}</summary>", "", *_body(r), "</details>", ""]
    if len(rs) > c["failed"]:
        out += ["Passing tests are folded; per-value tables of every test are in the HTML "
                "and JSON reports."]  # fmt: skip
    return short_paths("\n".join(out).rstrip() + "\n")


#: an absolute POSIX path in running text (not the path part of a URL)
_ABS_PATH = re.compile(r"(?<![\w.:/~-])/[^\s`'\"()<>\[\]|*]+")


def short_paths(text: str, base: Path | None = None) -> str:
    """Absolute paths made readable where the report is read (a job summary, a PR): under
    ``base`` (the current directory, pytest's rootdir when run from it) relative to it,
    in the temporary directory its file name only; any other path stays as written."""
    root = (base or Path.cwd()).resolve()
    temp = Path(tempfile.gettempdir()).resolve()

    def short(m: re.Match[str]) -> str:
        raw = m.group(0)
        word = raw.rstrip(".,;:")
        path = Path(word)
        for where, name in ((root, None), (temp, path.name)):
            try:
                rel = path.resolve().relative_to(where)
            except (ValueError, OSError):
                continue
            return (name or str(rel) or ".") + raw[len(word) :]
        return raw

    return _ABS_PATH.sub(short, text)
