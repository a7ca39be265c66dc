"""Prompt cases, and a prompt of ours matched back to its entity, K and (attribute, value)
(``match_prompt``: the simulator sees only text, and planted biases key on them)."""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from pytest_recfair.errors import ConfigError, RecfairError
from pytest_recfair.prompts.grids import (
    BUNDLED_GRIDS,
    Attribute,
    AttributeValue,
    Grid,
    attribute_order,
    load_grid,
)
from pytest_recfair.prompts.languages import (
    Phrase,
    Typo,
    apply_typos,
    domain_nouns,
    load_language,
    parse_perturbation,
    render_value,
    typo_rng,
)
from pytest_recfair.prompts.seeds import Entity, as_entity
from pytest_recfair.prompts.templates import (
    BUNDLED_TEMPLATES,
    DOMAIN_KEYS,
    LanguageTemplates,
    TemplateSet,
    fill,
    filler,
    load_templates,
)


@dataclass(frozen=True)
class PromptCase:
    """One prompt to send. ``attribute``/``value`` are None for the neutral prompt;
    ``value`` is the AttributeValue label (e.g. "Muslim"), not the prompt text."""

    id: str
    system: str
    prompt: str
    entity: str
    entity_id: str
    attribute: str | None
    value: str | None
    language: str
    perturbation: str | None
    repeat: int
    domain: str
    k: int
    templates: str
    group: str | None = None  # implicit grids: the group a proxy signals ("Black female")

    @property
    def neutral(self) -> bool:
        return self.attribute is None


# One encoder for every id: json.dumps builds a new one per call with these options.
_ID_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _encoded(*values: object) -> str:
    """The JSON of ``values`` as items of the id's array (the array without brackets)."""
    return ",".join(map(_ID_ENCODER.encode, values))


def build_cases(
    grid: str | Path | Grid = "faireval",
    templates: str | Path | TemplateSet = "natural",
    entities: Sequence[Entity | str] | None = None,
    domain: str = "movie",
    k: int = 25,
    language: str = "en",
    perturbation: str | Typo | None = None,
    seed: int = 0,
    repeats: int = 1,
    attributes: Sequence[str] | None = None,
    *,
    system: str | None = None,
) -> list[PromptCase]:
    """An audit's cases by entity then repeat: neutral, then one per value of each attribute
    (``"race x gender"`` crosses); typos seeded by ``seed`` and the case."""
    ents = _checked(entities, domain, k, repeats, seed, attributes)
    the_grid = load_grid(grid)
    tset = load_templates(templates)
    lt = tset.language(language)
    nouns = domain_nouns(language, domain, lt.domains)
    typo = parse_perturbation(perturbation)
    elide = not lt.verbatim
    base = {**nouns, "k": str(k)}
    chosen = the_grid.attributes if attributes is None else map(the_grid.attribute, attributes)
    rendered = _rendered(chosen, lt, tset.name, language, base)
    if system is not None:
        sys_text = neutral_sys = system.replace("{domain}", domain)
    else:  # the neutral prompt's own system message: FairEval's French run asked it in English
        sys_text = fill(lt.system, nouns, language, elide=elide)
        neutral_sys = fill(lt.neutral_system or lt.system, nouns, language, elide=elide)
    perturbed = typo.spec if typo else None
    name, head = tset.name, _encoded(tset.name, domain, k)
    tails = tuple(_encoded(language, perturbed, rep) for rep in range(repeats))

    def case(ent: Entity, entity: str, rep: int, attr: str | None, label: str | None,
             cell: str, prompt: str, group: str | None) -> PromptCase:  # fmt: skip
        """Fields into ``__dict__`` (PromptCase has no ``__post_init__``): 3x faster."""
        out = object.__new__(PromptCase)
        d = out.__dict__  # item by item: the instances keep sharing one key table
        # SHA-256 of one JSON array (cassettes and baselines key on it), parts encoded once
        id_json = f"[{head},{entity},{cell},{tails[rep]}]"
        d["id"] = hashlib.sha256(id_json.encode("utf-8")).hexdigest()[:16]
        d["system"] = sys_text if attr is not None else neutral_sys
        d["prompt"] = prompt
        d["entity"] = ent.name
        d["entity_id"] = ent.id
        d["attribute"] = attr
        d["value"] = label
        d["language"] = language
        d["perturbation"] = perturbed
        d["repeat"] = rep
        d["domain"] = domain
        d["k"] = k
        d["templates"] = name
        d["group"] = group
        return out

    neutral_of = filler(lt.neutral, base, language, elide=elide)
    neutral_cell = _encoded(None, None)
    cases: list[PromptCase] = []
    for ent in ents:
        neutral_prompt = neutral_of(ent.name)
        entity = _encoded(ent.id)
        for rep in range(repeats):
            cases.append(case(ent, entity, rep, None, None, neutral_cell, neutral_prompt, None))
            for attr, val, phrase, template, cell, prompt_of in rendered:
                if typo is None:
                    prompt = prompt_of(ent.name)
                else:
                    v_text, a_text = _with_typos(
                        phrase, typo, seed, ent.id, attr.name, val.label, rep
                    )
                    filled = {**base, "entity": ent.name, "value": v_text, "a_value": a_text}
                    prompt = fill(template, filled, language, elide=elide)
                cases.append(case(ent, entity, rep, attr.name, val.label, cell, prompt, val.group))
    return cases


