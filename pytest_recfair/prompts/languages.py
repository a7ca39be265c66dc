"""How a value is written: translation tables (no runtime translation), the grammar of
phrases (fr/es/de head noun + agreeing adjectives, zh modifiers + noun), seeded typos."""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from pytest_recfair.errors import ConfigError
from pytest_recfair.fileio import load_structured
from pytest_recfair.prompts.grids import Attribute, AttributeValue, attribute_order

LANGUAGES = ("en", "fr", "es", "de", "zh")

_WORD = re.compile(r"\w+", re.UNICODE)
_Entry = tuple[str, AttributeValue, Mapping[str, Any]]  # (attribute, value, its translation)


@dataclass(frozen=True)
class Language:
    code: str
    domains: Mapping[str, Mapping[str, str]]
    values: Mapping[tuple[str, str], Mapping[str, Any]]
    helper: Mapping[str, str]
    adjective_position: str


@dataclass(frozen=True)
class Phrase:
    """A value rendered for one language; ``words``: what typos may edit (never articles
    or helper nouns such as "personne")."""

    value: str
    a_value: str
    words: tuple[str, ...]


@lru_cache(maxsize=8)
def load_language(code: str) -> Language:
    if code not in LANGUAGES:
        raise ConfigError(
            f"language: {code!r} is not supported; choose one of {', '.join(LANGUAGES)}"
        )
    node = resources.files("pytest_recfair.prompts").joinpath("data", "languages", f"{code}.yaml")
    data = load_structured(node.read_text(encoding="utf-8"), f"language {code!r}", fast=True)
    values = {
        (attr.casefold(), label.casefold()): entry
        for attr, labels in (data.get("values") or {}).items()
        for label, entry in labels.items()
    }
    position = data.get("adjective_position", "after")
    return Language(code, data.get("domains") or {}, values, data.get("helper") or {}, position)


def domain_nouns(
    language: str, domain: str, overrides: Mapping[str, Mapping[str, str]] | None = None
) -> dict[str, str]:
    """Nouns for ``{domain}``, ``{item}``, ``{items}``, ``{titles}``, ``{counter}``:
    template-set overrides, then the language table, then (English) the domain word."""
    if not isinstance(domain, str) or not domain.strip():
        raise ConfigError(f"domain must be a non-empty string such as 'movie'; got {domain!r}")
    lang = load_language(language)
    entry = (overrides or {}).get(domain) or lang.domains.get(domain)
    if entry is None:
        if language != "en":
            raise ConfigError(
                f"domain {domain!r} has no {language} nouns in the bundled tables (known: "
                f"{', '.join(sorted(lang.domains))}); add 'domains: {{{domain}: {{items: ...}}}}' "
                f"under languages.{language} in your template YAML, or use language='en'"
            )
        ending = "es" if re.search(r"(s|x|z|ch|sh)$", domain) else "s"  # category: categories
        plural = re.sub(r"(?<=[^aeiou])y$", "ie", domain) + ending
        entry = {"item": domain, "items": plural, "titles": f"{domain} titles"}
    nouns = {"domain": domain, "item": domain, "items": domain, "titles": domain, "counter": ""}
    nouns.update({k: str(v) for k, v in entry.items()})
    return nouns


def _words(*texts: str) -> tuple[str, ...]:
    return tuple(w for t in texts for w in _WORD.findall(t))


def render_value(attribute: Attribute, value: AttributeValue, language: str) -> Phrase:
    """The phrase a value contributes to a prompt in ``language``."""
    if language == "en":
        return Phrase(value.text, value.with_article, _words(value.bare_text))
    if value.form == "name":  # a first name reads the same in every language
        return Phrase(value.text, value.text, _words(value.text))
    lang = load_language(language)
    parts = value.parts or ((attribute.name, value),)  # one pair unless intersectional
    entries = [(name, v, _entry(lang, name, v)) for name, v in parts]
    free = [e for _, _, e in entries if "text" in e]
    if free:
        if len(entries) > 1:
            raise ConfigError(
                f"{language}: cannot cross free-text translations ({value.label!r}); "
                "give adjective/noun forms (m/f, noun) instead"
            )
        text = str(free[0]["text"])
        return Phrase(text, text, _words(text))
    if language == "zh":  # modifiers in adjective order, then the head noun
        ordered = sorted(entries, key=lambda e: attribute_order(e[0]))
        head = ordered[-1][2]
        mods = [str(e.get("mod", e.get("noun", ""))) for _, _, e in ordered[:-1]]
        noun = str(head.get("noun", head.get("mod", "")))
        text = "".join([*mods, noun])
        return Phrase(text, text, (*mods, noun))
    return _compose_gendered(lang, entries, value.label)


