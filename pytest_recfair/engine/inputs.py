"""Reading the extra inputs some kinds of audit take (catalogue, candidates, absent cases)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.replies.catalogue import Catalogue, catalogue_from_records, load_catalogue

__all__ = ["as_catalogue", "read_absent", "read_candidates"]


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
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{where} cannot be read as JSON ({exc})") from exc
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
        try:
            text = path.read_text(encoding="utf-8")
            value = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (OSError, json.JSONDecodeError, yaml.YAMLError) as exc:
            raise DataError(f"candidates file {str(path)!r} cannot be read ({exc})") from exc
        where = f"candidates file {str(path)!r}"
    if not isinstance(value, Mapping) or not all(
        isinstance(v, list) and all(isinstance(t, str) for t in v) for v in value.values()
    ):
        raise DataError(
            f"{where}: expected a mapping of entity (id or name) -> list of candidate titles"
        )
    return {str(k): list(v) for k, v in value.items()}
