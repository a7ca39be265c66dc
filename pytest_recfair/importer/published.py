"""Read a FaiRLLM / FairEval result folder: ``top_K/<class>/<value>.csv`` (``name``,
``Result``, often ``system_msg``, ``Instruction``) and a ``neutral.csv``, read as the
FaiRLLM notebook reads them (the first ``n`` rows into a dict by name: a later row wins);
Batch API files anywhere under it give the model and full response bodies."""

from __future__ import annotations

import codecs
import csv
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_recfair import secrets
from pytest_recfair.errors import DataError
from pytest_recfair.fileio import atomic_write_text, check_shape, load_structured

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
    rows: int = 500  # rows read per file
    sources: Mapping[str, Path] = field(default_factory=dict)  # "neutral" / "cls/value" -> csv
    asked: Mapping[Path, tuple[tuple[str, str], ...]] = field(default_factory=dict)


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


def read_csv(
    path: Path, need: Sequence[str], hint: str, notes: list[str] | None = None
) -> list[tuple[int, dict[str, str]]]:
    """(first line, row) per record of ``path``, as Python's csv reads it (the authors'
    pandas reads the same), every cell scrubbed of secrets: the one way both importers
    read their input, so no cell reaches a file or a line unscrubbed. Blank lines are no
    rows (pandas skips them). With ``notes`` the file is decoded as the BiasLens table
    script reads it (UTF-8, ``errors="ignore"``) and the bytes dropped are said there."""
    try:
        data = path.read_bytes().removeprefix(codecs.BOM_UTF8)
        text = data.decode("utf-8", errors="strict" if notes is None else "ignore")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(
            f"import: {str(path)!r} cannot be read as UTF-8 CSV ({exc}); save it as UTF-8"
        ) from None
    dropped = len(data) - len(text.encode("utf-8"))
    if dropped and notes is not None:
        notes.append(
            f"{path.name}: {dropped} bytes that are not UTF-8 dropped (read as the paper's "
            'script reads it, errors="ignore")'
        )
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[tuple[int, dict[str, str]]] = []
    line = 1
    try:
        cols = [c.strip() for c in next(reader, None) or []]
        missing = [c for c in need if c not in cols]
        if missing:
            raise DataError(
                f"import: {str(path)!r} needs column(s) {', '.join(map(repr, missing))} "
                f"(its header: {', '.join(cols) or 'none'}); {hint}"
            )
        line = reader.line_num + 1
        for record in reader:
            if record and len(record) != len(cols):
                raise DataError(
                    f"import: {str(path)!r}: the row starting at line {line} has "
                    f"{len(record)} fields where the header has {len(cols)} ({', '.join(cols)}); "
                    "an unbalanced quote? fix that row (or remove it) and import again"
                )
            if record:
                cells = zip(cols, map(secrets.scrub, record), strict=True)
                rows.append((line, dict(cells)))
            line = reader.line_num + 1
    except csv.Error as exc:
        raise DataError(
            f"import: {str(path)!r}: the row starting at line {line} cannot be read as CSV "
            f"({exc}); fix that row (or remove it) and import again"
        ) from None
    return rows


def write_files(folder: Path, files: Mapping[str, str]) -> None:
    """Write an importer's project files, scrubbed: with ``read_csv`` the one way in and out."""
    for name, text in files.items():
        atomic_write_text(folder / name, secrets.scrub(text))


def _read_csv(path: Path, n: int | None) -> tuple[dict[str, Row], int]:
    """The first ``n`` rows (all when None) by name, and the number of rows in the file."""
    records = read_csv(path, ("name", "Result"), "is it a FaiRLLM result file?")
    rows: dict[str, Row] = {}
    for line, raw in records[:n]:
        name = raw["name"].strip()
        if not name:
            raise DataError(f"import: {str(path)!r} line {line} has an empty 'name'")
        rows[name] = Row(name, raw["Result"], raw.get("system_msg"), raw.get("Instruction"))
    return rows, len(records)


def _neutral_file(top: Path) -> Path:
    where = (top / NEUTRAL / "neutral.csv", top / "neutral.csv", *sorted(top.glob("*/neutral.csv")))
    if (found := next((p for p in where if p.is_file()), None)) is not None:
        return found
    raise DataError(
        f"import: no neutral.csv under {str(top)!r} (looked in neutral/, the folder itself and "
        "each class folder); the neutral prompt's replies are needed to compare with"
    )


