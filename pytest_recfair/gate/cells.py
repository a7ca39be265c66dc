"""The large arrays of a baseline file, checked without jsonschema.

jsonschema costs ~5 microseconds per array item: a paper-scale baseline (1,000 entities x
31 prompts, 24 attributes) holds ~93,000 matrix cells and ~2,000 curve points, which took
seconds through the schema. :func:`skeleton` cuts those arrays to their first item (so the
schema still checks their type), and :func:`problem` checks all of them here: types first
in one pass of C-level calls, the exact cell only when something is wrong (where the
error message points). The rules are the schema's: a similarity is a number >= 0 (not
inf, not NaN: NaN is stored as null) or null; a missing flag is true or false; a curve
point is a number or null.

Pure: numpy only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["problem", "skeleton"]

_MATRIX_KEYS = ("entities", "sims", "missing")


def skeleton(doc: Any) -> Any:
    """``doc`` with every matrix and curve cut to its first item (the rest: :func:`problem`)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("attributes"), list):
        return doc
    return {**doc, "attributes": [_cut(a) for a in doc["attributes"]]}


def _cut(attr: Any) -> Any:
    if not isinstance(attr, dict):
        return attr
    attr = dict(attr)
    if isinstance(attr.get("matrix"), dict):
        m = dict(attr["matrix"])
        for key in _MATRIX_KEYS:
            if isinstance(m.get(key), list):
                m[key] = m[key][:1]  # the type of the list; all of it: problem()
        attr["matrix"] = m
    if isinstance(attr.get("curves"), dict):
        attr["curves"] = {k: v[:1] if isinstance(v, list) else v for k, v in attr["curves"].items()}
    return attr


def is_similarity(x: object) -> bool:
    if x is None:
        return True
    if isinstance(x, bool) or not isinstance(x, int | float):
        return False
    try:
        f = float(x)
    except OverflowError:  # an int past a float's range: not a similarity
        return False
    return 0 <= f < math.inf  # NaN and inf are refused: NaN is stored as null


def is_bool(x: object) -> bool:
    return type(x) is bool


def is_number(x: object) -> bool:
    return x is None or (isinstance(x, int | float) and not isinstance(x, bool))


def problem(attr: dict[str, Any], where: str) -> tuple[str, str] | None:
    """(JSON path, what is wrong) of the first bad matrix cell or curve point of an
    attribute that passed the schema's :func:`skeleton`; None when all are good."""
    m = attr["matrix"]
    n_e, n_v = len(m["entities"]), len(m["values"])
    bad = next((c for c, e in enumerate(m["entities"]) if not isinstance(e, str)), None)
    if bad is not None:
        return f"{where}.matrix.entities[{bad}]", f"{m['entities'][bad]!r} is not a string"
    for key, fast, cell_ok, expected in (
        ("sims", _similarities_ok, is_similarity, "a number >= 0 or null"),
        ("missing", _bools_ok, is_bool, "true or false"),
    ):
        rows = m[key]
        if not isinstance(rows, list) or len(rows) != n_e:
            got = f"{len(rows)} rows" if isinstance(rows, list) else type(rows).__name__
            return f"{where}.matrix.{key}", f"{got} for {n_e} entities"
        for r, row in enumerate(rows):
            if not isinstance(row, list) or len(row) != n_v:
                got = f"{len(row)} cells" if isinstance(row, list) else type(row).__name__
                return f"{where}.matrix.{key}[{r}]", f"{got} for {n_v} values"
        bad_cell = None if fast(rows) else _first_bad(rows, cell_ok)
        if bad_cell is not None:
            r, c = bad_cell
            return f"{where}.matrix.{key}[{r}][{c}]", f"{rows[r][c]!r} is not {expected}"
    for value, curve in (attr.get("curves") or {}).items():
        bad = next((i for i, x in enumerate(curve) if not is_number(x)), None)
        if bad is not None:
            return f"{where}.curves.{value}[{bad}]", f"{curve[bad]!r} is not a number or null"
    return None


def _similarities_ok(rows: Sequence[list[Any]]) -> bool:
    """Every cell a similarity: only int, float and None, and as floats (None as NaN)
    every one finite and >= 0 with exactly as many NaN as None (a NaN float is refused)."""
    if not rows or not rows[0]:
        return True
    if not {type(x) for x in itertools.chain.from_iterable(rows)} <= {int, float, type(None)}:
        return False
    try:
        cells = np.array(rows, dtype=np.float64)  # None -> NaN
    except (OverflowError, ValueError):  # an int past a float's range: the slow check
        return False
    nan = np.isnan(cells)
    nones = sum(row.count(None) for row in rows)
    with np.errstate(invalid="ignore"):
        in_range = bool(np.all((cells >= 0) & (cells < np.inf) | nan))
    return in_range and int(nan.sum()) == nones


def _bools_ok(rows: Sequence[list[Any]]) -> bool:
    return {type(x) for x in itertools.chain.from_iterable(rows)} <= {bool}


def _first_bad(
    rows: Sequence[list[Any]], cell_ok: Callable[[object], bool]
) -> tuple[int, int] | None:
    """The first bad cell (None: the fast check was stricter than the rule)."""
    for r, row in enumerate(rows):
        for c, x in enumerate(row):
            if not cell_ok(x):
                return r, c
    return None
