"""Each test's headline numbers over the stored history (``--fairness-history=DIR``) as
inline SVG line charts.

One chart per test × headline number of the page (``report.sections.series``: SNSR per
list-overlap attribute and metric, a kind's own — position bias, largest item shift,
biased-question rate): x is the run (oldest first, as the history numbers them), labelled
by its date and, below, its short commit (a run stored before commits were recorded shows
its date only), and its number "#N" when another run has the same date and commit; y the
number with its 95% interval as a whisker and, for SNSR, a dashed line at the method's
descriptive flag (SNSR 0.10). A run that did not measure it, or where it is undefined, has
no point (the line joins its neighbours). No script: the page stays self-contained. Pure.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from pytest_recfair.report.fmt import esc, fmt_ci
from pytest_recfair.report.history import HistoryRun
from pytest_recfair.report.sections import series
from pytest_recfair.report.status import FLAG_SNSR
from pytest_recfair.results import AuditResult, Stat

_W, _H = 760, 210
# the right margin holds half of the last run's label (a date is ~60 px wide at 11 px)
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 40, 12, 60
_MAX_X_LABELS = 8  # a date is ~60 px wide at 11 px


def _series(
    history: Sequence[HistoryRun], test_id: str, label: str
) -> list[tuple[int, HistoryRun, Stat]]:
    """(position in the history, run, value) of every run where it is defined."""
    key = (test_id, label)
    return [
        (i, run, run.values[key])
        for i, run in enumerate(history)
        if key in run.values and math.isfinite(run.values[key].value)
    ]


def _top(points: Sequence[tuple[int, HistoryRun, Stat]], flag: float) -> tuple[float, float]:
    """The y axis top (a round number above every point, whisker and the flag) and step."""
    hi = max(flag, 1e-3)
    for _, _, s in points:
        hi = max(hi, s.value, s.ci.high if s.ci and math.isfinite(s.ci.high) else 0.0)
    raw = hi * 1.1 / 4
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return step * 4, step


def _axes(n: int, step: float, history: Sequence[HistoryRun], what: str) -> list[str]:
    x0, x1, y0, y1 = _LEFT, _W - _RIGHT, _H - _BOTTOM, _TOP
    same = Counter((run.day, run.commit) for run in history)
    out = []
    for i in range(5):
        y = y0 - (y0 - y1) * i / 4
        out.append(
            f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#eaeef2"/>'
            f'<text x="{x0 - 6}" y="{y + 4:.1f}" font-size="11" fill="#59636e" '
            f'text-anchor="end">{step * i:.4g}</text>'
        )
    every = max(1, math.ceil(n / _MAX_X_LABELS))
    for i, run in enumerate(history):
        # every `every`-th run and the last, never one too close to the last to fit
        if (i % every == 0 and n - 1 - i >= every) or i == n - 1:
            lines = [run.commit[:7] if run.commit else None]
            lines.append(f"#{run.number}" if same[run.day, run.commit] > 1 else None)
            more = "".join(
                f'<tspan x="{_x(i, n):.1f}" dy="12">{esc(t)}</tspan>' for t in lines if t
            )
            out.append(
                f'<text class="xlabel" x="{_x(i, n):.1f}" y="{y0 + 14}" font-size="11" '
                f'fill="#59636e" text-anchor="middle">{esc(run.day)}{more}</text>'
            )
    out.append(
        f'<text x="{(x0 + x1) / 2:.1f}" y="{_H - 4}" font-size="11" fill="#59636e" '
        f'text-anchor="middle">stored run by date and commit (oldest first); {esc(what)}</text>'
    )
    return out


def _commit(run: HistoryRun) -> str:
    parts = [x for x in (run.commit[:12] if run.commit else None, run.branch) if x]
    return f", {' on '.join(parts)}" if parts else ""


def _x(i: int, n: int) -> float:
    x0, x1 = _LEFT, _W - _RIGHT
    return (x0 + x1) / 2 if n == 1 else x0 + (x1 - x0) * i / (n - 1)


def _chart(history: Sequence[HistoryRun], test_id: str, label: str, cid: str) -> str:
    points = _series(history, test_id, label)
    n = len(history)
    snsr = " · SNSR (" in label
    top, step = _top(points, FLAG_SNSR if snsr else 0.0)
    what = label.rsplit(" · ", 1)[-1]

    def y(v: float) -> float:
        return _H - _BOTTOM - (_H - _BOTTOM - _TOP) * min(max(v, 0.0), top) / top

    out = [
        f'<svg id="{esc(cid)}" class="chart history" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}"><title>{esc(label)} over {n} stored runs</title>',
        *_axes(n, step, history, f"{what}, lower is fairer"),
    ]
    if snsr:
        out.append(
            f'<line class="flag" x1="{_LEFT}" y1="{y(FLAG_SNSR):.1f}" x2="{_W - _RIGHT}" '
            f'y2="{y(FLAG_SNSR):.1f}" stroke="#bc4c00" stroke-dasharray="5 4">'
            f"<title>descriptive flag: SNSR {FLAG_SNSR:g}</title></line>"
        )
    for i, _, s in points:
        if s.ci is not None and math.isfinite(s.ci.low) and math.isfinite(s.ci.high):
            out.append(
                f'<line class="whisker" x1="{_x(i, n):.1f}" y1="{y(s.ci.low):.1f}" '
                f'x2="{_x(i, n):.1f}" y2="{y(s.ci.high):.1f}" stroke="#8c959f" '
                f'stroke-width="1.5"/>'
            )
    coords = " ".join(f"{_x(i, n):.1f},{y(s.value):.1f}" for i, _, s in points)
    out.append(
        f'<polyline class="snsr" points="{coords}" fill="none" stroke="#0969da" stroke-width="2"/>'
    )
    out += [
        f'<circle class="run" cx="{_x(i, n):.1f}" cy="{y(s.value):.1f}" r="4" fill="#0969da">'
        f"<title>#{run.number} ({esc(run.when)}{esc(_commit(run))}): {esc(what)} {esc(fmt_ci(s))}"
        "</title></circle>"
        for i, run, s in points
    ]
    return "".join([*out, "</svg>"])


def history_html(results: Sequence[AuditResult], history: Sequence[HistoryRun]) -> str:
    """The page's history section: one chart per test × headline number; "" without
    history."""
    if not history:
        return ""
    parts = [
        '<section class="test history" id="history"><header><h2>The history'
        f'</h2></header><p class="sub">{len(history)} stored runs (--fairness-history), '
        f"#{history[0].number} ({esc(history[0].when)}) to #{history[-1].number} "
        f"({esc(history[-1].when)}); whisker: 95% interval, dashed: the descriptive "
        f"flag SNSR {FLAG_SNSR:g}.</p>"
    ]
    for n, r in enumerate(results):
        for i, (label, _) in enumerate(series(r)):
            shown = len(_series(history, r.meta.test_id, label))
            parts.append(
                f'<h3>{esc(r.meta.test_id)} · {esc(label)} <small class="sub">'
                f"({shown} of {len(history)} runs)</small></h3>"
                f"<figure>{_chart(history, r.meta.test_id, label, f'history-{n}-{i}')}</figure>"
            )
    return "".join([*parts, "</section>"])
