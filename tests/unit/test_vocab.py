"""The JSON schemas take their closed vocabularies from pytest_recfair.vocab."""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest

from pytest_recfair import vocab

# (schema file, JSON path of an "enum", the vocab tuple it must equal)
ENUMS = [
    ("baseline.schema.json", "$defs.meta.properties.variant", vocab.VARIANTS),
    ("baseline.schema.json", "$defs.meta.properties.missing", vocab.MISSING_POLICIES),
    ("baseline.schema.json", "$defs.meta.properties.parse", vocab.PARSE_STYLES),
    ("baseline.schema.json", "$defs.attribute.properties.metric", vocab.METRICS),
    ("baseline.schema.json", "$defs.attribute.properties.missing_policy", vocab.MISSING_POLICIES),
    ("grid.schema.json", "$defs.form", vocab.VALUE_FORMS),
    ("grid.schema.json", "properties.articles", vocab.ARTICLE_MODES),
    ("grid.schema.json", "$defs.translation.properties.gender", vocab.GRAMMATICAL_GENDERS),
]


def _schema(name: str) -> Any:
    return json.loads(resources.files("pytest_recfair.schemas").joinpath(name).read_text())


def _at(doc: Any, path: str) -> Any:
    for key in path.split("."):
        doc = doc[key]
    return doc


def _enums(doc: Any, path: str = "") -> Iterator[tuple[str, list[Any]]]:
    if isinstance(doc, dict):
        for key, sub in doc.items():
            if key == "enum":
                yield path, sub
            else:
                yield from _enums(sub, f"{path}.{key}" if path else key)
    elif isinstance(doc, list):
        for i, sub in enumerate(doc):
            yield from _enums(sub, f"{path}[{i}]")


@pytest.mark.parametrize(("schema", "path", "vocabulary"), ENUMS, ids=lambda x: str(x))
def test_schema_enum_is_the_kinds_vocabulary(
    schema: str, path: str, vocabulary: tuple[str, ...]
) -> None:
    assert tuple(_at(_schema(schema), path)["enum"]) == vocabulary


def test_every_schema_enum_is_a_kinds_vocabulary() -> None:
    # a value added to vocab alone, or to a schema alone, fails here
    vocabularies = {v for v in vars(vocab).values() if isinstance(v, tuple) and v}
    found = [
        (f"{name}:{path}", tuple(enum))
        for name in ("baseline.schema.json", "grid.schema.json")
        for path, enum in _enums(_schema(name))
    ]
    assert len(found) >= 3
    for where, enum in found:
        assert enum in vocabularies, where