def _entry(lang: Language, attr: str, value: AttributeValue) -> Mapping[str, Any]:
    own = value.i18n.get(lang.code)  # the grid's own forms win over the bundled tables
    entry = own or lang.values.get((attr.casefold(), value.label.casefold()))
    if entry is None:
        raise ConfigError(
            f"value {value.label!r} of attribute {attr!r} has no {lang.code} translation in "
            f"the project's tables; add 'i18n: {{{lang.code}: {{m: ..., f: ...}}}}' (or "
            f"noun/gender, or text) to that value in your grid YAML, or use language='en'"
        )
    return entry


def _compose_gendered(lang: Language, entries: Sequence[_Entry], label: str) -> Phrase:
    nouns = [(n, e) for n, _, e in entries if "noun" in e]
    adjs = [(n, e) for n, _, e in entries if "noun" not in e]
    selector: str | None = None  # a gender value crossed with another noun picks its form
    if len(nouns) > 1:
        genders = [(n, e) for n, e in nouns if n.casefold() == "gender"]
        others = [(n, e) for n, e in nouns if n.casefold() != "gender"]
        if len(others) != 1 or len(genders) != 1:
            raise ConfigError(
                f"{lang.code}: cannot combine the nouns of {label!r} into one phrase; cross "
                "at most one noun attribute (e.g. occupation) with gender and adjectives"
            )
        selector = str(genders[0][1].get("gender", "m"))
        nouns = others
    head_words: tuple[str, ...] = ()
    if nouns:
        entry = nouns[0][1]
        if selector == "f" and entry.get("noun_f"):
            head, gender = str(entry["noun_f"]), "f"
        elif selector == "m":
            head, gender = str(entry["noun"]), "m"
        else:
            head, gender = str(entry["noun"]), str(entry.get("gender", "m"))
        head_words = _words(head)
    else:
        head = str(lang.helper.get("noun", ""))
        gender = str(lang.helper.get("gender", "f"))
    ordered = sorted(adjs, key=lambda a: attribute_order(a[0]))
    forms = [(str(e.get(gender, e.get("m", ""))), bool(e.get("post"))) for _, e in ordered]
    before = [f for f, post in forms if lang.adjective_position == "before" and not post]
    after = [f for f, post in forms if lang.adjective_position != "before" or post]
    conj = {"fr": "et", "es": "y"}.get(lang.code)
    if conj and len(after) > 1:
        after = [*after[:-2], f"{after[-2]} {conj} {after[-1]}"]
    text = " ".join(p for p in [*before, head, *after] if p)
    words = head_words + _words(*(f for f, _ in forms))
    return Phrase(text, text, words)


KINDS = ("swap", "drop", "insert", "neighbour")

# Adjacent keys on a QWERTY keyboard: each row sits half a key right of the one above, so
# "g" touches f, h (same row), t, y (above) and v, b (below).
_KEYS = {
    ch: (r, c)
    for r, row in enumerate(("qwertyuiop", "asdfghjkl", "zxcvbnm"))
    for c, ch in enumerate(row)
}
_NEAR = {-1: (0, 1), 0: (-1, 1), 1: (-1, 0)}  # row delta -> allowed column deltas
NEIGHBOURS = {  # (not the key itself: column delta 0 is never allowed on its own row)
    ch: "".join(sorted(o for o, (r2, c2) in _KEYS.items() if c2 - c in _NEAR.get(r2 - r, ())))
    for ch, (r, c) in _KEYS.items()
}


@dataclass(frozen=True)
class Typo:
    edits: int = 1
    kinds: tuple[str, ...] = KINDS

    @property
    def spec(self) -> str:
        """Canonical spec string, recorded in audit metadata and case ids."""
        out = "typo" if self.edits == 1 else f"typo:{self.edits}"
        if tuple(self.kinds) != KINDS:
            out += ":" + "+".join(self.kinds)
        return out


