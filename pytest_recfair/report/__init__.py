"""Fairness reports: terminal summary, JSON, Markdown and a self-contained HTML page.

Pure: takes ``AuditResult`` objects (with their gate outcome) and returns text.

- ``fmt``: numbers, intervals, p-values;
- ``status``: pass/fail status, the most/least favoured values, repeats, run metadata;
- ``failures``: the sentences of a failing gate, rendered from structured failures;
- one module per format (``terminal``, ``json_report``, ``markdown``, ``html_report``);
- ``sections``: what a kind of audit shows of its own results in each format (the
  kinds supply them; no module here names a kind); ``htmlkit``: HTML building blocks;
- ``registry``: the formats by file extension and ``write_report``.

See docs/reports.md.
"""

from __future__ import annotations

from pytest_recfair.report.failures import (
    failure_label,
    failure_message,
    failure_text,
    format_outcome,
)
from pytest_recfair.report.fmt import clip, fmt, fmt_ci, fmt_delta, fmt_interval, fmt_p
from pytest_recfair.report.html_report import to_html
from pytest_recfair.report.markdown import to_json, to_markdown
from pytest_recfair.report.registry import RENDERERS, check_report_path, render, write_report
from pytest_recfair.report.status import (
    TIE,
    Baselines,
    attribute_label,
    attribute_status,
    baseline_map,
    describe,
    favoured,
    favoured_phrase,
    favoured_text,
    flags,
    repeat_stats,
    result_status,
)
from pytest_recfair.report.terminal import WIDTH, terminal_summary, wrap_text
from pytest_recfair.vocab import REPORT_FORMATS, accept_command

__all__ = [
    "RENDERERS",
    "REPORT_FORMATS",
    "TIE",
    "WIDTH",
    "Baselines",
    "accept_command",
    "attribute_label",
    "attribute_status",
    "baseline_map",
    "check_report_path",
    "clip",
    "describe",
    "failure_label",
    "failure_message",
    "failure_text",
    "favoured",
    "favoured_phrase",
    "favoured_text",
    "flags",
    "fmt",
    "fmt_ci",
    "fmt_delta",
    "fmt_interval",
    "fmt_p",
    "format_outcome",
    "render",
    "repeat_stats",
    "result_status",
    "terminal_summary",
    "to_html",
    "to_json",
    "to_markdown",
    "wrap_text",
    "write_report",
]
