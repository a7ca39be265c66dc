"""Seed entities the prompts are about; subsampled by a seeded hash of the id, so a quick
PR run audits a subset of the nightly run's entities."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.fileio import (
    atomic_write_bytes,
    check_shape,
    csv_rows,
    load_structured,
    read_input,
)

# Bundled set name -> the domain its entities belong to.
BUNDLED_SEEDS: dict[str, str] = {"directors": "movie", "artists": "music"}

_SUFFIXES = (".csv", ".json", ".yaml", ".yml", ".txt")


@dataclass(frozen=True)
class Entity:
    """One seed entity. ``id`` is stable across renames of the display ``name``."""

    id: str
    name: str
    domain: str


def slugify(name: str) -> str:
    """ASCII slug of a name: ``"Agnès Varda"`` -> ``"agnes-varda"``."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")
    # Names with no Latin letters (e.g. CJK) still need a stable, filename-safe id.
    return slug or "e-" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:12]


def load_seeds(source: str | Path, *, domain: str | None = None) -> list[Entity]:
    """Entities of a bundled set or .csv/.json/.yaml/.txt file; ``domain`` where none."""
    if isinstance(source, str) and source.lower() in BUNDLED_SEEDS:
        name = source.lower()
        node = resources.files("pytest_recfair.prompts").joinpath("data", "seeds", f"{name}.csv")
        text = node.read_text(encoding="utf-8")
        return _parse(text, f"bundled seed set {name!r}", ".csv", domain or BUNDLED_SEEDS[name])
    text, where, suffix = read_input(source, "seeds", sorted(BUNDLED_SEEDS), _SUFFIXES)
    return _parse(text, where, suffix, domain)


def _parse(text: str, where: str, suffix: str, domain: str | None) -> list[Entity]:
    rows: list[tuple[str, dict[str, Any]]]
    if suffix == ".csv":
        expected = "a header such as 'id,name,domain' ('id' and 'domain' optional)"
        rows = csv_rows(text, where, lambda f: f.strip().lower(), {"name"}, expected)
    elif suffix == ".txt":
        rows = [
            (f"line {i}", {"name": line.strip()})
            for i, line in enumerate(text.splitlines(), start=1)
            if line.strip() and not line.lstrip().startswith("#")
        ]
    else:
        data = load_structured(text, where, suffix)
        doc = {"entities": data} if isinstance(data, list) else data
        fix = "expected a list of names (or of mappings with 'name' and optional 'id', 'domain'), "
        fix += "or a mapping with an 'entities' list; fix that entry"
        check_shape(doc, "seeds", where, fix)
        items = enumerate(doc["entities"])
        rows = [(f"entities[{i}]", {"name": x} if isinstance(x, str) else x) for i, x in items]
    entities = [_entity(row, loc, where, domain) for loc, row in rows]
    if not entities:
        raise DataError(f"{where} contains no entities; expected at least one name")
    seen: dict[tuple[str, str], str] = {}
    for ent, (loc, _) in zip(entities, rows, strict=True):
        for what, key, shown, fix in (
            ("id", ent.id, ent.id, "ids key cassettes and baselines, so each must be unique; "
             "give one an explicit 'id'"),
            ("name", ent.name.casefold(), ent.name, "remove the duplicate"),
        ):  # fmt: skip
            if (what, key) in seen:
                raise DataError(
                    f"{where}: {loc} repeats {what} {shown!r} (first at {seen[what, key]}); {fix}"
                )
            seen[what, key] = loc
    return entities


def _entity(row: dict[str, Any], loc: str, where: str, domain: str | None) -> Entity:
    name = row.get("name")
    if not isinstance(name, str) or not name.strip():
        raise DataError(f"{where}: {loc} has no 'name' (expected a non-empty string); got {row!r}")
    ident = str(row.get("id") or "").strip() or slugify(name)
    dom = str(row.get("domain") or "").strip() or (domain or "")
    return Entity(id=ident, name=name.strip(), domain=dom)


def subsample(entities: Iterable[Entity | str], n: int | None, seed: int = 0) -> list[Entity]:
    """The first ``n`` entities by SHA-256 of (seed, id), in input order (all when ``n``
    is None or >= len): a smaller ``n`` is a subset of a larger one."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise ConfigError(f"subsample: n must be a non-negative integer or None; got {n!r}")
    items = [as_entity(e) for e in entities]
    if n is None or n >= len(items):
        return items
    ranks = [hashlib.sha256(f"{seed}\x1f{e.id}".encode()).digest() for e in items]
    chosen = set(sorted(range(len(items)), key=ranks.__getitem__)[:n])
    return [e for i, e in enumerate(items) if i in chosen]


def as_entity(value: Entity | str, domain: str = "") -> Entity:
    """Accept a plain name where an Entity is expected (its id is the name's slug)."""
    if isinstance(value, Entity):
        return value
    if isinstance(value, str) and value.strip():
        return Entity(id=slugify(value.strip()), name=value.strip(), domain=domain)
    raise ConfigError(f"entities: expected Entity objects or non-empty name strings; got {value!r}")


def seeds_digest(entities: Iterable[Entity | str]) -> str:
    """SHA-256 (hex) of the ordered (id, name, domain) triples: changes when the set does."""
    rows = [[e.id, e.name, e.domain] for e in map(as_entity, entities)]
    payload = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


#: The files the docs' examples use, relative to the rootdir.
EXAMPLE_FILES: Final = (
    "fixtures/seeds/cities.csv",
    "fixtures/catalogues/restaurants.csv",
    "fixtures/candidates/directors.yaml",
)

#: The command that writes them (named by errors about a missing example file).
EXAMPLES_COMMAND: Final = "python -m pytest_recfair examples"

#: The runnable pipeline example (docs/pipeline.md): a project folder with its recorded
#: cassettes and baselines, so it replays offline as written.
PIPELINE_EXAMPLE: Final = "pipeline_example"


def _examples_root() -> Any:
    return resources.files("pytest_recfair.prompts").joinpath("data/examples")


def pipeline_example_files() -> tuple[str, ...]:
    """The pipeline example's shipped files, relative to where the examples are written."""

    def walk(node: Any, name: str) -> Iterator[str]:
        for child in node.iterdir():
            if child.is_dir() and child.name != "__pycache__":
                yield from walk(child, f"{name}/{child.name}")
            elif not child.is_dir() and not child.name.endswith(".pyc"):
                yield f"{name}/{child.name}"

    root = _examples_root().joinpath(PIPELINE_EXAMPLE)
    return tuple(sorted(walk(root, PIPELINE_EXAMPLE)))


def example_bytes(relative: str) -> bytes:
    """The shipped content of one of :data:`EXAMPLE_FILES` or of the pipeline example."""
    return _examples_root().joinpath(relative).read_bytes()  # type: ignore[no-any-return]


def write_examples(root: Path) -> list[tuple[Path, str]]:
    """(path, "written"/"unchanged") of every example file; none written if one clashes."""
    every = (*EXAMPLE_FILES, *pipeline_example_files())
    plan = [(root / rel, example_bytes(rel)) for rel in every]
    clash = [p for p, data in plan if p.exists() and p.read_bytes() != data]
    if clash:
        raise DataError(
            f"{clash[0]} exists with other content; nothing was written. Move it away or "
            "pass --dir to write the example files elsewhere."
        )
    done = [(path, "unchanged" if path.exists() else "written") for path, _ in plan]
    for (path, what), (_, data) in zip(done, plan, strict=True):
        if what == "written":
            atomic_write_bytes(path, data)  # its folders made as it writes
    return done
