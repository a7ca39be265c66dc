"""Item catalogues: metadata of the items a recommender may name (price level, genre, ...).
Fields whose every non-empty value is a number are numeric, the rest categorical. Titles
match with ``matching.normalize`` plus the overlap audit's guarded fuzzy pass."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz, process

from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.fileio import load_structured, read_text
from pytest_recfair.replies.matching import DEFAULT_THRESHOLD, MIN_FUZZY_LENGTH, normalize

CATALOGUE_SUFFIXES = (".csv", ".json", ".yaml", ".yml")
_RESERVED = ("title", "id")
#: How many unmatched titles a coverage report quotes.
EXAMPLES = 5


@dataclass(frozen=True)
class Item:
    """One catalogue item; ``fields`` maps field name -> category (str) or number."""

    id: str
    title: str
    fields: Mapping[str, str | float]


@dataclass(frozen=True)
class Coverage:
    """How many recommended titles the catalogue knew (counted per occurrence)."""

    matched: int
    total: int
    unmatched_examples: tuple[str, ...]

    @property
    def share(self) -> float:
        return self.matched / self.total if self.total else math.nan


@dataclass(frozen=True)
class Catalogue:
    """Items with their fields; ``categorical``/``numeric`` name the fields by kind."""

    items: tuple[Item, ...]
    categorical: tuple[str, ...]
    numeric: tuple[str, ...]
    source: str = ""
    _index: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self._index:
            index: dict[str, int] = {}
            for i, item in enumerate(self.items):
                index.setdefault(normalize(item.title), i)
            object.__setattr__(self, "_index", index)

    @property
    def fields(self) -> tuple[str, ...]:
        return self.categorical + self.numeric

    def categories(self, name: str) -> tuple[str, ...]:
        """The categories of a categorical field, sorted (the order of every table)."""
        self.check_field(name)
        if name not in self.categorical:
            raise DataError(
                f"{self.source or 'catalogue'}: field {name!r} is numeric; item-side "
                "distributions need a categorical field (bin it into levels in the file)"
            )
        return tuple(sorted({str(it.fields[name]) for it in self.items if name in it.fields}))

    def check_field(self, name: str) -> None:
        if name not in self.fields:
            raise DataError(
                f"{self.source or 'catalogue'} has no field {name!r}; its fields are "
                f"{', '.join(self.fields) or '(none)'}; pick one of those for item_field"
            )

    def match(
        self, titles: Iterable[str], *, fuzzy: bool = True, threshold: float = DEFAULT_THRESHOLD
    ) -> list[int | None]:
        """The catalogue index of each title (None when the catalogue does not know it)."""
        titles = list(titles)
        known: list[str] | None = None
        # each distinct title once: an audit repeats the same titles across its prompts
        key_of = {t: normalize(t) for t in dict.fromkeys(titles)}
        hit_of = {t: self._index.get(k) for t, k in key_of.items()}
        for title, key in key_of.items():
            # near misses, under the matcher's guards (length, numbers)
            if fuzzy and hit_of[title] is None and len(key) >= MIN_FUZZY_LENGTH:
                known = list(self._index) if known is None else known
                best = process.extractOne(key, known, scorer=fuzz.ratio, score_cutoff=threshold)
                if best is not None and _same_numbers(key, best[0]):
                    hit_of[title] = self._index[best[0]]
        return [hit_of[t] for t in titles]

    def coverage(self, titles: Sequence[str], matched: Sequence[int | None]) -> Coverage:
        unmatched = [t for t, m in zip(titles, matched, strict=True) if m is None]
        examples = tuple(dict.fromkeys(unmatched))[:EXAMPLES]
        return Coverage(len(titles) - len(unmatched), len(titles), examples)


def _same_numbers(a: str, b: str) -> bool:
    """Sequels never merge: "toy story 2" is not "toy story 3"."""
    return [t for t in a.split() if t.isdigit()] == [t for t in b.split() if t.isdigit()]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)  # a string's surrounding white space is allowed
    except ValueError:
        return None


def _cell(value: Any, where: str) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, dict | list):
        raise DataError(f"{where}: expected a single value, got {type(value).__name__}")
    return str(value).strip()


def _record(raw: Any, row: str, where: str) -> tuple[str, str | None, dict[str, str]]:
    if not isinstance(raw, dict):
        raise DataError(
            f"{where}: {row} must be a mapping with 'title' (and optional 'id' and fields); "
            f"got {type(raw).__name__}"
        )
    cells = {str(key): _cell(value, f"{where}: {row}.{key}") for key, value in raw.items()}
    title = cells.get("title")
    if title is None:
        raise DataError(f"{where}: {row} has no 'title'; every item needs one")
    fields = {k.strip(): c for k, c in cells.items() if k not in _RESERVED and c is not None}
    return title, cells.get("id"), fields


def catalogue_from_records(records: Sequence[Any], where: str = "catalogue") -> Catalogue:
    """Build a catalogue from parsed records (mappings); ``where`` names it in errors."""
    if not records:
        raise DataError(f"{where}: no items; give at least one record with a 'title'")
    parsed = [_record(r, f"item {i + 1}", where) for i, r in enumerate(records)]
    names = list(dict.fromkeys(k for _, _, f in parsed for k in f))
    numeric = tuple(
        n for n in names if all(_number(f[n]) is not None for _, _, f in parsed if n in f)
    )
    seen: dict[str, int] = {}
    items = []
    for i, (title, ident, raw) in enumerate(parsed):
        key = ident or title
        if key in seen:
            raise DataError(
                f"{where}: item {i + 1} repeats the {'id' if ident else 'title'} {key!r} of "
                f"item {seen[key] + 1}; ids (or titles without ids) must be unique"
            )
        seen[key] = i
        fields: dict[str, str | float] = {
            n: float(v) if n in numeric else v for n, v in raw.items()
        }
        items.append(Item(id=key, title=title, fields=fields))
    categorical = tuple(n for n in names if n not in numeric)
    return Catalogue(tuple(items), categorical, numeric, source=where)


def _text(path: Path, where: str) -> str:
    try:
        return read_text(path, where)
    except OSError as exc:
        raise DataError(f"{where} cannot be read ({exc}); check the path") from exc


def load_catalogue(source: str | Path | Catalogue) -> Catalogue:
    """A catalogue from a .csv (header with ``title``), .json or .yaml/.yml file."""
    if isinstance(source, Catalogue):
        return source
    path = Path(source)
    where = f"catalogue file {str(path)!r}"
    suffix = path.suffix.lower()
    if suffix not in CATALOGUE_SUFFIXES:
        raise DataError(f"{where}: expected a {'/'.join(CATALOGUE_SUFFIXES)} file")
    if not path.is_file():
        raise DataError(f"{where} does not exist; check the path (marker, ini or fixture)")
    text = _text(path, where)
    if suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        if "title" not in (reader.fieldnames or ()):
            raise DataError(
                f"{where}: the header must have a 'title' column; got {reader.fieldnames}"
            )
        return catalogue_from_records(list(reader), where)
    data = load_structured(text, where, suffix)
    if isinstance(data, dict) and "items" in data:
        data = data["items"]
    if not isinstance(data, list):
        raise DataError(
            f"{where}: expected a list of items (or a mapping with an 'items' list), "
            f"got {type(data).__name__}"
        )
    return catalogue_from_records(data, where)


def as_catalogue(value: Any, where: str) -> Catalogue:
    """A Catalogue from what a fixture returned: a Catalogue, a file path or records."""
    if isinstance(value, Catalogue):
        return value
    if isinstance(value, str | Path):
        return load_catalogue(value)
    if isinstance(value, list | tuple):
        return catalogue_from_records(list(value), where)
    raise ConfigError(
        f"{where} returned {type(value).__name__}; expected a Catalogue, a catalogue file "
        "path or a list of item records (mappings with 'title')"
    )


def read_absent(path: Path) -> frozenset[tuple[str, str, str]]:
    """(attribute, value, entity id) never answered, from the import's absent.json."""
    where = f"absent file {str(path)!r}"
    data = load_structured(_text(path, where), where, ".json")
    keys = ("attribute", "value", "entity_id")
    if not isinstance(data, list) or not all(
        isinstance(d, dict) and all(isinstance(d.get(k), str) for k in keys) for d in data
    ):
        raise DataError(
            f"{where}: expected a list of {{attribute, value, entity_id}} objects, as "
            "python -m pytest_recfair import writes"
        )
    return frozenset((d["attribute"], d["value"], d["entity_id"]) for d in data)


def read_candidates(value: Any, where: str) -> Mapping[str, Sequence[str]]:
    """entity id or name -> candidate titles, from a mapping or a JSON/YAML file."""
    if isinstance(value, str | Path):
        path = Path(value)
        where = f"candidates file {str(path)!r}"
        value = load_structured(_text(path, where), where, path.suffix)
    if not isinstance(value, Mapping) or not all(
        isinstance(v, list) and all(isinstance(t, str) for t in v) for v in value.values()
    ):
        raise DataError(
            f"{where}: expected a mapping of entity (id or name) -> list of candidate titles"
        )
    return {str(k): list(v) for k, v in value.items()}