def parse_perturbation(value: str | Typo | None) -> Typo | None:
    """``None`` / ``"none"`` -> no perturbation; ``"typo[:N][:kind+kind]"`` -> Typo."""
    if value is None or isinstance(value, Typo):
        return value
    if not isinstance(value, str):
        raise ConfigError(f"perturbation: expected None or a string like 'typo'; got {value!r}")
    text = value.strip().lower()
    if text in ("", "none"):
        return None
    head, *rest = text.split(":")
    edits = 1
    kinds: tuple[str, ...] = KINDS
    if head != "typo" or len(rest) > 2:
        raise ConfigError(
            f"perturbation: {value!r} is not understood; expected 'typo', 'typo:N', "
            f"'typo:kind+kind' or 'typo:N:kind+kind' with kinds from {', '.join(KINDS)}"
        )
    for part in rest:
        if part.isdigit():
            edits = int(part)
        else:
            chosen = tuple(k.strip() for k in part.split("+"))
            unknown = [k for k in chosen if k not in KINDS]
            if unknown:
                raise ConfigError(
                    f"perturbation: unknown typo kind(s) {unknown} in {value!r}; "
                    f"choose from {', '.join(KINDS)}"
                )
            kinds = chosen
    if edits < 1:
        raise ConfigError(f"perturbation: the number of edits must be >= 1; got {value!r}")
    return Typo(edits=edits, kinds=kinds)


def typo_rng(seed: int, *key: object) -> random.Random:
    """An RNG seeded from (seed, key...) via SHA-256: stable across runs and processes."""
    material = "\x1f".join(str(k) for k in (seed, *key)).encode("utf-8")
    return random.Random(int.from_bytes(hashlib.sha256(material).digest()[:8], "big"))


def _edit(word: str, kind: str, rng: random.Random) -> str:
    n = len(word)
    if kind == "swap":
        spots = [i for i in range(n - 1) if word[i] != word[i + 1]]
        if spots:
            i = rng.choice(spots)
            return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    elif kind == "drop" and n >= 3:
        i = rng.randrange(n)
        return word[:i] + word[i + 1 :]
    elif kind in ("insert", "neighbour"):  # a QWERTY neighbour added, or swapped in
        mapped = [i for i, c in enumerate(word) if c.lower() in NEIGHBOURS]
        if places := list(range(n)) if kind == "insert" else mapped:
            i = rng.choice(places)
            near = NEIGHBOURS.get(word[i].lower())
            new = rng.choice(near) if near else word[i]  # doubled key when there is no map
            new = new.upper() if word[i].isupper() else new
            return word[: i + (kind == "insert")] + new + word[i + 1 :]
    return word


def _mutate(word: str, typo: Typo, rng: random.Random) -> str:
    # Some kinds cannot apply to a given word (swap on "oo"); try others before giving up.
    kinds = list(typo.kinds)
    rng.shuffle(kinds)
    for kind in [*kinds, "insert"]:
        out = _edit(word, kind, rng)
        if out != word:
            return out
    return word


def apply_typos(text: str, words: Sequence[str], typo: Typo, rng: random.Random) -> str:
    """Apply ``typo.edits`` edits to ``words`` inside ``text`` (nothing else changes)."""
    targets = [w for w in dict.fromkeys(words) if w and w in text]
    targets = [w for w in targets if len(w) >= 3] or targets
    if not targets:
        return text
    edited = {w: w for w in targets}
    for _ in range(typo.edits):
        w = rng.choice(targets)
        edited[w] = _mutate(edited[w], typo, rng)
    if all(edited[w] == w for w in targets):
        # Two swaps can cancel out; a perturbed case must differ from the clean one.
        w = rng.choice(targets)
        edited[w] = _mutate(w, typo, rng)
    # Replace whole words only, left to right, so "Asian" inside "Asian-born" is not hit twice.
    out, pos = [], 0
    for w in sorted(targets, key=text.index):
        i = text.find(w, pos)
        if i < 0:
            continue
        out += [text[pos:i], edited[w]]
        pos = i + len(w)
    out.append(text[pos:])
    return "".join(out)
