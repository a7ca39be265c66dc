"""build_cases: the cross product of entities x (neutral + attribute values) x repeats."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_recfair.errors import ConfigError
from pytest_recfair.prompts.grids import Attribute, AttributeValue, Grid, load_grid
from pytest_recfair.prompts.languages import Phrase, domain_nouns, render_value
from pytest_recfair.prompts.perturb import Typo, apply_typos, parse_perturbation, typo_rng
from pytest_recfair.prompts.seeds import Entity, as_entity
from pytest_recfair.prompts.templates import LanguageTemplates, TemplateSet, fill, load_templates

__all__ = ["PromptCase", "build_cases", "case_id"]


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


def case_id(
    *,
    templates: str,
    domain: str,
    k: int,
    entity_id: str,
    attribute: str | None,
    value: str | None,
    language: str,
    perturbation: str | None,
    repeat: int,
) -> str:
    """Stable id: SHA-256 of what identifies a case, 16 hex chars. It keys cassettes and
    baselines, so it must not depend on dict order, Python version or process."""
    payload = _ID_ENCODER.encode(
        [templates, domain, k, entity_id, attribute, value, language, perturbation, repeat]
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"build_cases: {name} must be a positive integer; got {value!r}")
    return value


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
    """All prompt cases of an audit, grouped by entity then repeat.

    For each entity and repeat: the neutral case, then one case per value of each
    attribute (``attributes=None``: every attribute of the grid; names may cross
    attributes, ``"race x gender"``). ``entities`` takes Entity objects or plain names.
    ``system`` overrides the set's system message (``{domain}`` is replaced). Typo
    perturbation (``"typo"``, ``"typo:2"``, ...) edits only the attribute words, seeded
    by ``seed`` and the case, so reruns produce identical prompts.
    """
    ents, k, repeats = _checked(entities, domain, k, repeats, seed)
    the_grid = load_grid(grid)
    tset = load_templates(templates)
    lt = tset.language(language)
    nouns = domain_nouns(language, domain, lt.domains)
    typo = parse_perturbation(perturbation)
    elide = not lt.verbatim
    # Render each value once; only perturbation depends on the entity and repeat.
    rendered = [
        # verbatim: the grid's text as written (what the English path does), untranslated
        (
            attr,
            val,
            render_value(attr, val, "en" if lt.verbatim else language),
            lt.conditioned_for(val.form, tset.name),
        )
        for attr in _chosen(the_grid, attributes)
        for val in attr.values
    ]
    sys_text, neutral_sys = _system_texts(lt, nouns, language, system, domain)
    ctx = _Context(
        templates=tset.name,
        domain=domain,
        k=k,
        language=language,
        perturbation=typo.spec if typo else None,
        system=sys_text,
        neutral_system=neutral_sys,
    )
    base = {**nouns, "k": str(k)}
    cases: list[PromptCase] = []
    for ent in ents:
        values = {**base, "entity": ent.name}
        neutral_prompt = fill(lt.neutral, values, language, elide=elide)
        for rep in range(repeats):
            cases.append(ctx.case(ent, rep, None, None, neutral_prompt, None))
            for attr, val, phrase, template in rendered:
                v_text, a_text = phrase.value, phrase.a_value
                if typo is not None:
                    v_text, a_text = _with_typos(phrase, typo, seed, ent, attr, val, rep)
                filled = {**values, "value": v_text, "a_value": a_text}
                prompt = fill(template, filled, language, elide=elide)
                cases.append(ctx.case(ent, rep, attr.name, val.label, prompt, val.group))
    return cases


def _checked(
    entities: Sequence[Entity | str] | None, domain: str, k: int, repeats: int, seed: int
) -> tuple[list[Entity], int, int]:
    """The entities as Entity objects and the checked counts; ConfigError if wrong."""
    if entities is None or isinstance(entities, str | bytes):
        raise ConfigError(
            "build_cases: entities must be a list of Entity objects or names, e.g. "
            "load_seeds('directors') or ['Adele']; got "
            f"{entities!r}"
        )
    ents = [as_entity(e, domain) for e in entities]
    if not ents:
        raise ConfigError("build_cases: entities is empty; pass at least one entity")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"build_cases: seed must be an integer; got {seed!r}")
    return ents, _positive_int("k", k), _positive_int("repeats", repeats)


def _chosen(grid: Grid, attributes: Sequence[str] | None) -> list[Attribute]:
    if attributes is None:
        return list(grid.attributes)
    if isinstance(attributes, str):
        raise ConfigError(
            f"build_cases: attributes must be a list of names, not a string; "
            f"use attributes=[{attributes!r}]"
        )
    return [grid.attribute(a) for a in attributes]


def _system_texts(
    lt: LanguageTemplates, nouns: dict[str, str], language: str, system: str | None, domain: str
) -> tuple[str, str]:
    """(system message of conditioned prompts, of the neutral prompt).

    A user system message is used verbatim except for {domain}; a template set may give
    the neutral prompt its own (the published French run asked it in English).
    """
    elide = not lt.verbatim
    if system is not None:
        text = system.replace("{domain}", domain)
        return text, text
    text = fill(lt.system, nouns, language, elide=elide)
    if lt.neutral_system is None:
        return text, text
    return text, fill(lt.neutral_system, nouns, language, elide=elide)


def _with_typos(
    phrase: Phrase,
    typo: Typo,
    seed: int,
    ent: Entity,
    attr: Attribute,
    val: AttributeValue,
    rep: int,
) -> tuple[str, str]:
    """({value}, {a_value}) with seeded misspellings of the attribute words only."""
    rng = typo_rng(seed, ent.id, attr.name, val.label, rep)
    v_text = apply_typos(phrase.value, phrase.words, typo, rng)
    a_text = phrase.a_value
    # {a_value} is {value} with an article in front: reuse the same edits.
    if a_text == phrase.value:
        return v_text, v_text
    if a_text.endswith(phrase.value):
        return v_text, a_text[: len(a_text) - len(phrase.value)] + v_text
    rng = typo_rng(seed, ent.id, attr.name, val.label, rep)
    return v_text, apply_typos(a_text, phrase.words, typo, rng)


@dataclass(frozen=True, slots=True)
class _Context:
    """What every case of one build_cases call shares."""

    templates: str
    domain: str
    k: int
    language: str
    perturbation: str | None
    system: str
    neutral_system: str

    def case(
        self,
        ent: Entity,
        rep: int,
        attr: str | None,
        label: str | None,
        prompt: str,
        group: str | None,
    ) -> PromptCase:
        ident = case_id(
            templates=self.templates,
            domain=self.domain,
            k=self.k,
            entity_id=ent.id,
            attribute=attr,
            value=label,
            language=self.language,
            perturbation=self.perturbation,
            repeat=rep,
        )
        return PromptCase(
            id=ident,
            system=self.system if attr is not None else self.neutral_system,
            prompt=prompt,
            entity=ent.name,
            entity_id=ent.id,
            attribute=attr,
            value=label,
            language=self.language,
            perturbation=self.perturbation,
            repeat=rep,
            domain=self.domain,
            k=self.k,
            templates=self.templates,
            group=group,
        )
