"""Attribute grids: which demographic (or other) values go into conditioned prompts.
YAML validated by ``schemas/grid.schema.json``; ``faireval`` is the default."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.fileio import check_shape, load_structured, read_input, read_text

BUNDLED_GRIDS = ("faireval", "fairllm", "implicit", "personality")
# The value forms that cross into one intersectional phrase.
_COMPOSABLE = frozenset({"adjective", "noun"})
# Separator of intersectional attribute names: "race x gender" or "race × gender".
_CROSS = re.compile(r"\s+[xX×]\s+")
LABEL_SEP = " x "
# English adjective order (age, size/shape, colour/origin, religion, gender, then the head
# noun), so "race x gender" and "gender x race" both read "Black female".
_ORDER = {
    "age": 0, "physical": 1, "physics": 1, "personality": 1, "race": 2, "continent": 3,
    "nationality": 3, "country": 3, "religion": 4, "gender": 5, "occupation": 6,
}  # fmt: skip
_ARTICLE = re.compile(r"^(a|an)\s+", re.IGNORECASE)


class GridError(DataError):
    """A grid file or grid request is malformed."""


def attribute_order(name: str) -> int:
    return _ORDER.get(name.casefold(), 4)


def strip_article(text: str) -> str:
    return _ARTICLE.sub("", text, count=1)


def indefinite_article(text: str) -> str:
    """``a`` or ``an`` for an English phrase (by sound for the usual exceptions)."""
    word = text.strip().lower()
    if re.match(r"(uni|use|usu|eu|one|once|ufo)", word):
        return "a"
    return "an" if word[:1] in "aeiou" or re.match(r"(hour|honest|honou?r|heir)", word) else "a"


@dataclass(frozen=True)
class AttributeValue:
    """``label`` names it in reports, ``text`` is what the prompt says (FaiRLLM's "an
    Islamic" has its own article); ``i18n`` overrides the translation tables."""

    label: str
    text: str
    form: str = "adjective"
    has_article: bool = False
    group: str | None = None
    parts: tuple[tuple[str, AttributeValue], ...] = ()
    i18n: Mapping[str, Mapping[str, Any]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    @property
    def with_article(self) -> str:
        """The text with an indefinite article ("a Muslim"); as-is when it carries one."""
        return self.text if self.has_article else f"{indefinite_article(self.text)} {self.text}"

    @property
    def bare_text(self) -> str:
        return strip_article(self.text) if self.has_article else self.text


@dataclass(frozen=True)
class Attribute:
    name: str
    values: tuple[AttributeValue, ...]

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(v.label for v in self.values)

    def value(self, label: str) -> AttributeValue:
        """The value with this label (case-insensitive)."""
        key = label.casefold()
        for v in self.values:
            if v.label.casefold() == key:
                return v
        raise ConfigError(
            f"attribute {self.name!r} has no value {label!r}; its values are "
            f"{', '.join(self.labels)}"
        )


@dataclass(frozen=True)
class Grid:
    name: str
    attributes: tuple[Attribute, ...]
    digest: str
    source: str = field(default="", compare=False)

    @property
    def attribute_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    def attribute(self, name: str) -> Attribute:
        """An attribute by name, case-insensitively; ``"race x gender"`` crosses attributes:
        labels in the order asked (``"Black x Female"``), text in adjective order."""
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"grid {self.name!r}: attribute name must be a non-empty string")
        names = _CROSS.split(name.strip())
        if len(names) == 1:
            return self._single(names[0])
        singles = [self._single(n) for n in names]
        seen = [a.name.casefold() for a in singles]
        if len(set(seen)) != len(seen):
            raise ConfigError(
                f"grid {self.name!r}: {name!r} crosses an attribute with itself; "
                "name two different attributes, e.g. 'race x gender'"
            )
        for attr in singles:
            bad = [v.label for v in attr.values if v.form not in _COMPOSABLE]
            if bad:
                raise ConfigError(
                    f"grid {self.name!r}: attribute {attr.name!r} has {bad[0]!r} of form "
                    f"{attr.values[0].form!r}; only adjective and noun values can be crossed"
                )
        return _cross(singles)

    def _single(self, name: str) -> Attribute:
        key = name.strip().casefold()
        for attr in self.attributes:
            if attr.name.casefold() == key:
                return attr
        raise ConfigError(
            f"grid {self.name!r} has no attribute {name.strip()!r}; available: "
            f"{', '.join(self.attribute_names)} (cross two with 'race x gender')"
        )


def _cross(singles: Sequence[Attribute]) -> Attribute:
    values: list[AttributeValue] = []
    for combo in itertools.product(*(a.values for a in singles)):
        parts = tuple((a.name, v) for a, v in zip(singles, combo, strict=True))
        ordered = sorted(parts, key=lambda p: attribute_order(p[0]))
        text = " ".join(v.bare_text for _, v in ordered)
        form = "noun" if any(v.form == "noun" for v in combo) else "adjective"
        label = LABEL_SEP.join(v.label for v in combo)
        values.append(AttributeValue(label, text, form, parts=parts))
    return Attribute(name=LABEL_SEP.join(a.name for a in singles), values=tuple(values))


def _validate(data: Any, where: str) -> None:
    fix = "expected a mapping with 'name' and 'attributes' (a list of {name, values: "
    fix += "[{label, text}]}) - see docs/prompts.md, 'Grid files'"
    check_shape(data, "grid", where, fix, GridError)
    names = [a["name"].casefold() for a in data["attributes"]]
    for i, attr in enumerate(data["attributes"]):
        if (first := names.index(names[i])) < i:
            raise GridError(
                f"{where}: at attributes[{i}].name: attribute {attr['name']!r} repeats "
                f"attributes[{first}] (names are case-insensitive); rename or merge them"
            )
        labels = [v["label"].casefold() for v in attr["values"]]
        for j, val in enumerate(attr["values"]):
            if (first := labels.index(labels[j])) < j:
                raise GridError(
                    f"{where}: at attributes[{i}].values[{j}].label: label {val['label']!r} "
                    f"repeats values[{first}] of attribute {attr['name']!r}; labels "
                    "must be unique within an attribute"
                )


def grid_from_dict(data: Any, where: str = "grid", base_dir: Path | None = None) -> Grid:
    """The Grid of a checked mapping (``extends:`` overlays it on another grid)."""
    _validate(data, where)
    if "extends" in data:
        data = _merge(data, where, base_dir or Path.cwd(), depth=0)
    default_articles = data.get("articles", "auto")
    attributes = []
    for attr in data["attributes"]:
        attr_form = attr.get("form", "adjective")
        included = attr.get("articles", default_articles) == "included"
        # the schema allows only AttributeValue's fields (label, text, form, group, i18n)
        values = tuple(
            AttributeValue(**{**v, "form": v.get("form", attr_form), "has_article": included})
            for v in attr["values"]
        )
        attributes.append(Attribute(attr["name"], values))
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return Grid(name=data["name"], attributes=tuple(attributes), digest=digest, source=where)


def _merge(data: dict[str, Any], where: str, base_dir: Path, depth: int) -> dict[str, Any]:
    """Resolve ``extends`` into one self-contained grid mapping (articles made explicit)."""
    ref = data["extends"]
    if depth > 8:
        raise GridError(f"{where}: at extends: grids extend each other in a loop ({ref!r})")
    if ref.lower() in BUNDLED_GRIDS:
        base, base_where, next_dir = _raw_bundled(ref.lower()), f"bundled grid {ref!r}", base_dir
    else:
        path = (base_dir / ref).resolve()
        base_where = f"grid file {str(path)!r} (extended by {where})"
        if not path.is_file():
            raise GridError(
                f"{where}: at extends: {ref!r} is neither a bundled grid "
                f"({', '.join(BUNDLED_GRIDS)}) nor an existing file (looked for {str(path)!r})"
            )
        text = read_text(path, base_where, GridError)
        base, next_dir = load_structured(text, base_where, error=GridError), path.parent
    _validate(base, base_where)
    if "extends" in base:
        base = _merge(base, base_where, next_dir, depth + 1)
    # by case-folded name: an attribute of the extending grid replaces the base's in place
    attrs = {}
    for grid in (base, data):
        articles = grid.get("articles", "auto")
        for attr in grid["attributes"]:
            attrs[attr["name"].casefold()] = {**attr, "articles": attr.get("articles", articles)}
    merged = {k: v for k, v in data.items() if k not in ("extends", "attributes", "articles")}
    merged["attributes"] = list(attrs.values())
    return merged


def _raw_bundled(name: str) -> Any:
    node = resources.files("pytest_recfair.prompts").joinpath("data", "grids", f"{name}.yaml")
    return load_structured(node.read_text(encoding="utf-8"), f"bundled grid {name!r}", fast=True)


@lru_cache(maxsize=16)
def _bundled(name: str) -> Grid:
    return grid_from_dict(_raw_bundled(name), f"bundled grid {name!r}")


def load_grid(source: str | Path | Grid) -> Grid:
    """A bundled grid (BUNDLED_GRIDS) or a YAML file."""
    if isinstance(source, Grid):
        return source
    if isinstance(source, str) and source.lower() in BUNDLED_GRIDS:
        return _bundled(source.lower())
    suffixes = (".yaml", ".yml", ".json")
    text, where, _ = read_input(source, "grid", BUNDLED_GRIDS, suffixes, GridError)
    data = load_structured(text, where, error=GridError)
    return grid_from_dict(data, where, base_dir=Path(source).parent)
