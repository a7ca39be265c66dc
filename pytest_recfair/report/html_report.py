"""The HTML fairness report: one self-contained page (inline CSS and SVG, nothing loaded
from anywhere), every text from results escaped. Labels are never cut: cells wrap, chart
labels take two lines and the charts widen to hold them."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from pytest_recfair.compare.models import ModelComparison
from pytest_recfair.report.failures import evidence_html, gate_table
from pytest_recfair.report.fmt import (
    Status,
    Table,
    esc,
    fmt,
    fmt_ci,
    fmt_delta,
    nice_step,
    svg_open,
)
from pytest_recfair.report.history import HistoryRun, history_html
from pytest_recfair.report.sections import kind_tables, measure
from pytest_recfair.report.status import (
    Baselines,
    baseline_map,
    counts,
    describe,
    failed_text,
    failures_first,
    headline,
    result_status,
    same_attribute,
    stats_table,
    value_table,
)
from pytest_recfair.report.terminal import models_table
from pytest_recfair.results import AttributeResult, AuditResult
from pytest_recfair.vocab import PLUGIN_VERSION

_CSS = """
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --bg:#ffffff; --panel:#f6f8fa;
  --pass:#1a7f37; --fail:#cf222e; --na:#6e7781; --accent:#0969da; --base:#bc4c00; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.5 -apple-system, "Segoe UI", "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1120px; margin: 0 auto; padding: 24px 32px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 0; word-break: break-all; }
h3 { font-size: 15px; margin: 20px 0 6px; }
.sub { color: var(--muted); margin: 0 0 16px; }
.totals { display: flex; gap: 12px; margin: 12px 0 24px; }
.total { border: 1px solid var(--line); border-radius: 8px; padding: 8px 16px; min-width: 110px;
  background: var(--panel); }
.total b { display: block; font-size: 22px; }
section.test { border: 1px solid var(--line); border-radius: 10px; padding: 16px 20px;
  margin: 0 0 24px; }
