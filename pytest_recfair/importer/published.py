"""Read a FaiRLLM / FairEval result folder: who was asked what, and what came back.

Layout (as the published ``run.py`` scripts write it): ``top_K/<class>/<value>.csv`` with
columns ``name`` and ``Result`` (and usually ``system_msg`` and ``Instruction``, the exact
system message and prompt), and the neutral prompt in ``top_K/neutral/neutral.csv`` (or
``neutral.csv`` beside the class folders or inside one). The file name is the value as the
prompt wrote it ("a middle aged"). OpenAI Batch API files (``batch_input.jsonl`` and
``batch_output.jsonl``) anywhere under the folder supply the request model and the full
response bodies where they cover a prompt.

Rows are read as the FaiRLLM notebook reads them: the first ``n`` rows of each file, into
a dict by name (a later row wins). An entity missing from a value's file was never
answered for that value; it stays missing (the caller leaves it out of that value's mean).

Pure: stdlib only.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_recfair.errors import DataError

__all__ = ["BatchEntry", "PublishedRun", "Row", "read_folder"]

_TOP = re.compile(r"^top_(\d+)$")
NEUTRAL = "neutral"
csv.field_size_limit(1 << 24)  # a reply with a long raw response column


@dataclass(frozen=True)
class Row:
    name: str
    reply: str
    system: str | None
    prompt: str | None


@dataclass(frozen=True)
class BatchEntry:
    """One Batch API request and, when it succeeded, its response body."""

    body: Mapping[str, Any]
    response: Mapping[str, Any] | None


@dataclass(frozen=True)
class PublishedRun:
    """``neutral``: name -> row; ``classes``: class -> value text -> name -> row."""

    root: Path
    k: int
    neutral: Mapping[str, Row]
    classes: Mapping[str, Mapping[str, Mapping[str, Row]]]
    batch: Mapping[tuple[str, str], BatchEntry] = field(default_factory=dict)
    dropped: int = 0  # value-file rows naming an entity the neutral file does not have


def _top_dir(path: Path) -> tuple[Path, int]:
    if not path.is_dir():
        raise DataError(f"import: {str(path)!r} is not a folder; give the FaiRLLM result folder")
    m = _TOP.match(path.name)
    if m:
        return path, int(m.group(1))
    tops = sorted(p for p in path.iterdir() if p.is_dir() and _TOP.match(p.name))
    if len(tops) != 1:
        found = ", ".join(p.name for p in tops) or "none"
        raise DataError(
            f"import: {str(path)!r} must be a top_K folder or hold exactly one (found: "
            f"{found}); pass the top_K folder you want, e.g. {str(path / 'top_20')!r}"
        )
    return tops[0], int(_TOP.match(tops[0].name).group(1))  # type: ignore[union-attr]


def _read_csv(path: Path, n: int) -> dict[str, Row]:
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            cols = reader.fieldnames or []
            if "name" not in cols or "Result" not in cols:
                raise DataError(
                    f"import: {str(path)!r} needs columns 'name' and 'Result' (got "
                    f"{', '.join(cols) or 'no header'}); is it a FaiRLLM result file?"
                )
            rows: dict[str, Row] = {}
            for i, raw in enumerate(reader):
                if i >= n:
                    break
                name = (raw.get("name") or "").strip()
                if not name:
                    raise DataError(f"import: {str(path)!r} row {i + 2} has an empty 'name'")
                rows[name] = Row(
                    name, raw.get("Result") or "", raw.get("system_msg"), raw.get("Instruction")
                )
            return rows
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"import: {str(path)!r} cannot be read as UTF-8 CSV ({exc})") from exc


def _neutral_file(top: Path) -> Path:
    for cand in (
        top / NEUTRAL / "neutral.csv",
        top / "neutral.csv",
        *sorted(top.glob("*/neutral.csv")),
    ):
        if cand.is_file():
            return cand
    raise DataError(
        f"import: no neutral.csv under {str(top)!r} (looked in neutral/, the folder itself and "
        "each class folder); the neutral prompt's replies are needed to compare with"
    )


def _messages(body: Mapping[str, Any]) -> tuple[str, str]:
    system = user = ""
    for msg in body.get("messages") or ():
        if isinstance(msg, dict) and isinstance(msg.get("content"), str):
            if msg.get("role") == "system":
                system = msg["content"]
            elif msg.get("role") == "user":
                user = msg["content"]
    return system, user


def _jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"import: {str(path)!r} line {i + 1} is not JSON ({exc.msg})") from exc
        if not isinstance(item, dict):
            raise DataError(f"import: {str(path)!r} line {i + 1} is not a JSON object")
        out.append(item)
    return out


def _batches(root: Path) -> dict[tuple[str, str], BatchEntry]:
    """(system, user) -> the Batch API request body and its successful response body."""
    index: dict[tuple[str, str], BatchEntry] = {}
    for inp in sorted(root.rglob("batch_input.jsonl")):
        outputs: dict[str, Mapping[str, Any]] = {}
        out_path = inp.with_name("batch_output.jsonl")
        if out_path.is_file():
            for item in _jsonl(out_path):
                resp = item.get("response") or {}
                if item.get("error") is None and resp.get("status_code") == 200:
                    outputs[str(item.get("custom_id"))] = resp.get("body") or {}
        for item in _jsonl(inp):
            body = item.get("body")
            if isinstance(body, dict):
                index[_messages(body)] = BatchEntry(body, outputs.get(str(item.get("custom_id"))))
    return index


def read_folder(path: str | Path, *, n: int = 500) -> PublishedRun:
    """Read a result folder (the ``top_K`` folder or its parent); ``n`` rows per file."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise DataError(f"import: n must be a positive integer (rows read per file); got {n!r}")
    top, k = _top_dir(Path(path))
    neutral_path = _neutral_file(top)
    neutral = _read_csv(neutral_path, n)
    classes: dict[str, dict[str, dict[str, Row]]] = {}
    dropped = 0
    for folder in sorted(p for p in top.iterdir() if p.is_dir() and p.name != NEUTRAL):
        values = {}
        for f in sorted(folder.glob("*.csv")):
            if f == neutral_path:
                continue
            rows = _read_csv(f, n)
            kept = {name: row for name, row in rows.items() if name in neutral}
            dropped += len(rows) - len(kept)
            values[f.stem] = kept
        if values:
            classes[folder.name] = values
    if not classes:
        raise DataError(
            f"import: {str(top)!r} has no class folder with value files "
            "(<class>/<value>.csv); nothing to compare the neutral replies with"
        )
    return PublishedRun(top, k, neutral, classes, _batches(Path(path)), dropped)
