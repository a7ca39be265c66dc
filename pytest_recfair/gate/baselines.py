"""Fairness baselines, one JSON file per test: an accepted run's ``AuditResult`` without its
gate outcome, plus ``schema_version`` and each attribute's ``standard_error``. Floats in
shortest round-trip repr: a round trip cannot change a gate decision. jsonschema costs ~5 us
per array item, so it sees a :func:`skeleton`; :func:`problem` checks matrices in C passes."""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
import re
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np

from pytest_recfair import fileio
from pytest_recfair.cassettes import cache
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.fileio import atomic_write_text
from pytest_recfair.gate import thresholds
from pytest_recfair.results import AuditMeta, AuditResult
from pytest_recfair.vocab import accept_command

SCHEMA_VERSION = 2
_MAX_STEM = 120  # keeps paths well under Windows' 260-character limit
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


# An ordinary node id (a .py path, "::"-separated Python names, an optional parameter id)
# names its file unambiguously; anything else also gets a hash of the id.
_PLAIN_ID = re.compile(r"[A-Za-z0-9._/-]+\.py(::[A-Za-z0-9_]+)+(\[[A-Za-z0-9._-]*\])?")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_]+(\[[A-Za-z0-9._-]*\])?")


def stable_name(test_id: str, override: str | None = None) -> str:
    """The name a test's baseline is keyed by: ``override`` (the marker's ``baseline=``)
    or the test's name with its parameter id, never its file, so moving it costs nothing."""
    if override is not None:
        return override
    return test_id.replace("\\", "/").rsplit("::", 1)[-1]


