"""The drift table of two stored runs in every output format of ``python -m pytest_recfair
compare A B --format text|json|markdown|csv``, and the JSON read back.

The JSON holds every row with its numbers unrounded (NaN as null), the notes, the levels
and what A and B were, so :func:`parse_comparison` gives back the same
:class:`~pytest_recfair.compare.runs.RunDrift` (``compare CMP.json --format markdown``
renders a stored comparison again). Pure.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, get_args

from pytest_recfair.compare.runs import DriftRow, RunDrift, table_lines
from pytest_recfair.errors import DataError
from pytest_recfair.vocab import DRIFT_QUANTITIES

__all__ = [
    "COMPARE_FORMATS",
    "CompareFormat",
    "Compared",
    "comparison_dict",
    "parse_comparison",
    "render_comparison",
]

CompareFormat = Literal["text", "json", "markdown", "csv"]
COMPARE_FORMATS: Final[tuple[CompareFormat, ...]] = get_args(CompareFormat)

FORMAT: Final = "pytest-recfair comparison"
VERSION: Final = 1
_FIELDS: Final = (
    "test_id",
    "attribute",
    "metric",
    "statistic",
    "a",
    "b",
    "delta",
    "p_adjusted",
    "n_paired",
    "worse",
)
_HINT = "give a JSON file written by python -m pytest_recfair compare A B --format json"


@dataclass(frozen=True)
class Compared:
    """A comparison and what its two sides were (file paths or history entries)."""

    drift: RunDrift
    a: str
    b: str


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def comparison_dict(c: Compared) -> dict[str, Any]:
    """The comparison as JSON-ready data (``--format json``)."""
    rows = [
        {
            "test_id": r.test_id,
            "attribute": r.attribute,
            "metric": r.metric,
            "statistic": r.statistic,
            "a": _num(r.a),
            "b": _num(r.b),
            "delta": _num(r.delta),
            "p_adjusted": _num(r.p_adjusted),
            "n_paired": r.n_paired,
            "worse": r.worse,
        }
        for r in c.drift.rows
    ]
    return {
        "format": FORMAT,
        "version": VERSION,
        "a": c.a,
        "b": c.b,
        "alpha": c.drift.alpha,
        "tests": c.drift.tests,
        "worse": c.drift.worse,
        "rows": rows,
        "notes": list(c.drift.notes),
    }


def _float(x: Any) -> float:
    if x is None:
        return math.nan
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise TypeError(f"expected a number or null, got {x!r}")
    return float(x)


def _row(d: Mapping[str, Any]) -> DriftRow:
    stat = d["statistic"]
    if stat not in DRIFT_QUANTITIES:
        raise ValueError(f"statistic {stat!r} is not one of {', '.join(DRIFT_QUANTITIES)}")
    if not isinstance(d["worse"], bool) or not isinstance(d["n_paired"], int):
        raise TypeError("worse must be true/false and n_paired a whole number")
    return DriftRow(
        str(d["test_id"]),
        str(d["attribute"]),
        str(d["metric"]),
        stat,
        _float(d["a"]),
        _float(d["b"]),
        _float(d["p_adjusted"]),
        d["n_paired"],
        d["worse"],
    )


def parse_comparison(text: str, path: Path) -> Compared:
    """A comparison from its ``--format json`` text (``path`` names it in errors)."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise DataError(f"{path} is not JSON; {_HINT}.") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DataError(f'{path} is not a comparison (expected "format": "{FORMAT}"); {_HINT}.')
    if doc.get("version") != VERSION:
        raise DataError(
            f"{path} is a version {doc.get('version')!r} comparison; this pytest-recfair reads "
            f"version {VERSION}. Compare the two runs again."
        )
    try:
        rows = tuple(_row(r) for r in doc["rows"])
        drift = RunDrift(
            rows, tuple(str(n) for n in doc["notes"]), _float(doc["alpha"]), doc["tests"]
        )
        if not isinstance(drift.tests, int):
            raise TypeError("tests must be a whole number")
        return Compared(drift, str(doc["a"]), str(doc["b"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{path} is invalid ({type(exc).__name__}: {exc}); {_HINT}.") from None


def _text(c: Compared) -> str:
    return "\n".join([f"A: {c.a}", f"B: {c.b}", *table_lines(c.drift)]) + "\n"


def _json(c: Compared) -> str:
    return json.dumps(comparison_dict(c), indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def _cell(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3f}"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _markdown(c: Compared) -> str:
    d = c.drift
    verdict = "**B is significantly worse than A**" if d.worse else "B is not significantly worse"
    out = [
        "# Fairness comparison",
        "",
        f"- A: `{_md(c.a)}`",
        f"- B: `{_md(c.b)}`",
        f"- {verdict} (alpha {d.alpha:g} overall, {d.tests} tests compared)",
        "",
        "| test | attribute | metric | statistic | A | B | Δ (B-A) | p | |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in d.rows:
        p = "n/a" if math.isnan(r.p_adjusted) else f"{r.p_adjusted:.3f}"
        delta = "—" if math.isnan(r.delta) else f"{r.delta:+.3f}"
        out.append(
            f"| {_md(r.test_id)} | {_md(r.attribute)} | {r.metric} | {r.statistic} | "
            f"{_cell(r.a)} | {_cell(r.b)} | {delta} | {p} | {'WORSE' if r.worse else ''} |"
        )
    out += ["", *(f"- note: {_md(n)}" for n in d.notes)]
    return "\n".join(out).rstrip() + "\n"


def _csv(c: Compared) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(_FIELDS)
    for row in comparison_dict(c)["rows"]:
        w.writerow(["" if row[f] is None else row[f] for f in _FIELDS])
    return buf.getvalue()


_RENDERERS: Final[dict[CompareFormat, Callable[[Compared], str]]] = {
    "text": _text,
    "json": _json,
    "markdown": _markdown,
    "csv": _csv,
}


def render_comparison(c: Compared, fmt: CompareFormat = "text") -> str:
    """The comparison as ``fmt``."""
    return _RENDERERS[fmt](c)
