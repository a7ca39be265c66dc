"""The Markdown report (a GitHub job summary, $GITHUB_STEP_SUMMARY) and the JSON report
(every result in full, plus totals and the baselines used)."""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_recfair.compare.models import ModelComparison
from pytest_recfair.report.failures import evidence_tables, failure_text, gate_table
from pytest_recfair.report.fmt import Status, Table
from pytest_recfair.report.sections import kind_tables
from pytest_recfair.report.status import (
    Baselines,
    baseline_map,
    check_results,
    counts,
    describe,
    failed_text,
    failures_first,
    headline,
    result_status,
    same_attribute,
    stats_table,
    usage_text,
    value_table,
)
from pytest_recfair.report.terminal import models_table, pair_text
from pytest_recfair.results import AuditResult
from pytest_recfair.vocab import PLUGIN_VERSION

_ICON = {"PASS": "✅", "FAIL": "❌", "FLAG": "⚠️ flagged", "n/a": "➖"}


# backslash escapes for pipes, line breaks, HTML (``&gt;`` shows literally in text)
_MD = str.maketrans({"\\": "\\\\", "|": "\\|", "<": "\\<", "&": "\\&", "\r": " ", "\n": " "})


def _md(text: str) -> str:
    out = text.translate(_MD)
    return "\\" + out if out.startswith(">") else out  # not a block quote


def _cells(row: Sequence[str]) -> str:
    return "| " + " | ".join(_ICON[c] if isinstance(c, Status) else _md(c) for c in row) + " |"


def table_markdown(t: Table) -> list[str]:
    """A table in Markdown: its title in bold with its lead, the table, its notes as bullets."""
    out = [f"**{_md(t.title)}**" + (f": {_md(t.lead)}" if t.lead else ""), ""] * bool(t.title)
    if t.rows:
        align = ["---" if i < t.labels or i in t.text else "--:" for i in range(len(t.head))]
        out += [_cells(t.head), "|" + "|".join(align) + "|", *map(_cells, t.rows), ""]
    return out + [f"- {_md(n)}" for n in t.notes] + ([""] if t.notes else [])


def _values(r: AuditResult, baseline: AuditResult | None) -> list[str]:
    if not r.attributes:  # item-side and candidate-position audits have no value table
        return []
    out = ["<details><summary>Per-value similarity</summary>", ""]
    for a in r.attributes:
        out += [f"**{_md(a.attribute)}** ({a.metric}@{a.k})", ""]
        out += table_markdown(value_table(a, same_attribute(baseline, a)))
    return [*out, "</details>", ""]


def _body(r: AuditResult) -> list[str]:
    """One test's section below its heading: run line, tables, failures, notes."""
    out = [_md(describe(r)), ""]
    out += [f"**Failed prompts:** {_md(failed_text(r))}", ""] if r.failed else []
    notes = r.gate.notes if r.gate is not None else ()
    tables = [stats_table(r)] * bool(r.attributes) + kind_tables(r) + [gate_table(r)]
    tables += [Table("Notes", notes=notes)] * bool(notes) + evidence_tables(r)
    out += [line for t in tables if t is not None for line in table_markdown(t)]
    usage = usage_text(r)
    return out + ([f"- {_md(usage)}", ""] if usage else [])


def _summary(r: AuditResult) -> str:
    """A folded test's line: status, test id (in HTML: ``<`` and ``&`` escaped), its figure."""
    found = f" — {_html(h)}" if (h := headline(r)) else ""
    return f"{_ICON[result_status(r)]} <code>{_html(r.meta.test_id)}</code>{found}"


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
    out += ["### Models side by side", ""] if models else []  # audited by one test
    out += [line for c in models for line in table_markdown(models_table(c))]
    for r in rs:
        if result_status(r) == "FAIL":
            tick = "``" if "`" in r.meta.test_id else "`"
            code = f"{tick}{r.meta.test_id.replace(chr(10), ' ')}{tick}"
            out += [f"### {_ICON['FAIL']} {code}", "", *_body(r)]
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
    """Absolute paths under ``base`` made relative, in the temporary directory just the
    file name; others stay as written."""
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


def finite(obj: Any) -> Any:
    """``obj`` with NaN and infinities replaced by None (JSON has neither)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    return obj


def _dump(obj: Any) -> str:
    try:
        return json.dumps(obj, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except ValueError:  # a NaN/inf outside the fields to_dict already maps to null
        return json.dumps(finite(obj), sort_keys=True, ensure_ascii=False)


def to_json(
    results: Sequence[AuditResult],
    baselines: Baselines = None,
    *,
    models: Sequence[ModelComparison] = (),
) -> str:
    """Every result in full, totals, baselines: one per line, as json's C encoder only runs
    without ``indent`` (an indented paper-scale report takes seconds)."""

    rs = check_results(results)
    base = baseline_map(baselines)

    def block(items: list[str]) -> str:
        return "[\n" + ",\n".join(items) + "\n]" if items else "[]"

    head = {
        "format": "pytest-recfair report",
        "version": 1,
        "plugin_version": PLUGIN_VERSION,
        "summary": counts(rs),
    }
    parts = [f"{_dump(k)}: {_dump(v)}" for k, v in head.items()]
    docs, compared = [], []  # each failure and pair with its rendered sentence as "message"
    for r in rs:
        docs.append(d := r.to_dict())
        if r.gate is not None:
            for f, fd in zip(r.gate.failures, d["gate"]["failures"], strict=True):
                fd["message"] = failure_text(f, r)
    for c in models:  # several models audited by one test, side by side
        compared.append(d := c.to_dict())
        for p, pd in zip(c.pairs, d["pairs"], strict=True):
            pd["message"] = pair_text(p)
    parts.append('"results": ' + block([_dump(d) for d in docs]))
    if base:
        items = [f"{_dump(k)}: {_dump(b.to_dict())}" for k, b in sorted(base.items())]
        parts.append('"baselines": {\n' + ",\n".join(items) + "\n}")
    if models:
        parts.append('"models": ' + block([_dump(m) for m in compared]))
    return "{\n" + ",\n".join(parts) + "\n}\n"
