"""Prompt template sets (system, neutral and conditioned prompts per language): ``natural``,
the published ``faireval`` / ``fairllm`` verbatim, ``lmrec``; a ``role=`` persona opens
the system message."""

from __future__ import annotations

import hashlib
import json
import re
import string
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.fileio import load_structured, read_input
from pytest_recfair.prompts.languages import LANGUAGES, domain_nouns
from pytest_recfair.vocab import VALUE_FORMS

BUNDLED_TEMPLATES = ("natural", "faireval", "fairllm", "lmrec")

DOMAIN_KEYS = frozenset({"domain", "item", "items", "titles", "counter"})

PLACEHOLDERS = frozenset({"entity", "k", "value", "a_value", "request"} | DOMAIN_KEYS)

_FIELD = re.compile(r"\{\{|\}\}|\{(\w+)\}")

# French elision after filling: "de Adele" -> "d'Adele", "que enseignant" -> "qu'enseignant".
# Lowercase h only: names such as "Hitchcock" keep "de".
_ELISION = re.compile(r"\b(de|que) (?=[aeiouàâäéèêëîïôöûüAEIOUÀÂÄÉÈÊËÎÏÔÖÛÜh])")


@dataclass(frozen=True)
class LanguageTemplates:
    language: str
    system: str
    neutral: str
    conditioned: Mapping[str, str]
    domains: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: The neutral prompt's own system message (FairEval's French run asked it in English).
    neutral_system: str | None = None
    #: Values as the grid writes them (untranslated), no French elision ("de Adele" stays).
    verbatim: bool = False

    def conditioned_for(self, form: str, set_name: str) -> str:
        template = self.conditioned.get(form)
        if template is None:
            raise ConfigError(
                f"template set {set_name!r} ({self.language}) has no conditioned template for "
                f"values of form {form!r} (it has: {', '.join(self.conditioned)}); add "
                f"'conditioned: {{{form}: ...}}' to the set, or pick a grid/attributes "
                "whose values it covers"
            )
        return template


@dataclass(frozen=True)
class TemplateSet:
    name: str
    languages: Mapping[str, LanguageTemplates]
    source: str = field(default="", compare=False)

    def language(self, code: str) -> LanguageTemplates:
        found = self.languages.get(code)
        if found is None:
            hint = " (the 'natural' set has fr, es, de and zh)" if self.name != "natural" else ""
            raise ConfigError(
                f"template set {self.name!r} has no {code!r} templates; it has "
                f"{', '.join(self.languages)}{hint}"
            )
        return found


def _check_template(
    text: Any, where: str, key: str, need: Sequence[Sequence[str]] = (), banned: Sequence[str] = ()
) -> str:
    """``text`` if a valid template with one of each ``need`` group and no ``banned``."""
    if not isinstance(text, str) or not text.strip():
        raise DataError(f"{where}: {key} must be a non-empty string; got {text!r}")
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}
    except ValueError as exc:
        raise DataError(
            f"{where}: {key} is not a valid template ({exc}); write literal braces as {{{{ and }}}}"
        ) from exc
    unknown = sorted(fields - PLACEHOLDERS)
    if unknown:
        raise DataError(
            f"{where}: {key} uses unknown placeholder(s) {unknown}; allowed: "
            f"{', '.join(sorted(PLACEHOLDERS))}"
        )
    for verb, names in [*(("must", n) for n in need if not fields & set(n)), ("must not", banned)]:
        if verb == "must" or fields & set(names):
            shown = " or ".join("{" + n + "}" for n in names)
            raise DataError(f"{where}: {key} {verb} contain {shown}")
    return text


def _only(data: dict[Any, Any], allowed: Collection[str], where: str, what: str) -> None:
    if extra := sorted(set(data) - set(allowed)):
        raise DataError(f"{where}: {what}: unknown key(s) {extra}; allowed: {', '.join(allowed)}")


def _language_entry(code: str, raw: Any, where: str) -> LanguageTemplates:
    base = f"languages.{code}"
    if not isinstance(raw, dict):
        raise DataError(f"{where}: {base} must be a mapping with system, neutral, conditioned")
    keys = ("system", "neutral_system", "request", "neutral", "conditioned", "domains", "verbatim")
    _only(raw, keys, where, base)
    request = raw.get("request", "")
    if request:
        _check_template(request, where, f"{base}.request", banned=("request", "value", "a_value"))
    system = _check_template(raw.get("system"), where, f"{base}.system")
    neutral_system = raw.get("neutral_system")
    if neutral_system is not None:
        _check_template(neutral_system, where, f"{base}.neutral_system")
    verbatim = raw.get("verbatim", False)
    if not isinstance(verbatim, bool):
        raise DataError(f"{where}: {base}.verbatim must be true or false; got {verbatim!r}")
    neutral = _check_template(
        raw.get("neutral"), where, f"{base}.neutral", [["entity"]], ("value", "a_value")
    )
    cond_raw = raw.get("conditioned")
    if isinstance(cond_raw, str):
        cond_raw = {"adjective": cond_raw, "noun": cond_raw}
    if not isinstance(cond_raw, dict) or not cond_raw:
        raise DataError(
            f"{where}: {base}.conditioned must be a template string or a mapping from form "
            f"({', '.join(VALUE_FORMS)}) to template; got {cond_raw!r}"
        )
    _only(cond_raw, VALUE_FORMS, where, at := f"{base}.conditioned")
    need = (["entity"], ["value", "a_value"])
    conditioned = {f: _check_template(t, where, f"{at}.{f}", need) for f, t in cond_raw.items()}
    conditioned = {f: t.replace("{request}", request) for f, t in conditioned.items()}
    domains = raw.get("domains") or {}
    if not isinstance(domains, dict) or not all(isinstance(v, dict) for v in domains.values()):
        raise DataError(
            f"{where}: {base}.domains must map a domain to nouns, e.g. "
            "{book: {item: book, items: books, titles: book titles}}"
        )
    for dom, nouns in domains.items():
        _only(nouns, ("item", "items", "titles", "counter"), where, f"{base}.domains.{dom}")
    nouns = {d: {k: str(v) for k, v in n.items()} for d, n in domains.items()}
    neutral = neutral.replace("{request}", request)
    return LanguageTemplates(code, system, neutral, conditioned, nouns, neutral_system, verbatim)