def _checked(
    entities: Sequence[Entity | str] | None,
    domain: str,
    k: int,
    repeats: int,
    seed: int,
    attributes: Sequence[str] | None,
) -> list[Entity]:
    """The entities as Entity objects; ConfigError for a wrong argument."""
    if entities is None or isinstance(entities, str | bytes):
        raise ConfigError(
            "build_cases: entities must be a list of Entity objects or names, e.g. "
            f"load_seeds('directors') or ['Adele']; got {entities!r}"
        )
    ents = [as_entity(e, domain) for e in entities]
    if not ents:
        raise ConfigError("build_cases: entities is empty; pass at least one entity")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"build_cases: seed must be an integer; got {seed!r}")
    for name, value in (("k", k), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"build_cases: {name} must be a positive integer; got {value!r}")
    if isinstance(attributes, str):
        raise ConfigError(
            f"build_cases: attributes must be a list of names, not a string; "
            f"use attributes=[{attributes!r}]"
        )
    return ents


def _rendered(
    attrs: Iterable[Attribute], lt: LanguageTemplates, tset: str, lang: str, base: dict[str, str]
) -> list[tuple[Attribute, AttributeValue, Phrase, str, str, Callable[[str], str]]]:
    """Each value rendered and filled once: only typos depend on the entity and repeat."""
    out = []
    for attr in attrs:
        for val in attr.values:
            # verbatim: the grid's text as written (what the English path does), untranslated
            phrase = render_value(attr, val, "en" if lt.verbatim else lang)
            template = lt.conditioned_for(val.form, tset)
            words = {**base, "value": phrase.value, "a_value": phrase.a_value}
            prompt_of = filler(template, words, lang, elide=not lt.verbatim)
            out.append((attr, val, phrase, template, _encoded(attr.name, val.label), prompt_of))
    return out


def _with_typos(phrase: Phrase, typo: Typo, seed: int, *key: object) -> tuple[str, str]:
    """({value}, {a_value}) with misspellings of the attribute words, seeded by ``key``."""
    v_text = apply_typos(phrase.value, phrase.words, typo, typo_rng(seed, *key))
    if phrase.a_value.endswith(phrase.value):  # {value} after an article: the same edits
        return v_text, phrase.a_value.removesuffix(phrase.value) + v_text
    return v_text, apply_typos(phrase.a_value, phrase.words, typo, typo_rng(seed, *key))


_PLACEHOLDER = re.compile(r"\{(\w+)\}")

# Crossed attributes are recognised for the default grid only (it is the one with tables).
_CROSS_GRID = "faireval"


class PromptMatch(NamedTuple):
    """``attribute``/``value`` None: neutral; ``attribute`` "": a phrase no grid knows."""

    entity: str
    k: int
    attribute: str | None
    value: str | None
    language: str
    domain: str | None
    phrase: str | None  # the value text as found in the prompt
    exact: bool  # False when the phrase was matched approximately (a typo)


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    literal: int  # characters of literal text: the more, the more specific
    templates: str
    language: str
    form: str | None
    anchor: str  # the longest literal piece: a cheap substring test before the regex


def _anchor(template: str) -> str:
    pieces = _PLACEHOLDER.split(template)[::2]  # split keeps group names at odd positions
    pieces = [q for p in pieces for q in re.split(r"\b(?:de|que) ", p)]  # French elides them
    return max(pieces, key=len)


def _compile(template: str, language: str) -> tuple[re.Pattern[str], int]:
    parts = _PLACEHOLDER.split(template)  # literal, key, literal, ..., literal
    out: list[str] = []
    seen: set[str] = set()
    for text, key in zip(parts[::2], parts[1::2], strict=False):
        piece = re.escape(text)
        if language == "fr":
            # French elision turns "de Adele" into "d'Adele" after filling.
            piece = re.sub(r"\b(d|qu)e\\ $", r"(?:\1e\\ |\1')", piece)
        out.append(piece)
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
    out.append(re.escape(parts[-1]))
    return re.compile("^" + "".join(out) + "$", re.DOTALL), sum(map(len, parts[::2]))


@lru_cache(maxsize=1)
def template_patterns() -> tuple[_Pattern, ...]:
    """Every bundled (set, language, form) pattern: neutral ones, then the most specific."""
    found = [
        _Pattern(*_compile(template, code), name, code, form, _anchor(template))
        for name in BUNDLED_TEMPLATES
        for code, lt in load_templates(name).languages.items()
        for form, template in ((None, lt.neutral), *lt.conditioned.items())
    ]
    return tuple(sorted(found, key=lambda p: (0, 0) if p.form is None else (1, -p.literal)))


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
    """Phrase -> (attribute, label); the int counts single-attribute entries (tried first)."""
    table: dict[str, tuple[str, str]] = {}
    first = "fairllm" if templates in ("faireval", "fairllm") else "faireval"
    for name in (first, *(g for g in BUNDLED_GRIDS if g != first)):
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
        if pat.anchor not in text or (m := pat.regex.match(text)) is None:
            continue
        groups = {k: v for k, v in m.groupdict().items() if k in DOMAIN_KEYS and v is not None}
        domain = _domain_of(pat.language, groups)
        entity, k = m.group("entity"), int(m.group("k")) if "k" in m.groupdict() else 0
        phrase, exact = None, True
        hit: tuple[str | None, str | None] = (None, None)
        if pat.form is not None:  # a conditioned prompt: its value, else the closest (a typo)
            phrase = m.group("value")
            found = _lookup(pat.templates, pat.language)[0].get(phrase.casefold())
            exact = found is not None
            hit = found or _closest(pat.templates, pat.language, phrase.casefold()) or ("", phrase)
        return PromptMatch(entity, k, *hit, pat.language, domain, phrase, exact)
    return None