section.test > header { display: flex; align-items: center; gap: 12px; }
.badge { display: inline-block; white-space: nowrap; border-radius: 12px; padding: 1px 10px;
  font-weight: 600; font-size: 12px; color: #fff; letter-spacing: .03em; }
.badge.PASS { background: var(--pass); } .badge.FAIL { background: var(--fail); }
.badge.na { background: var(--na); } .badge.FLAG { background: var(--base); }
table { border-collapse: collapse; margin: 8px 0; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px; text-align: left;
  vertical-align: top; }
th { background: var(--panel); font-weight: 600; }
td.num { text-align: right; }
.ci { white-space: nowrap; display: inline-block; }
table.meta td:first-child { color: var(--muted); }
ul.notes { margin: 8px 0; padding-left: 20px; color: var(--muted); }
.grid2 { display: grid; grid-template-columns: minmax(0, 1fr); gap: 8px; }
figure { margin: 8px 0 16px; }
figcaption { color: var(--muted); font-size: 12px; }
svg text { font-family: inherit; }
svg.chart { max-width: 100%; height: auto; }
.scroll { overflow-x: auto; max-width: 100%; }
footer { color: var(--muted); font-size: 12px; margin-top: 32px; }
nav.toc { margin: 0 0 24px; } nav.toc h2 { margin: 0 0 4px; }
table.summary td { overflow-wrap: anywhere; }
details.detail > summary { cursor: pointer; color: var(--accent); margin: 8px 0; }
@media (max-width: 900px) { main { padding: 12px 10px 32px; }
  section.test { padding: 10px 8px; } th, td { padding: 4px 6px; } }
section.evidence { margin: 12px 0; }
section.evidence details.row { border: 1px solid var(--line); border-radius: 6px;
  padding: 4px 10px; margin: 4px 0; }
section.evidence summary { cursor: pointer; }
table.lists { table-layout: fixed; width: 100%; }
table.lists td, table.lists th { overflow-wrap: anywhere; }
table.lists li.kept { color: var(--muted); } table.lists li.added { color: var(--fail); }
table.lists li.dropped { color: var(--accent); text-decoration: line-through; }
table.lists ol, table.lists ul { margin: 0; padding-left: 20px; }
pre.reply { white-space: pre-wrap; max-height: 320px; overflow: auto; background: var(--panel);
  padding: 6px; font-size: 12px; }
"""

_W = 760  # chart width in px
_LABEL_W = 170
_ROW_H = 26
_CI = re.compile(r" \[(.*)", re.S)  # a number cell wraps before its interval, never inside


def table_html(t: Table) -> str:
    """A table in HTML: its title as a heading, its lead below, a scrollable table (columns
    after ``labels`` right-aligned numbers, but ``text`` ones), its notes."""

    def cells(row: Sequence[str], tag: str) -> str:
        return "".join(
            '<td class="num">' + _CI.sub(r' <span class="ci">[\1</span>', esc(c), 1) + "</td>"
            if tag == "td" and i >= t.labels and i not in t.text
            else f"<{tag}>{esc(c)}</{tag}>"
            for i, c in enumerate(row)
        )

    lead = f'<p class="sub">{esc(t.lead)}</p>' if t.lead else ""
    body = "".join(f"<tr>{cells(r, 'td')}</tr>" for r in t.rows)
    grid = f'<div class="scroll"><table><tr>{cells(t.head, "th")}</tr>{body}</table></div>'
    grid = grid if t.rows else ""
    notes = "".join(f"<li>{esc(n)}</li>" for n in t.notes)
    notes = f'<ul class="notes">{notes}</ul>' if notes else ""
    return f"<h3>{esc(t.title)}</h3>" * bool(t.title) + f"{lead}{grid}{notes}"


def _dot_chart(a: AttributeResult, base: AttributeResult | None, chart_id: str) -> str:
    """Per-value mean similarity with CI whiskers (and baseline markers)."""
    base_mean = {v.value: v.mean.value for v in base.values} if base else {}
    pts = [v.mean.value for v in a.values] + [base_mean.get(v.value, math.nan) for v in a.values]
    pts += [x for v in a.values if v.mean.ci is not None for x in (v.mean.ci.low, v.mean.ci.high)]
    finite = [p for p in pts if math.isfinite(p)]
    lo, hi = min(finite, default=0.0), max(finite, default=1.0)
    if hi - lo < 0.02:  # the axis padded to round numbers, at least 0.02 wide
        lo, hi = (hi + lo) / 2 - 0.01, (hi + lo) / 2 + 0.01
    step = nice_step((hi - lo) / 5)
    floor = math.floor(lo / step) * step
    lo, hi = (max(0.0, floor) if lo >= 0 else floor), math.ceil(hi / step) * step
    top, bottom = 10, 40
    height = top + bottom + _ROW_H * len(a.values)
    x0 = max(_LABEL_W, _text_w(max((v.value for v in a.values), key=len, default=""), 12) + 20)
    x1 = x0 + _W - 20 - _LABEL_W  # a wider label column widens the chart
    width = x1 + 20

    def x(val: float) -> float:
        return x0 + (val - lo) / (hi - lo) * (x1 - x0)

    title = f"{a.attribute}: mean similarity to the neutral lists per value"
    out = [svg_open(chart_id, "dots", width, height, title)]
    n_ticks = round((hi - lo) / step)
    for i in range(n_ticks + 1):
        t = lo + i * step
        tx = x(t)
        out.append(
            f'<line x1="{tx:.1f}" y1="{top}" x2="{tx:.1f}" y2="{height - bottom + 4}" '
            f'stroke="#eaeef2"/>'
            f'<text x="{tx:.1f}" y="{height - bottom + 18}" font-size="11" fill="#59636e" '
            f'text-anchor="middle">{f"{t:.4f}".rstrip("0").rstrip(".") or "0"}</text>'
        )
    out.append(
        f'<text x="{(x0 + x1) / 2:.1f}" y="{height - 6}" font-size="11" fill="#59636e" '
        f'text-anchor="middle">mean {esc(a.metric)}@{a.k} similarity to the neutral list '
        f"(higher = less changed by the attribute)</text>"
    )
    if math.isfinite(centre := _centre(a)):
        mx = x(centre)
        out.append(
            f'<line x1="{mx:.1f}" y1="{top}" x2="{mx:.1f}" y2="{height - bottom}" '
            f'stroke="#8c959f" stroke-dasharray="4 3"><title>attribute mean</title></line>'
        )
    most, least = a.favoured()
    for i, v in enumerate(a.values):
        cy = top + _ROW_H * i + _ROW_H / 2
        colour = "#0969da" if v.value == most else "#cf222e" if v.value == least else "#1f2328"
        out.append(
            f'<text x="{x0 - 10}" y="{cy + 4:.1f}" font-size="12" text-anchor="end" '
            f'fill="{colour}">{esc(v.value)}</text>'
        )
        if v.mean.ci is not None and math.isfinite(v.mean.ci.low) and math.isfinite(v.mean.ci.high):
            xl, xh = x(v.mean.ci.low), x(v.mean.ci.high)
            out.append(
                f'<g class="whisker" stroke="#57606a" stroke-width="1.5">'
                f'<line x1="{xl:.1f}" y1="{cy:.1f}" x2="{xh:.1f}" y2="{cy:.1f}"/>'
                f'<line x1="{xl:.1f}" y1="{cy - 5:.1f}" x2="{xl:.1f}" y2="{cy + 5:.1f}"/>'
                f'<line x1="{xh:.1f}" y1="{cy - 5:.1f}" x2="{xh:.1f}" y2="{cy + 5:.1f}"/></g>'
            )
        if v.value in base_mean and math.isfinite(base_mean[v.value]):
            bx = x(base_mean[v.value])
            out.append(
                f'<path class="baseline-marker" d="M{bx:.1f} {cy - 7:.1f} L{bx + 7:.1f} {cy:.1f} '
                f'L{bx:.1f} {cy + 7:.1f} L{bx - 7:.1f} {cy:.1f} Z" fill="none" '
                f'stroke="#bc4c00" stroke-width="2"><title>baseline {fmt(base_mean[v.value])}'
                f"</title></path>"
            )
        if math.isfinite(v.mean.value):
            out.append(
                f'<circle class="mean" cx="{x(v.mean.value):.1f}" cy="{cy:.1f}" r="5.5" '
                f'fill="{colour}"><title>{esc(v.value)}: {esc(fmt_ci(v.mean))}, n = {v.n}'
                f"</title></circle>"
            )
    out.append("</svg>")
    return "".join(out)


def _centre(a: AttributeResult) -> float:
    """The attribute mean: the mean of its values' finite means (NaN when none is)."""
    finite = [v.mean.value for v in a.values if math.isfinite(v.mean.value)]
    return sum(finite) / len(finite) if finite else math.nan


def _text_w(text: str, size: int) -> float:
    """A generous width of ``text`` at ``size`` px (sans-serif averages ~0.55 em)."""
    return len(text) * size * 0.62


def _two_lines(text: str) -> list[str]:
    """``text`` in one line, or split at the space that makes its longer line shortest."""
    words = text.split(" ")
    if len(words) < 2:
        return [text]
    cuts = [[" ".join(words[:i]), " ".join(words[i:])] for i in range(1, len(words))]
    return min(cuts, key=lambda c: max(len(c[0]), len(c[1])))


def _diverging(d: float, scale: float) -> tuple[str, str]:
    """Fill and text colour for a deviation d (blue above, red below the attribute mean)."""
    t = max(-1.0, min(1.0, d / scale)) if scale > 0 else 0.0
    end = (9, 105, 218) if t >= 0 else (207, 34, 46)
    w = abs(t)
    rgb = tuple(round(255 + (c - 255) * w) for c in end)
    return (f"rgb({rgb[0]},{rgb[1]},{rgb[2]})", "#ffffff" if w > 0.55 else "#1f2328")


def _heatmap(r: AuditResult, chart_id: str) -> str:
    """Attribute x value: each cell is one value, coloured by its deviation from the mean."""
    rows = [(a, _centre(a)) for a in r.attributes if a.values]
    devs = [abs(v.mean.value - c) for a, c in rows for v in a.values if math.isfinite(v.mean.value)]
    scale = max([0.05, *devs])
    n_cols = max((len(a.values) for a, _ in rows), default=1)
    lines = {v.value: _two_lines(v.value) for a, _ in rows for v in a.values}
    longest = max((t for ls in lines.values() for t in ls), key=len, default="")
    # every value's label whole, on at most two lines: the cells widen to hold the longest
    cell_w = max(70.0, min(130.0, (_W - _LABEL_W - 20) / n_cols), _text_w(longest, 11) + 10)
    label_w = max(
        _LABEL_W, _text_w(max((a.attribute for a, _ in rows), key=len, default=""), 12) + 20
    )
    cell_h = 52 if any(len(ls) > 1 for ls in lines.values()) else 40
    legend = f"+{scale:.2f} from the attribute mean (blue: favoured, red: disfavoured)"
    width = round(max(label_w + cell_w * n_cols + 20, label_w + 204 + _text_w(legend, 11)))
    height = cell_h * len(rows) + 44
    title = "attribute x value: deviation of each value's mean similarity from its attribute mean"
    out = [svg_open(chart_id, "heatmap", width, height, title)]
    for i, (a, centre) in enumerate(rows):
        y = i * cell_h
        out.append(
            f'<text x="{label_w - 10}" y="{y + cell_h / 2 + 4:.1f}" font-size="12" '
            f'text-anchor="end" font-weight="600">{esc(a.attribute)}</text>'
        )
        for j, v in enumerate(a.values):
            cx = label_w + j * cell_w
            ok = math.isfinite(v.mean.value) and math.isfinite(centre)
            dev = v.mean.value - centre if ok else 0.0
            fill, ink = _diverging(dev, scale) if ok else ("#eaeef2", "#59636e")
            mid = cx + cell_w / 2
            label = "".join(
                f'<tspan x="{mid:.1f}" dy="{0 if k == 0 else 13}">{esc(t)}</tspan>'
                for k, t in enumerate(lines[v.value])
            )
            out.append(
                f'<g class="cell"><rect x="{cx + 1:.1f}" y="{y + 1}" width="{cell_w - 2:.1f}" '
                f'height="{cell_h - 2}" rx="4" fill="{fill}"/>'
                f'<text x="{mid:.1f}" y="{y + 16}" font-size="11" fill="{ink}" '
                f'text-anchor="middle">{label}</text>'
                f'<text x="{mid:.1f}" y="{y + cell_h - 9}" font-size="11" fill="{ink}" '
                f'text-anchor="middle" font-weight="600">{fmt(v.mean.value)}</text>'
                f"<title>{esc(a.attribute)} = {esc(v.value)}: mean {esc(fmt_ci(v.mean))}; "
                f"{fmt_delta(dev) if ok else 'n/a'} from the attribute mean</title></g>"
            )
    # legend
    ly = cell_h * len(rows) + 14
    for k in range(11):
        d = (k - 5) / 5 * scale
        fill, _ = _diverging(d, scale)
        out.append(f'<rect x="{label_w + k * 18}" y="{ly}" width="18" height="10" fill="{fill}"/>')
    out.append(
        f'<text x="{label_w - 10}" y="{ly + 9}" font-size="11" text-anchor="end" '
        f'fill="#59636e">−{scale:.2f}</text>'
        f'<text x="{label_w + 11 * 18 + 6}" y="{ly + 9}" font-size="11" fill="#59636e">'
        f"{legend}</text>"
    )
    out.append("</svg>")
    return "".join(out)


def _shared(
    m: object, sep: str, *named: tuple[str, str], cut: int | None = None
) -> tuple[str, str]:
    """("domain / language", "movie / en") from the fields this kind's meta has."""
    have = [(words, str(getattr(m, name))[:cut]) for words, name in named if hasattr(m, name)]
    return sep.join(w for w, _ in have), sep.join(v for _, v in have)


def _meta_table(r: AuditResult) -> str:
    m = r.meta
    named = ("seeds", "seeds_hash"), ("grid", "grid_hash"), ("templates", "templates_hash")
    hashes, digests = _shared(m, " / ", *named, cut=12)
    rows: list[tuple[str, str]] = [
        ("provider / model", f"{m.provider} / {m.model}"),
        ("measure", measure(r)),
        _shared(m, " × ", ("entities", "n_entities"), ("repeats", "repeats")),
        _shared(m, " / ", ("domain", "domain"), ("language", "language")),
        _shared(m, " / ", ("grid", "grid"), ("templates", "templates")),
        ("perturbation", getattr(m, "perturbation", None) or "none")
        if hasattr(m, "perturbation")
        else ("", ""),
        ("seed / record mode", f"{m.seed} / {m.record_mode}"),
        ("tokens (prompt + completion)", f"{r.prompt_tokens} + {r.completion_tokens}"),
        ("cost", "n/a" if r.cost is None else f"${r.cost:.4f}"),
        ("fuzzy title merges", str(r.merges) if r.attributes else ""),
        ("failed prompts (left out)", failed_text(r) or "none"),
        (f"hashes ({hashes})", digests),
        ("plugin version", m.plugin_version),
    ]
    body = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in rows if v)
    return f'<table class="meta">{body}</table>'


