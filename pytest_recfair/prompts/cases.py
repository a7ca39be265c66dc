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
from pytest_recfair.prompts.templates import TemplateSet, fill, load_templates

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
    payload = json.dumps(
        [templates, domain, k, entity_id, attribute, value, language, perturbation, repeat],
        ensure_ascii=False,
        separators=(",", ":"),
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
    if entities is None or isinstance(entities, str | bytes):
        raise ConfigError(
            "build_cases: entities must be a list of Entity objects or names, e.g. "
            "load_seeds('directors') or ['Adele']; got "
            f"{entities!r}"
        )
    ents = [as_entity(e, domain) for e in entities]
    if not ents:
        raise ConfigError("build_cases: entities is empty; pass at least one entity")
    k = _positive_int("k", k)
    repeats = _positive_int("repeats", repeats)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"build_cases: seed must be an integer; got {seed!r}")
    the_grid = load_grid(grid)
    tset = load_templates(templates)
    lt = tset.language(language)
    nouns = domain_nouns(language, domain, lt.domains)
    typo = parse_perturbation(perturbation)
    pert = typo.spec if typo else None
    if attributes is None:
        chosen = list(the_grid.attributes)
    elif isinstance(attributes, str):
        raise ConfigError(
            f"build_cases: attributes must be a list of names, not a string; "
            f"use attributes=[{attributes!r}]"
        )
    else:
        chosen = [the_grid.attribute(a) for a in attributes]
    # Render each value once; only perturbation depends on the entity and repeat.
    rendered: list[tuple[Attribute, AttributeValue, Phrase, str]] = []
    for attr in chosen:
        for val in attr.values:
            # verbatim: the grid's text as written (what the English path does), untranslated
            phrase = render_value(attr, val, "en" if lt.verbatim else language)
            rendered.append((attr, val, phrase, lt.conditioned_for(val.form, tset.name)))
    # A user system message is used verbatim except for {domain}.
    elide = not lt.verbatim
    if system is None:
        sys_text = fill(lt.system, nouns, language, elide=elide)
    else:
        sys_text = system.replace("{domain}", domain)
    neutral_sys = sys_text
    if system is None and lt.neutral_system is not None:
        neutral_sys = fill(lt.neutral_system, nouns, language, elide=elide)
    base = {**nouns, "k": str(k)}

    def make(
        ent: Entity, rep: int, attr: str | None, label: str | None, prompt: str, group: str | None
    ) -> PromptCase:
        ident = case_id(
            templates=tset.name,
            domain=domain,
            k=k,
            entity_id=ent.id,
            attribute=attr,
            value=label,
            language=language,
            perturbation=pert,
            repeat=rep,
        )
        return PromptCase(
            id=ident,
            system=sys_text if attr is not None else neutral_sys,
            prompt=prompt,
            entity=ent.name,
            entity_id=ent.id,
            attribute=attr,
            value=label,
            language=language,
            perturbation=pert,
            repeat=rep,
            domain=domain,
            k=k,
            templates=tset.name,
            group=group,
        )

    cases: list[PromptCase] = []
    for ent in ents:
        values = {**base, "entity": ent.name}
        neutral_prompt = fill(lt.neutral, values, language, elide=elide)
        for rep in range(repeats):
            cases.append(make(ent, rep, None, None, neutral_prompt, None))
            for attr, val, phrase, template in rendered:
                v_text, a_text = phrase.value, phrase.a_value
                if typo is not None:
                    rng = typo_rng(seed, ent.id, attr.name, val.label, rep)
                    v_text = apply_typos(phrase.value, phrase.words, typo, rng)
                    # {a_value} is {value} with an article in front: reuse the same edits.
                    if a_text == phrase.value:
                        a_text = v_text
                    elif a_text.endswith(phrase.value):
                        a_text = a_text[: len(a_text) - len(phrase.value)] + v_text
                    else:
                        rng = typo_rng(seed, ent.id, attr.name, val.label, rep)
                        a_text = apply_typos(a_text, phrase.words, typo, rng)
                filled = {**values, "value": v_text, "a_value": a_text}
                prompt = fill(template, filled, language, elide=elide)
                cases.append(make(ent, rep, attr.name, val.label, prompt, val.group))
    return cases