def messages(body: Mapping[str, Any]) -> tuple[str, str]:
    """(system, user) text of a chat request body ("" when it has none)."""
    system = user = ""
    for msg in body.get("messages") or ():
        if isinstance(msg, dict) and isinstance(msg.get("content"), str):
            if msg.get("role") == "system":
                system = msg["content"]
            elif msg.get("role") == "user":
                user = msg["content"]
    return system, user


def _jsonl(path: Path) -> list[dict[str, Any]]:
    """A Batch API file's objects, scrubbed, each line's shape checked."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(
            f"import: {str(path)!r} cannot be read as UTF-8 JSON lines ({exc}); "
            "give the Batch API file as downloaded"
        ) from None
    out = []
    for i, line in enumerate(text.splitlines()):
        if line.strip():
            where = f"import: {str(path)!r} line {i + 1}"
            item = load_structured(line, where, ".json")
            expected = "expected a Batch API request or result object; is it a Batch API file?"
            check_shape(item, "batch", where, expected)
            out.append(secrets.scrub_json(item))
    return out


def _batches(
    root: Path,
) -> tuple[dict[tuple[str, str], BatchEntry], dict[Path, tuple[tuple[str, str], ...]]]:
    """(system, user) -> request body and successful response body; folder -> its prompts."""
    index: dict[tuple[str, str], BatchEntry] = {}
    folders: dict[Path, tuple[tuple[str, str], ...]] = {}
    for inp in sorted(root.rglob("batch_input.jsonl")):
        out = inp.with_name("batch_output.jsonl")
        outputs = {  # custom_id -> response body of every successful request
            str(item.get("custom_id")): (item.get("response") or {}).get("body") or {}
            for item in (_jsonl(out) if out.is_file() else [])
            if item.get("error") is None and (item.get("response") or {}).get("status_code") == 200
        }
        asked = []
        for item in _jsonl(inp):
            body = item.get("body") or {}
            if body:
                key = messages(body)
                index[key] = BatchEntry(body, outputs.get(str(item.get("custom_id"))))
                asked.append(key)
        folders[inp.parent] = tuple(asked)
    return index, folders


def read_folder(path: str | Path, *, n: int | None = None) -> PublishedRun:
    """Read a result folder (``top_K`` or its parent), ``n`` rows per file; None: every row
    (the published tables used whole files: 500 rows for OpenAI, 1,000 Gemini/movie)."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise DataError(f"import: n must be a positive integer (rows read per file); got {n!r}")
    top, k = _top_dir(Path(path))
    neutral_path = _neutral_file(top)
    neutral, count = _read_csv(neutral_path, n)
    if not neutral:
        raise DataError(
            f"import: {str(neutral_path)!r} holds only its header; the neutral prompt's "
            "replies are needed to compare with"
        )
    classes: dict[str, dict[str, dict[str, Row]]] = {}
    sources: dict[str, Path] = {NEUTRAL: neutral_path}
    dropped = 0
    for folder in sorted(p for p in top.iterdir() if p.is_dir() and p.name != NEUTRAL):
        values = {}
        for f in sorted(folder.glob("*.csv")):
            if f == neutral_path:
                continue
            rows, _ = _read_csv(f, n)
            kept = {name: row for name, row in rows.items() if name in neutral}
            dropped += len(rows) - len(kept)
            values[f.stem] = kept
            sources[f"{folder.name}/{f.stem}"] = f
        if values:
            classes[folder.name] = values
    if not classes:
        raise DataError(
            f"import: {str(top)!r} has no class folder with value files "
            "(<class>/<value>.csv); nothing to compare the neutral replies with"
        )
    batch, asked = _batches(Path(path))
    read = count if n is None else n
    return PublishedRun(top, k, neutral, classes, batch, dropped, read, sources, asked)


def escape(text: str) -> str:
    """Braces doubled, so a literal ``{`` in a published prompt survives ``str.format``."""
    return text.replace("{", "{{").replace("}", "}}")


def template_of(prompt: str, name: str, value: str | None) -> str | None:
    """The template ``prompt`` was filled from, or None when it lacks the name or value."""
    if name not in prompt:
        return None
    text = escape(prompt)
    if value is not None:
        at = text.find(escape(value))
        if at < 0:
            return None
        text = text[:at] + "{value}" + text[at + len(escape(value)) :]
    return text.replace(escape(name), "{entity}")