def named_path(root: Path, name: str) -> Path:
    """``<root>/<name>.json``, made safe for every file system; a name that is not plain gets
    8 hex digits of its SHA-256, so two names never share a file."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"a baseline name must be a non-empty string; got {name!r}.")
    safe = _SAFE.sub("_", name.replace("[", "-").replace("]", "")).lstrip(".-")
    if _PLAIN_NAME.fullmatch(name) is None or not safe or len(safe) > _MAX_STEM:
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
        safe = f"{safe[:_MAX_STEM] or '_'}-{digest}"
    return Path(root) / f"{safe}.json"


def baseline_path(root: Path, test_id: str) -> Path:
    """Where earlier versions kept the baseline of node id ``test_id`` (read, then moved)."""
    if not isinstance(test_id, str) or not test_id.strip():
        raise ConfigError(
            f"test_id must be a non-empty pytest node id such as "
            f"'tests/test_x.py::test_y'; got {test_id!r}."
        )
    norm = test_id.replace("\\", "/")
    stem = norm.replace("::", "__").replace("/", "__").replace("[", "-").replace("]", "")
    safe = _SAFE.sub("_", stem)
    plain = _PLAIN_ID.fullmatch(norm) is not None and "__" not in norm and "//" not in norm
    if not safe or safe.startswith((".", "-")):  # no hidden files, ".." or option-like
        safe = "_" + safe.lstrip(".-")
        plain = False
    if len(safe) > _MAX_STEM:
        safe = safe[:_MAX_STEM]
        plain = False
    if not plain:  # the digest of the normalised id: "a\\b" and "a/b" are one test
        digest = hashlib.sha256(norm.encode("utf-8")).hexdigest()[:8]
        safe = f"{safe}-{digest}"
    return Path(root) / f"{safe}.json"


def to_dict(result: AuditResult) -> dict[str, Any]:
    """The JSON document of a baseline (gate outcome dropped, refusal rates added)."""
    if not isinstance(result, AuditResult):
        raise TypeError(f"result must be an AuditResult; got {type(result).__name__}.")
    doc = result.to_dict()
    doc.pop("gate", None)
    doc.pop("evidence", None)  # the run's replies, not part of what is compared
    doc["schema_version"] = SCHEMA_VERSION
    for attr, a in zip(doc.get("attributes", ()), result.attributes, strict=True):
        for vd, v in zip(attr["values"], a.values, strict=True):
            vd["refusal_rate"] = v.refusal_rate
        # the baseline's own noise, for people reading the file: the gate's floor is this
        # times baseline_floor (recomputed from the matrix when gating, bit for bit equal)
        attr["standard_error"] = {
            k: (se if math.isfinite(se) else None)
            for k, se in thresholds.standard_errors(a).items()
        }
    return doc


_SCALARS = frozenset({type(None), str, int, float, bool})


def _lines(obj: Any, indent: int) -> Iterator[str]:
    """JSON text, one item per line, except lists of scalars which stay on one line."""
    if isinstance(obj, dict) and obj:
        keyed = [(json.dumps(str(k), ensure_ascii=False) + ": ", v) for k, v in sorted(obj.items())]
        items, ends = keyed, "{}"
    elif isinstance(obj, list | tuple) and not all(type(x) in _SCALARS for x in obj):
        items, ends = [("", v) for v in obj], "[]"
    else:
        yield json.dumps(obj, ensure_ascii=False, allow_nan=False)
        return
    yield ends[0]
    for i, (head, value) in enumerate(items):
        sub = list(_lines(value, indent + 1))
        sub[-1] += "," if i < len(items) - 1 else ""
        yield "  " * (indent + 1) + head + sub[0]
        yield from sub[1:]
    yield "  " * indent + ends[1]


def dumps(result: AuditResult) -> str:
    """The baseline file text of ``result``."""
    doc = to_dict(result)
    try:
        return "\n".join(_lines(doc, 0)) + "\n"
    except ValueError as exc:  # inf slipped into a statistic: JSON cannot hold it
        raise DataError(
            f"cannot write the baseline of {result.meta.test_id}: {exc}. A statistic is "
            f"infinite, which points at a bug in scoring; please report it."
        ) from exc


def write(path: Path, result: AuditResult) -> None:
    """Write ``result`` as the baseline at ``path`` (atomic: readers never see half a file)."""
    text = dumps(result)
    # Refuse to write what load() would refuse to read.
    _validate(json.loads(text), Path(path), result.meta.test_id)
    atomic_write_text(path, text)


@functools.cache
def validator() -> jsonschema.Draft202012Validator:
    """The validator of ``pytest_recfair/schemas/baseline.schema.json``."""
    file = resources.files("pytest_recfair").joinpath("schemas", "baseline.schema.json")
    schema = json.loads(file.read_text(encoding="utf-8"))
    # each lone "$ref" replaced by its definition: jsonschema resolving a reference cost
    # as much as the check it leads to (same errors, half the time)
    defs = schema["$defs"]

    def inline(x: Any) -> Any:
        if isinstance(x, list):
            return [inline(v) for v in x]
        if not isinstance(x, dict):
            return x
        if list(x) == ["$ref"] and x["$ref"].startswith("#/$defs/"):
            return inline(defs[x["$ref"].removeprefix("#/$defs/")])
        return {k: inline(v) for k, v in x.items()}

    return jsonschema.Draft202012Validator(inline(schema))


def _broken(path: Path, where: str, problem: str, test_id: str | None) -> DataError:
    return DataError(
        f"baseline file {path} is invalid at {where}: {problem}. Re-create it from a run you "
        f"trust with: {accept_command(test_id)}"
    )


def _validate(doc: Any, path: Path, test_id: str | None) -> None:
    if isinstance(doc, dict):
        version = doc.get("schema_version")
        if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
            raise DataError(
                f"baseline file {path} has schema_version {version}, newer than this "
                f"pytest-recfair understands ({SCHEMA_VERSION}). Upgrade pytest-recfair, or "
                f"re-create the baseline with: {accept_command(test_id)}"
            )
    if (found := first_problem(doc)) is not None:
        raise _broken(path, *found, test_id)


def first_problem(doc: Any) -> tuple[str, str] | None:
    """(JSON path, what is wrong) of the first problem of a baseline-shaped ``doc``, or None."""
    shape = skeleton(doc)
    if isinstance(shape, dict) and shape.get("schema_version") in range(1, SCHEMA_VERSION):
        # an older file is read: its shape, not its number, picks the schema's branch
        shape = {**shape, "schema_version": SCHEMA_VERSION}
    errors = list(validator().iter_errors(shape))
    if errors:
        # The deepest error first: it names the offending field rather than its parent.
        err = max(errors, key=lambda e: len(e.absolute_path))
        err = jsonschema.exceptions.best_match([err])
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        return "$" + at, err.message + more
    for i, attr in enumerate(doc.get("attributes", ())):
        where = f"$.attributes[{i}]"
        if (found := problem(attr, where)) is not None:
            return found
        names, matrix = [v["value"] for v in attr["values"]], attr["matrix"]["values"]
        if sorted(names) != sorted(matrix):
            what = f"matrix values {matrix} do not match the attribute values {names}"
            return f"{where}.matrix.values", what
    return None


def loads(text: str, path: Path | str = "<baseline>") -> AuditResult:
    """Parse and validate baseline text; ``path`` is only used in error messages."""
    p = Path(path)
    if not text or text.isspace():  # (strip() would copy megabytes)
        raise DataError(
            f"baseline file {p} is empty (an interrupted write or a bad merge?). Re-create it "
            f"with: {accept_command(None)}"
        )
    # A baseline that passed before with this code (kept in the content store, open on
    # a replay) is not checked again: the checks cost more than the reading. Keyed before
    # parsing: the text's bytes are gone before its tree exists (10,000 entities: 27 MB).
    key = None
    if cache.folder() is not None:
        key = hashlib.blake2b(cache.code_version())
        key.update(text.encode("utf-8", "surrogatepass"))
    try:
        doc = fileio.loads(text, exact=True)  # a seed may be any integer
    except json.JSONDecodeError as exc:
        raise DataError(
            f"baseline file {p} is not valid JSON (truncated or hand-edited?): {exc.msg} at "
            f"line {exc.lineno} column {exc.colno}. Re-create it with: {accept_command(None)}"
        ) from exc
    meta = doc.get("meta") if isinstance(doc, dict) else None
    tid = meta.get("test_id") if isinstance(meta, dict) else None
    test_id = tid if isinstance(tid, str) else None
    if key is None:
        _validate(doc, p, test_id)
    elif cache.get(b"valid", key.digest()) is not True:
        _validate(doc, p, test_id)
        cache.put(b"valid", key.digest(), True)
    try:
        return AuditResult.from_dict(doc)
    except (KeyError, TypeError, ValueError) as exc:  # schema passed but the shape is off
        raise _broken(p, "$", f"{type(exc).__name__}: {exc}", test_id) from exc


def load(path: Path) -> AuditResult:
    """Read and validate the baseline at ``path`` (a DataError names the problem's JSON path)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(
            f"no fairness baseline at {p}. Create it by running the test once with "
            f"{accept_command(None)}, check the numbers, and commit the file."
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(
            f"cannot read baseline file {p}: {exc}. Check its permissions and encoding "
            f"(UTF-8 JSON), or re-create it with {accept_command(None)}"
        ) from exc
    return loads(text, p)


def _show(value: object) -> str:
    if isinstance(value, str) and len(value) > 16 and re.fullmatch(r"[0-9a-f]+", value):
        return value[:12] + "…"
    return repr(value)


# The seed entity set: a run on a subset of the baseline's entities is still comparable.
_SAMPLE_FIELDS = frozenset({"seeds_hash", "n_entities"})


def incompatibility(
    baseline: AuditMeta, current: AuditMeta, *, subsample: bool = False
) -> str | None:
    """Why ``baseline`` cannot be compared with ``current`` (numbers from other settings
    measure something else), or None. A changed model or provider is NOT one: catching it
    is the gate's point. With ``subsample`` (a subset of the baseline's entities) the seed
    set may differ: the drift test pairs the shared entities."""
    for name, meta in (("baseline", baseline), ("current", current)):
        if not isinstance(meta, AuditMeta):
            raise TypeError(f"{name} must be an AuditMeta; got {type(meta).__name__}.")
    if baseline.kind != current.kind:
        diffs = [f"kind of audit (baseline {baseline.kind!r}, this run {current.kind!r})"]
    else:  # the settings of the kind's meta that name what is measured (results.py)
        diffs = [
            f"{label} ({field}: baseline {_show(getattr(baseline, field))}, "
            f"this run {_show(getattr(current, field))})"
            for field, label in current.compared().items()
            if getattr(baseline, field) != getattr(current, field)
            and not (subsample and field in _SAMPLE_FIELDS)
        ]
    if not diffs:
        return None
    return (
        f"the baseline was recorded with a different {'; '.join(diffs)}. Run with the "
        f"settings the baseline was made with, or, if the change is intended, record a new "
        f"baseline with: {accept_command(current.test_id)}"
    )


def result_incompatibility(baseline: AuditResult, current: AuditResult) -> str | None:
    """:func:`incompatibility` of two results; a subset of the baseline's entities compares."""
    now, base = entity_ids(current), entity_ids(baseline)
    within = bool(now) and now <= base
    return incompatibility(baseline.meta, current.meta, subsample=within)


def entity_ids(result: AuditResult) -> frozenset[str]:
    """The entities a list-overlap result scored (empty for other kinds of audit)."""
    return frozenset(e for a in result.attributes for e in a.matrix.entities)


def skeleton(doc: Any) -> Any:
    """``doc`` with every matrix and curve cut to its first item (the rest: :func:`problem`)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("attributes"), list):
        return doc
    cut = []
    for attr in doc["attributes"]:
        if isinstance(attr, dict):  # each list's first item shows its type; all of it: problem()
            for key, keys in (("matrix", ("entities", "sims", "missing")), ("curves", None)):
                if isinstance(part := attr.get(key), dict):
                    cuts = [
                        k for k, v in part.items() if isinstance(v, list) and k in (keys or part)
                    ]
                    attr = {**attr, key: {**part, **{k: part[k][:1] for k in cuts}}}
        cut.append(attr)
    return {**doc, "attributes": cut}


def _similarity(x: object) -> bool:
    if x is None:
        return True
    if isinstance(x, bool) or not isinstance(x, int | float):
        return False
    try:
        f = float(x)
    except OverflowError:  # an int past a float's range: not a similarity
        return False
    return 0 <= f < math.inf  # NaN and inf are refused: NaN is stored as null


def problem(attr: dict[str, Any], where: str) -> tuple[str, str] | None:
    """(JSON path, what is wrong) of the first bad matrix cell or curve point, or None."""
    m = attr["matrix"]
    n_e, n_v = len(m["entities"]), len(m["values"])
    # each check in C-level calls first; the bad item is looked for only when one fails
    if not set(map(type, m["entities"])) <= {str}:
        at = next(c for c, e in enumerate(m["entities"]) if not isinstance(e, str))
        return f"{where}.matrix.entities[{at}]", f"{m['entities'][at]!r} is not a string"
    for key, fast_ok, cell_ok, expected in (
        ("sims", _similarities_ok, _similarity, "a number >= 0 or null"),
        (
            "missing",
            lambda rows: _types(rows) <= {bool},
            lambda x: type(x) is bool,
            "true or false",
        ),
    ):
        rows = m[key]
        if not isinstance(rows, list) or len(rows) != n_e:
            got = f"{len(rows)} rows" if isinstance(rows, list) else type(rows).__name__
            return f"{where}.matrix.{key}", f"{got} for {n_e} entities"
        shaped = set(map(type, rows)) <= {list} and set(map(len, rows)) <= {n_v}
        for r, row in enumerate(() if shaped else rows):
            if not isinstance(row, list) or len(row) != n_v:
                got = f"{len(row)} cells" if isinstance(row, list) else type(row).__name__
                return f"{where}.matrix.{key}[{r}]", f"{got} for {n_v} values"
        if fast_ok(rows):
            continue
        cells = ((r, c) for r, row in enumerate(rows) for c, x in enumerate(row) if not cell_ok(x))
        bad_cell = next(cells, None)  # None: the fast check was stricter than the rule
        if bad_cell is not None:
            r, c = bad_cell
            return f"{where}.matrix.{key}[{r}][{c}]", f"{rows[r][c]!r} is not {expected}"
    for value, curve in (attr.get("curves") or {}).items():
        number = (x is None or type(x) in (int, float) for x in curve)
        bad = next((i for i, ok in enumerate(number) if not ok), None)
        if bad is not None:
            return f"{where}.curves.{value}[{bad}]", f"{curve[bad]!r} is not a number or null"
    return None


def _types(rows: Sequence[list[Any]]) -> set[type]:
    return set(map(type, itertools.chain.from_iterable(rows)))


def _similarities_ok(rows: Sequence[list[Any]]) -> bool:
    """Every cell a similarity: only int, float and None, and as floats (None as NaN)
    every one finite and >= 0 with exactly as many NaN as None (a NaN float is refused)."""
    if not rows or not rows[0]:
        return True
    if not _types(rows) <= {int, float, type(None)}:
        return False
    try:
        cells = np.array(rows, dtype=np.float64)  # None -> NaN
    except (OverflowError, ValueError):  # an int past a float's range: the slow check
        return False
    nan = np.isnan(cells)
    nones = sum(map(list.count, rows, itertools.repeat(None)))
    with np.errstate(invalid="ignore"):
        in_range = bool(np.all((cells >= 0) & (cells < np.inf) | nan))
    return in_range and int(nan.sum()) == nones
