"""Planted item-side and candidate-position biases of the simulated recommender.

``items`` (profile section): answer list prompts with titles from a catalogue with
metadata, drawn from an entity-specific mix of a field's categories; a value label or the
group it signals (``Black female``) moves a share of that mix to one category::

    items:
      catalogue: restaurants          # bundled (sim/catalogues/) or a CSV/JSON/YAML file
      field: price
      domain: restaurant              # prompts of other domains are answered as before
      shift: {Black female: {"$": 0.3}}

``positions`` (profile section): candidate-list prompts ("From these N ...", "Rank these
N ...") are answered with the first candidate shown with probability ``first``, else the
entity's favourite (the same whatever the order); ``missed`` of replies name none::

    positions: {first: 0.3, missed: 0.02}
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_recfair.errors import DataError
from pytest_recfair.sim.catalogue import stable_seed

if TYPE_CHECKING:  # the catalogue (and rapidfuzz) load only when a profile plants items
    from pytest_recfair.replies.catalogue import Catalogue

__all__ = ["ItemPlan", "PositionPlan", "candidate_reply"]

_CANDIDATES = re.compile(r"\b(?:From|Rank) these \d+ ")
_LINE = re.compile(r"^\s*(\d+)\.\s+(.+?)\s*$", re.MULTILINE)


def _frac(value: Any, where: str, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise DataError(f"{source}: {where} must be a fraction between 0 and 1, got {value!r}")
    return float(value)


@lru_cache(maxsize=8)
def _bundled(name: str) -> Catalogue:
    from pytest_recfair.replies.catalogue import load_catalogue

    node = resources.files("pytest_recfair.sim").joinpath("catalogues", f"{name}.csv")
    with resources.as_file(node) as path:
        return load_catalogue(path)


@lru_cache(maxsize=1)
def _groups() -> dict[str, str]:
    """Value label (case-folded) -> the group it signals, from the bundled implicit grid."""
    from pytest_recfair.prompts.grids import load_grid

    return {
        v.label.casefold(): v.group.casefold()
        for a in load_grid("implicit").attributes
        for v in a.values
        if v.group
    }


@dataclass(frozen=True)
class ItemPlan:
    catalogue: Catalogue
    field: str
    shift: Mapping[str, tuple[str, float]]  # label or group (case-folded) -> (category, share)
    domain: str = "restaurant"  # only prompts of this domain are answered from the catalogue

    @classmethod
    def parse(cls, data: Any, source: str, base: Path | None) -> ItemPlan:
        if not isinstance(data, Mapping) or "catalogue" not in data or "field" not in data:
            raise DataError(f"{source}: 'items' must have 'catalogue' and 'field' (and 'shift')")
        from pytest_recfair.replies.catalogue import load_catalogue

        name = str(data["catalogue"])
        path = (base / name) if base is not None else Path(name)
        catalogue = load_catalogue(path) if path.suffix else _bundled(name)
        field = str(data["field"])
        cats = catalogue.categories(field)
        shift: dict[str, tuple[str, float]] = {}
        for who, move in (data.get("shift") or {}).items():
            if not isinstance(move, Mapping) or len(move) != 1:
                raise DataError(f"{source}: items.shift.{who} must be {{category: share}}")
            ((cat, share),) = move.items()
            if str(cat) not in cats:
                raise DataError(f"{source}: items.shift.{who}: {cat!r} is not a {field} ({cats})")
            shift[str(who).casefold()] = (str(cat), _frac(share, f"items.shift.{who}", source))
        return cls(catalogue, field, shift, str(data.get("domain", "restaurant")))

    def applies(self, prompt: str, system: str | None) -> bool:
        """A prompt of the plan's domain (its word in the system message or the prompt)."""
        return self.domain.casefold() in f"{system or ''} {prompt}".casefold()

    def titles(self, entity: str, labels: Sequence[str], k: int, seed: int, draw: int) -> list[str]:
        """k distinct titles from the entity's category mix, shifted for these labels."""
        cats = self.catalogue.categories(self.field)
        by_cat = {c: [it.title for it in self.catalogue.items if it.fields.get(self.field) == c]
                  for c in cats}  # fmt: skip
        mix_rng = random.Random(stable_seed(seed, "item-mix", entity))
        weights = [mix_rng.uniform(0.5, 1.5) for _ in cats]
        total = sum(weights)
        weights = [w / total for w in weights]
        groups = _groups()
        for label in labels:
            for key in (label.casefold(), groups.get(label.casefold(), "")):
                if key in self.shift:
                    cat, share = self.shift[key]
                    weights = [(1 - share) * w + (share if c == cat else 0.0)
                               for w, c in zip(weights, cats, strict=True)]  # fmt: skip
                    break
        rng = random.Random(stable_seed(seed, "items", entity, "|".join(labels), draw))
        out: list[str] = []
        while len(out) < min(k, len(self.catalogue.items)):
            cat = rng.choices(cats, weights)[0]
            title = rng.choice(by_cat[cat])
            if title not in out:
                out.append(title)
        return out


@dataclass(frozen=True)
class PositionPlan:
    first: float = 0.0
    missed: float = 0.0

    @classmethod
    def parse(cls, data: Any, source: str) -> PositionPlan:
        if not isinstance(data, Mapping) or set(data) - {"first", "missed"}:
            raise DataError(f"{source}: 'positions' takes first and missed (fractions)")
        return cls(
            _frac(data.get("first", 0.0), "positions.first", source),
            _frac(data.get("missed", 0.0), "positions.missed", source),
        )


def candidate_reply(prompt: str, plan: PositionPlan | None, seed: int, draw: int) -> str | None:
    """The answer to a candidate-list prompt, or None when ``prompt`` is not one."""
    if not _CANDIDATES.search(prompt):
        return None
    shown = [m.group(2) for m in _LINE.finditer(prompt)]
    if not shown:
        return None
    plan = plan or PositionPlan()
    rng = random.Random(stable_seed(seed, "pick", prompt, draw))
    if rng.random() < plan.missed:
        return "None of these would suit you, I am afraid."
    favourite = min(shown, key=lambda t: stable_seed(seed, "favourite", t))
    pick = shown[0] if rng.random() < plan.first else favourite
    if "Rank these" in prompt:
        rest = sorted((t for t in shown if t != pick), key=lambda t: stable_seed(seed, "rank", t))
        return "\n".join(f"{i}. {t}" for i, t in enumerate([pick, *rest], 1))
    return pick