def fill(template: str, name: str, value: str | None) -> str:
    """The prompt ``template`` gives for ``name`` and ``value`` (what the audit will ask)."""
    text = template.replace("{entity}", "\0E").replace("{value}", "\0V")
    text = text.replace("{{", "{").replace("}}", "}")
    return text.replace("\0E", name).replace("\0V", value or "")


def _find(
    rows: Mapping[str, Row],
    value: str | None,
    pool: Sequence[tuple[str, str]],
    avoid: Sequence[str],
) -> dict[str, tuple[str, str]] | None:
    """name -> (system, prompt) from one template that covers every row, or None."""
    by_prompt = {user: (system, user) for system, user in pool}
    first = next(iter(rows.values()))
    for _, user in pool:
        if first.name not in user or (value is not None and value not in user):
            continue
        if value is None and any(v in user for v in avoid):
            continue  # a conditioned prompt, not the neutral one
        template = template_of(user, first.name, value)
        if template is None:
            continue
        found = {r.name: by_prompt.get(fill(template, r.name, value)) for r in rows.values()}
        if all(found.values()):
            return {name: hit for name, hit in found.items() if hit is not None}
    return None


def recover_prompts(run: PublishedRun) -> tuple[PublishedRun, list[str]]:
    """``run`` with prompts taken from the batch files where the CSVs hold replies: a
    batch prompt (of the file's folder, else the run's) that, as a template filled for
    EVERY row of the file, gives prompts the batch file holds."""
    if all(r.prompt is None for r in run.neutral.values()):
        return _without_prompts(run), [
            "prompts: neutral.csv has no 'Instruction' column (the prompt asked); the "
            "bundled template set is used for every class"
        ]
    files: dict[str, tuple[Mapping[str, Row], str | None]] = {NEUTRAL: (run.neutral, None)}
    for cls, values in run.classes.items():
        files |= {f"{cls}/{value}": (rows, value) for value, rows in values.items()}
    values_text = [v for vals in run.classes.values() for v in vals]
    fixed: dict[str, dict[str, Row]] = {}
    unfound: list[str] = []
    for key, (rows, value) in files.items():
        # most rows' prompts are not prompts for their entity (or are the reply itself)
        bad = sum(
            not r.prompt or r.name not in r.prompt or r.prompt == r.reply for r in rows.values()
        )
        if 2 * bad <= len(rows):
            continue
        # the prompts asked in the file's folder, else anywhere in the run
        pool = run.asked.get(run.sources[key].parent) or [p for a in run.asked.values() for p in a]
        hits = _find(rows, value, pool, values_text) if run.asked else None
        if hits is None:
            unfound.append(key)
            continue
        fixed[key] = {
            name: replace(row, system=hits[name][0], prompt=hits[name][1])
            for name, row in rows.items()
        }
    notes = []
    if fixed:
        notes.append(
            f"prompts: the CSV 'Instruction' column holds replies in {len(fixed)} file(s); "
            "the prompts were taken from batch_input.jsonl"
        )
    if NEUTRAL in unfound:  # no prompt to recover the templates from: the bundled set
        notes.append(
            "prompts: neutral.csv's 'Instruction' holds replies and no batch_input.jsonl "
            "prompt fits it; the bundled template set is used for every class"
        )
        return _without_prompts(run), notes
    if unfound:
        notes.append(
            f"prompts: {len(unfound)} file(s) hold replies in 'Instruction' and no batch "
            f"prompt fits them ({', '.join(unfound[:3])}); their class is skipped"
        )
    if not fixed:
        return run, notes
    neutral = fixed.get(NEUTRAL, dict(run.neutral))
    classes = {
        cls: {v: fixed.get(f"{cls}/{v}", dict(rows)) for v, rows in vals.items()}
        for cls, vals in run.classes.items()
    }
    return replace(run, neutral=neutral, classes=classes), notes


def _without_prompts(run: PublishedRun) -> PublishedRun:
    def clear(rows: Mapping[str, Row]) -> dict[str, Row]:
        return {name: replace(row, prompt=None) for name, row in rows.items()}

    classes = {
        cls: {v: clear(rows) for v, rows in vals.items()} for cls, vals in run.classes.items()
    }
    return replace(run, neutral=clear(run.neutral), classes=classes)
