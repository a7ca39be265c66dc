"""Match a prompt built from the bundled template sets, grids and languages.

The simulated recommender receives only prompt text; ``match_prompt`` recovers the entity,
K and the (attribute, value label) it conditions on, so planted biases can key on them
(``sim.recognise`` builds its ``Recognised`` on it). Misspelt values (typo perturbation)
are matched to the closest known phrase.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from pytest_recfair.errors import RecfairError
from pytest_recfair.prompts.grids import BUNDLED_GRIDS, Grid, attribute_order, load_grid
from pytest_recfair.prompts.languages import load_language, render_value
from pytest_recfair.prompts.templates import BUNDLED_TEMPLATES, load_templates

__all__ = ["PromptMatch", "match_prompt", "template_patterns"]

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_DOMAIN_KEYS = ("domain", "item", "items", "titles", "counter")
# Crossed attributes are recognised for the default grid only (it is the one with tables).
_CROSS_GRID = "faireval"


class PromptMatch(NamedTuple):
    """``attribute``/``value`` are None for a neutral prompt. For a conditioned prompt whose
    value phrase matches no bundled grid, ``attribute`` is ``""`` and ``value`` is the raw
    phrase."""

    entity: str
    k: int
    attribute: str | None
    value: str | None
    language: str
    templates: str
    domain: str | None
    form: str | None  # None for neutral
    phrase: str | None  # the value text as found in the prompt
    exact: bool  # False when the phrase was matched approximately (a typo)


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    templates: str
    language: str
    form: str | None
    literal: int
    anchor: str  # the longest literal piece: a cheap substring test before the regex


def _anchor(template: str) -> str:
    pieces = _PLACEHOLDER.split(template)[::2]  # split keeps group names at odd positions
    if any("de " in p or "que " in p for p in pieces):
        pieces = [q for p in pieces for q in re.split(r"\b(?:de|que) ", p)]
    return max(pieces, key=len)


def _elided(m: re.Match[str]) -> str:
    word = m.group(1)
    return f"(?:{word}\\ |{word[:-1]}')"


def _compile(template: str, language: str) -> tuple[re.Pattern[str], int]:
    out: list[str] = []
    seen: set[str] = set()
    literal = 0
    pos = 0
    for m in _PLACEHOLDER.finditer(template):
        text = template[pos : m.start()]
        literal += len(text)
        piece = re.escape(text)
        if language == "fr":
            # French elision turns "de Adele" into "d'Adele" after filling.
            piece = re.sub(r"\b(de|que)\\ $", _elided, piece)
        out.append(piece)
        key = m.group(1)
        if key == "entity":
            out.append(r"(?P<entity>.+?)")
        elif key == "k":
            out.append(r"(?P<k>\d+)")
        elif key in ("value", "a_value"):
            out.append(r"(?P<value>.+?)" if "value" not in seen else r"(?P=value)")
            seen.add("value")
        elif key in seen:
            out.append(f"(?P={key})")
        else:
            out.append(f"(?P<{key}>.*?)")
            seen.add(key)
        pos = m.end()
    literal += len(template) - pos
    out.append(re.escape(template[pos:]))
    return re.compile("^" + "".join(out) + "$", re.DOTALL), literal


@lru_cache(maxsize=1)
def template_patterns() -> tuple[_Pattern, ...]:
    """Compiled patterns of every bundled (set, language, form), most specific first."""
    neutral: list[_Pattern] = []
    conditioned: list[_Pattern] = []
    for name in BUNDLED_TEMPLATES:
        tset = load_templates(name)
        for code, lt in tset.languages.items():
            rx, lit = _compile(lt.neutral, code)
            neutral.append(_Pattern(rx, name, code, None, lit, _anchor(lt.neutral)))
            for form, template in lt.conditioned.items():
                rx, lit = _compile(template, code)
                conditioned.append(_Pattern(rx, name, code, form, lit, _anchor(template)))
    conditioned.sort(key=lambda p: -p.literal)
    return (*neutral, *conditioned)


def _grid_order(templates: str) -> tuple[str, ...]:
    first = "fairllm" if templates in ("faireval", "fairllm") else "faireval"
    return (first, *(g for g in BUNDLED_GRIDS if g != first))


def _phrases(grid: Grid, language: str, crossed: bool) -> Iterator[tuple[str, str, str]]:
    attrs = list(grid.attributes)
    if crossed:
        names = sorted((a.name for a in attrs), key=attribute_order)
        attrs = [grid.attribute(f"{a} x {b}") for i, a in enumerate(names) for b in names[i + 1 :]]
    for attr in attrs:
        for val in attr.values:
            try:
                phrase = render_value(attr, val, language)
            except RecfairError:
                continue  # no translation for this value in this language
            yield phrase.a_value, attr.name, val.label
            yield phrase.value, attr.name, val.label


@lru_cache(maxsize=32)
def _lookup(templates: str, language: str) -> tuple[dict[str, tuple[str, str]], int]:
    """Phrase -> (attribute, label); the int counts single-attribute entries, which come
    first (dicts keep insertion order) and are tried first when matching a typo."""
    table: dict[str, tuple[str, str]] = {}
    for name in _grid_order(templates):
        for phrase, attr, label in _phrases(load_grid(name), language, crossed=False):
            table.setdefault(phrase.casefold(), (attr, label))
    singles = len(table)
    for phrase, attr, label in _phrases(load_grid(_CROSS_GRID), language, crossed=True):
        table.setdefault(phrase.casefold(), (attr, label))
    return table, singles


@lru_cache(maxsize=4096)
def _closest(templates: str, language: str, phrase: str) -> tuple[str, str] | None:
    table, singles = _lookup(templates, language)
    keys = list(table)
    for group in (keys[:singles], keys[singles:]):
        near = [key for key in group if abs(len(key) - len(phrase)) <= 3]
        close = difflib.get_close_matches(phrase, near, n=1, cutoff=0.75)
        if close:
            return table[close[0]]
    return None


def _domain_of(language: str, groups: dict[str, str]) -> str | None:
    if groups.get("domain"):
        return groups["domain"]
    for dom, nouns in load_language(language).domains.items():
        if all(nouns.get(k) == v for k, v in groups.items() if k in nouns and v):
            return dom
    return None


def match_prompt(prompt: str) -> PromptMatch | None:
    """Full recognition result, or None when no bundled template produced ``prompt``."""
    text = prompt.strip()
    for pat in template_patterns():
        if pat.anchor not in text:
            continue
        m = pat.regex.match(text)
        if m is None:
            continue
        groups = {k: v for k, v in m.groupdict().items() if k in _DOMAIN_KEYS and v is not None}
        domain = _domain_of(pat.language, groups)
        entity, k = m.group("entity"), int(m.group("k")) if "k" in m.groupdict() else 0
        if pat.form is None:
            return PromptMatch(
                entity, k, None, None, pat.language, pat.templates, domain, None, None, True
            )
        phrase = m.group("value")
        table, _ = _lookup(pat.templates, pat.language)
        hit = table.get(phrase.casefold())
        exact = hit is not None
        if hit is None:
            hit = _closest(pat.templates, pat.language, phrase.casefold()) or ("", phrase)
        return PromptMatch(
            entity, k, hit[0], hit[1], pat.language, pat.templates, domain, pat.form, phrase, exact
        )
    return None