def _summary(results: Sequence[AuditResult], history: bool) -> str:
    """The summary, which is also the page's table of contents: one row per test."""
    rows = (
        f'<tr><td>{esc(Status(result_status(r)))}</td><td><a href="#test-{n}">'
        f"{esc(r.meta.test_id)}</a></td><td>{esc(measure(r))}</td><td>{esc(headline(r))}</td></tr>"
        for n, r in enumerate(results)
    )
    more = '<p><a href="#history">The history</a></p>' if history else ""
    return (
        '<nav class="toc" id="summary"><h2>Summary</h2><div class="scroll"><table '
        'class="summary"><tr><th>status</th><th>test</th><th>kind</th><th>what it found'
        f"</th></tr>{''.join(rows)}</table></div>{more}</nav>"
    )


def to_html(
    results: Sequence[AuditResult],
    baselines: Baselines = None,
    *,
    models: Sequence[ModelComparison] = (),
    history: Sequence[HistoryRun] = (),
) -> str:
    """The page; with a ``history`` (``load_history``), its charts over the stored runs."""

    results = failures_first(results)
    base_of = baseline_map(baselines)
    c = counts(results)
    totals = (
        f'<div class="totals"><div class="total"><b>{c["tests"]}</b>audited tests</div>'
        f'<div class="total" style="color:var(--pass)"><b>{c["passed"]}</b>passed</div>'
        f'<div class="total" style="color:var(--fail)"><b>{c["failed"]}</b>failed</div>'
        "</div>"
    )
    # several models audited by one test, side by side, before the per-test sections
    compared = "".join(table_html(models_table(c)) for c in models)
    head = '<section class="test models" id="models"><header><h2>Models side by side</h2>'
    sections = [f"{head}</header>{compared}</section>"] if models else []
    for n, r in enumerate(results):
        base = base_of.get(r.meta.test_id)
        charts = []
        for i, a in enumerate(r.attributes):
            b = same_attribute(base, a)
            legend = (
                "dot: mean over entities, whisker: 95% bootstrap CI, dashed: attribute mean"
                + (", hollow diamond: baseline mean" if b is not None else "")
            )
            charts.append(
                f'<h3>{esc(a.attribute)} <small class="sub">({esc(a.metric)}@{a.k}, '
                f"{esc(a.variant)}, missing={esc(a.missing_policy)})</small></h3>"
                f"<figure>{_dot_chart(a, b, f'dots-{n}-{i}')}"
                f"<figcaption>{esc(legend)}</figcaption></figure>" + table_html(value_table(a, b))
            )
        status = result_status(r)
        # the failure card; the gate's notes in it for a failed test, else in its details
        notes = table_html(Table("", notes=r.gate.notes if r.gate is not None else ()))
        card = '<p class="sub">Not gated.</p>' if r.gate is None else ""
        card = card if (failed := gate_table(r)) is None else table_html(failed) + notes
        overlap = (
            f"{table_html(stats_table(r))}<h3>Attribute × value</h3>"
            f"<figure>{_heatmap(r, f'heatmap-{n}')}</figure>"
            if r.attributes
            else ""
        )
        # the detail of a test: open for a failure, one click away otherwise
        sections.append(
            f'<section class="test" id="test-{n}"><header>{esc(Status(status))}'
            f"<h2>{esc(r.meta.test_id)}</h2></header>"
            f'<p class="sub">{esc(describe(r))}</p>{card}'
            f'<details class="detail"{" open" if status == "FAIL" else ""}><summary>Details'
            f"</summary>{'' if failed else notes}{evidence_html(r)}{overlap}"
            f"{''.join(map(table_html, kind_tables(r)))}"
            f'<div class="grid2">{"".join(charts)}</div>'
            f"<h3>Run metadata</h3>{_meta_table(r)}</details></section>"
        )
    if not results:
        sections.append('<p class="sub">No fairness-marked test ran.</p>')
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>pytest-recfair fairness report</title>"
        f"<style>{_CSS}</style></head><body><main>"
        "<h1>Fairness report</h1>"
        '<p class="sub">How much the recommendations change when the prompt names a '
        "demographic attribute: SNSR (range) and SNSV (spread) of the per-value similarity to "
        "the neutral lists, lower is fairer; PAFS, higher is fairer.</p>"
        f"{totals}{_summary(results, bool(history))}{''.join(sections)}"
        f"{history_html(results, history)}"
        f"<footer>pytest-recfair {esc(PLUGIN_VERSION)}</footer>"
        "</main></body></html>\n"
    )