def templates_from_dict(data: Any, where: str = "templates") -> TemplateSet:
    """Validate a parsed template-set mapping (``where`` names it in errors)."""
    if not isinstance(data, dict):
        raise DataError(f"{where}: expected a mapping with 'name' and 'languages'; got {data!r}")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise DataError(f"{where}: 'name' must be a non-empty string; got {name!r}")
    langs = data.get("languages")
    if not isinstance(langs, dict) or not langs:
        raise DataError(
            f"{where}: 'languages' must map a language code ({', '.join(LANGUAGES)}) to "
            f"its templates; got {langs!r}"
        )
    _only(data, ("name", "description", "languages"), where, "(top level)")
    _only(langs, LANGUAGES, where, "languages")
    entries = {code: _language_entry(code, raw, where) for code, raw in langs.items()}
    return TemplateSet(name=name, languages=entries, source=where)


@lru_cache(maxsize=8)
def _bundled(name: str) -> TemplateSet:
    node = resources.files("pytest_recfair.prompts").joinpath("data", "templates", f"{name}.yaml")
    where = f"bundled templates {name!r}"
    return templates_from_dict(load_structured(node.read_text("utf-8"), where, fast=True), where)


def load_templates(source: str | Path | TemplateSet) -> TemplateSet:
    """A bundled set (``natural``, ``faireval``, ``fairllm``) or a template YAML file."""
    if isinstance(source, TemplateSet):
        return source
    if isinstance(source, str) and source.lower() in BUNDLED_TEMPLATES:
        return _bundled(source.lower())
    text, where, _ = read_input(source, "templates", BUNDLED_TEMPLATES, (".yaml", ".yml"))
    return templates_from_dict(load_structured(text, where), where)


@lru_cache(maxsize=512)
def _parts(template: str) -> tuple[tuple[str, str | None], ...]:
    """(text, placeholder or None) pieces, parsed once (a few templates fill 31,000 prompts)."""
    parts: list[tuple[str, str | None]] = []
    pos = 0
    for m in _FIELD.finditer(template):
        parts.append((template[pos : m.start()], None))
        key = m.group(1)
        parts.append((m.group(0)[0], None) if key is None else (m.group(0), key))
        pos = m.end()
    parts.append((template[pos:], None))
    return tuple(p for p in parts if p[0])


def fill(template: str, values: Mapping[str, str], language: str, *, elide: bool = True) -> str:
    """Substitute placeholders in one pass (braces in entity names are safe); French
    gets elision ("de Adele" -> "d'Adele") unless ``elide`` is False (verbatim sets)."""
    text = "".join(raw if key is None else values.get(key, raw) for raw, key in _parts(template))
    return _elided(text) if language == "fr" and elide else text


def filler(
    template: str, values: Mapping[str, str], language: str, *, elide: bool = True
) -> Callable[[str], str]:
    """``fill`` of ``values`` and an entity's name given later: the rest is filled once, so
    each of an audit's 31,000 prompts is one join (the same text: one pass, then elision)."""
    pieces: list[str] = []
    piece: list[str] = []
    for raw, key in _parts(template):
        if key == "entity":
            pieces.append("".join(piece))
            piece = []
        else:
            piece.append(raw if key is None else values.get(key, raw))
    pieces.append("".join(piece))
    if language == "fr" and elide:
        return lambda name: _elided(name.join(pieces))
    return lambda name: name.join(pieces)


def _elided(text: str) -> str:
    return _ELISION.sub(lambda m: "d'" if m.group(1) == "de" else "qu'", text)


def templates_digest(templates: str | Path | TemplateSet, domain: str, language: str) -> str:
    """SHA-256 (hex) of everything that shapes prompts for one (set, domain, language)."""
    tset = load_templates(templates)
    lt = tset.language(language)
    payload = {
        "name": tset.name,
        "language": language,
        "system": lt.system,
        **({"neutral_system": lt.neutral_system} if lt.neutral_system is not None else {}),
        **({"verbatim": True} if lt.verbatim else {}),
        "neutral": lt.neutral,
        "conditioned": dict(sorted(lt.conditioned.items())),
        "nouns": domain_nouns(language, domain, lt.domains),
    }
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def persona_system(role: str, system: str | None) -> str:
    """``You are a(n) {role}.`` opening the case's own system message (the templates' or
    the ``system`` setting's), so the only difference from the neutral audit is the role."""
    name = " ".join(role.split())
    article = "an" if name[:1].casefold() in "aeiou" else "a"
    head = f"You are {article} {name}."
    return f"{head} {system}" if system else head
