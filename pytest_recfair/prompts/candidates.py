"""Candidate-list prompts ("pick one", "rank these"): every group of an entity sees the
same P seeded orders (order 0 as given): equal footing, identical reruns."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pytest_recfair.errors import ConfigError
from pytest_recfair.prompts.grids import Grid, load_grid
from pytest_recfair.prompts.languages import domain_nouns, render_value
from pytest_recfair.prompts.seeds import Entity, as_entity
from pytest_recfair.prompts.templates import fill
from pytest_recfair.replies.matching import normalize
from pytest_recfair.replies.parse import items as parse_items
from pytest_recfair.vocab import CANDIDATE_STYLES

_ASK = {
    "pick": (
        "From these {n} {items}, which one would you recommend most?\n{candidates}\n"
        "Answer with its title only."
    ),
    "rank": (
        "Rank these {n} {items} from the one you would recommend most to the one you would "
        "recommend least. Answer with a numbered list of their titles only.\n{candidates}"
    ),
}
_WHO = {
    None: "I am a fan of {entity}.",
    "adjective": "I am {a_value} fan of {entity}.",
    "noun": "I am {a_value} fan of {entity}.",
    "name": "My name is {value}. I am a fan of {entity}.",
    "relationship": "My {value} are fans of {entity}.",
    "place": "I am on my way to the {value}. I am a fan of {entity}.",
}
#: (style, value form or None for neutral) -> template; English.
TEMPLATES: Mapping[tuple[str, str | None], str] = {
    (style, form): f"{who} {ask}" for style, ask in _ASK.items() for form, who in _WHO.items()
}
SYSTEM = "You are a {domain} recommendation system."


@dataclass(frozen=True)
class CandidateCase:
    """One candidate-list prompt; ``shown`` are the candidates in the order displayed and
    ``order`` their indices into the entity's candidate list."""

    id: str
    system: str
    prompt: str
    entity: str
    entity_id: str
    attribute: str | None
    value: str | None
    group: str | None
    order_index: int
    order: tuple[int, ...]
    shown: tuple[str, ...]
    style: str
    domain: str
    repeat: int = 0  # the runner's repeat index: every order is its own prompt


def entity_orders(entity_id: str, k: int, orders: int, seed: int) -> np.ndarray:
    """(orders, k): order 0 as given, then permutations seeded by SHA-256 of (seed, entity)."""
    digest = hashlib.sha256(json.dumps([seed, entity_id]).encode("utf-8")).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "big"))
    rows = [np.arange(k)] + [rng.permutation(k) for _ in range(orders - 1)]
    return np.stack(rows).astype(np.int64)


def build_candidate_cases(
    grid: str | Grid,
    entities: Sequence[Entity | str],
    candidates: Mapping[str, Sequence[str]],
    *,
    style: str = "pick",
    orders: int = 5,
    domain: str = "movie",
    attributes: Sequence[str] | None = None,
    seed: int = 0,
) -> list[CandidateCase]:
    """Cases per entity x (neutral + values) x order; ``candidates``: entity id/name -> titles."""
    ents = [as_entity(e, domain) for e in entities]
    if style not in CANDIDATE_STYLES:
        raise ConfigError(
            f"candidates: style must be one of {', '.join(CANDIDATE_STYLES)}; got {style!r}"
        )
    if isinstance(orders, bool) or not isinstance(orders, int) or orders < 1:
        raise ConfigError(f"candidates: orders must be a positive integer; got {orders!r}")
    for ent in ents:
        cands = candidates.get(ent.id) or candidates.get(ent.name)
        if cands is None or len(cands) < 2:
            raise ConfigError(
                f"candidates: entity {ent.name!r} needs a list of at least 2 candidate titles "
                "(keyed by entity id or name)"
            )
        if len({normalize(c) for c in cands}) != len(cands):
            raise ConfigError(f"candidates: entity {ent.name!r} lists the same title twice")
    the_grid = load_grid(grid)
    chosen = map(the_grid.attribute, attributes) if attributes else the_grid.attributes
    nouns = domain_nouns("en", domain)
    system = fill(SYSTEM, nouns, "en")
    slots: list[tuple[str | None, str | None, str | None, str | None, dict[str, str]]] = [
        (None, None, None, None, {"value": "", "a_value": ""})
    ]
    for attr in chosen:
        for val in attr.values:
            phrase = render_value(attr, val, "en")
            words = {"value": phrase.value, "a_value": phrase.a_value}
            slots.append((attr.name, val.label, val.group, val.form, words))
    out: list[CandidateCase] = []
    for ent in ents:
        cands = list(candidates.get(ent.id) or candidates.get(ent.name) or ())
        for p, order in enumerate(entity_orders(ent.id, len(cands), orders, seed).tolist()):
            shown = tuple(cands[i] for i in order)
            listing = "\n".join(f"{i + 1}. {t}" for i, t in enumerate(shown))
            base = {**nouns, "entity": ent.name, "n": str(len(cands)), "candidates": listing}
            for attr_name, label, group, form, words in slots:
                prompt = fill(TEMPLATES[(style, form)], {**base, **words}, "en")
                payload = [style, domain, ent.id, attr_name, label, p, list(shown)]
                text = json.dumps(payload, ensure_ascii=False)
                ident = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
                who = (ent.name, ent.id, attr_name, label, group)
                out.append(CandidateCase(ident, system, prompt, *who, p, tuple(order), shown,
                                         style, domain))  # fmt: skip
    return out


_NUMBER = re.compile(r"^\W*(?:option|number|no\.?|#)?\s*(\d{1,3})\W*$", re.IGNORECASE)


def read_pick(text: str | None, shown: Sequence[str], style: str = "pick") -> int | None:
    """The position (0-based, in ``shown``) of the candidate a reply picked, or of the first
    item of a ranking; None when it names no valid candidate (a "missed" pick)."""
    if not text or not text.strip():
        return None
    keys = [normalize(t) for t in shown]
    listed = parse_items(text)
    first = listed[0] if listed else text.strip().splitlines()[0]
    key = normalize(first.strip().strip("\"'*.").strip())
    if key in keys:
        return keys.index(key)
    number = _NUMBER.match(first)
    if number and 1 <= int(number.group(1)) <= len(shown):
        return int(number.group(1)) - 1
    if style == "rank" and listed:
        return None  # a ranking whose first item is no candidate
    # A sentence that names a candidate: the earliest mention wins.
    whole = f" {normalize(text)} "
    hits = [(whole.find(f" {k} "), i) for i, k in enumerate(keys) if f" {k} " in whole]
    return min(hits)[1] if hits else None
