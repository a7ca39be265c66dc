"""Prompt template sets (system, neutral and conditioned prompts per language): ``natural``,
the published ``faireval`` / ``fairllm`` verbatim, ``lmrec``; a ``role=`` persona opens
the system message."""

from __future__ import annotations

import hashlib
import json
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.fileio import load_structured, read_text
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


def _check_template(text: Any, where: str, key: str, required: tuple[str, ...]) -> str:
    if not isinstance(text, str) or not text.strip():
        raise DataError(f"{where}: {key} must be a non-empty string; got {text!r}")
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
    except ValueError as exc:
        raise DataError(
            f"{where}: {key} is not a valid template ({exc}); write literal braces as {{{{ and }}}}"
        ) from exc
    unknown = sorted({f for f in fields if f not in PLACEHOLDERS})
    if unknown:
        raise DataError(
            f"{where}: {key} uses unknown placeholder(s) {unknown}; allowed: "
            f"{', '.join(sorted(PLACEHOLDERS))}"
        )
    missing = [r for r in required if r not in fields]
    if missing:
        raise DataError(f"{where}: {key} must contain {', '.join('{' + m + '}' for m in missing)}")
    return text


def _language_entry(code: str, raw: Any, where: str) -> LanguageTemplates:
    base = f"languages.{code}"
    if not isinstance(raw, dict):
        raise DataError(f"{where}: {base} must be a mapping with system, neutral, conditioned")
    allowed = {"system", "neutral_system", "request", "neutral", "conditioned", "domains"}
    allowed |= {"verbatim"}
    extra = sorted(set(raw) - allowed)
    if extra:
        raise DataError(f"{where}: {base} has unknown key(s) {extra}; allowed: {sorted(allowed)}")
    request = raw.get("request", "")
    if request:
        _check_template(request, where, f"{base}.request", ())
        if "{request}" in request or "{value}" in request or "{a_value}" in request:
            raise DataError(f"{where}: {base}.request may not contain {{request}} or a value")

    system = _check_template(raw.get("system"), where, f"{base}.system", ())
    neutral_system = raw.get("neutral_system")
    if neutral_system is not None:
        _check_template(neutral_system, where, f"{base}.neutral_system", ())
    verbatim = raw.get("verbatim", False)
    if not isinstance(verbatim, bool):
        raise DataError(f"{where}: {base}.verbatim must be true or false; got {verbatim!r}")
    neutral = _check_template(raw.get("neutral"), where, f"{base}.neutral", ("entity",))
    if "{value}" in neutral or "{a_value}" in neutral:
        raise DataError(f"{where}: {base}.neutral must not contain {{value}} or {{a_value}}")
    cond_raw = raw.get("conditioned")
    if isinstance(cond_raw, str):
        cond_raw = {"adjective": cond_raw, "noun": cond_raw}
    if not isinstance(cond_raw, dict) or not cond_raw:
        raise DataError(
            f"{where}: {base}.conditioned must be a template string or a mapping from form "
            f"({', '.join(VALUE_FORMS)}) to template; got {cond_raw!r}"
        )
    conditioned: dict[str, str] = {}
    for form, text in cond_raw.items():
        if form not in VALUE_FORMS:
            raise DataError(
                f"{where}: {base}.conditioned.{form}: unknown form; expected one of "
                f"{', '.join(VALUE_FORMS)}"
            )
        checked = _check_template(text, where, f"{base}.conditioned.{form}", ("entity",))
        if "{value}" not in checked and "{a_value}" not in checked:
            raise DataError(
                f"{where}: {base}.conditioned.{form} must contain {{value}} or {{a_value}}"
            )
        conditioned[form] = checked.replace("{request}", request)
    domains = raw.get("domains") or {}
    if not isinstance(domains, dict) or not all(isinstance(v, dict) for v in domains.values()):
        raise DataError(
            f"{where}: {base}.domains must map a domain to nouns, e.g. "
            "{book: {item: book, items: books, titles: book titles}}"
        )
    for dom, nouns in domains.items():
        bad = sorted(set(nouns) - (DOMAIN_KEYS - {"domain"}))
        if bad:
            raise DataError(
                f"{where}: {base}.domains.{dom} has unknown key(s) {bad}; allowed: "
                "item, items, titles, counter"
            )
    return LanguageTemplates(
        language=code,
        system=system,
        neutral=neutral.replace("{request}", request),
        conditioned=conditioned,
        domains={d: {k: str(v) for k, v in n.items()} for d, n in domains.items()},
        neutral_system=neutral_system,
        verbatim=verbatim,
    )


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
    extra = sorted(set(data) - {"name", "description", "languages"})
    if extra:
        raise DataError(
            f"{where}: unknown top-level key(s) {extra}; allowed: name, description, languages"
        )
    entries = {}
    for code, raw in langs.items():
        if code not in LANGUAGES:
            raise DataError(
                f"{where}: languages.{code}: unsupported language; expected one of "
                f"{', '.join(LANGUAGES)}"
            )
        entries[code] = _language_entry(code, raw, where)
    return TemplateSet(name=name, languages=entries, source=where)


@lru_cache(maxsize=8)
def _bundled(name: str) -> TemplateSet:
    node = resources.files("pytest_recfair.prompts").joinpath("data", "templates", f"{name}.yaml")
    data = yaml.safe_load(node.read_text(encoding="utf-8"))
    return templates_from_dict(data, f"bundled templates {name!r}")


def load_templates(source: str | Path | TemplateSet) -> TemplateSet:
    """A bundled set (``natural``, ``faireval``, ``fairllm``) or a template YAML file."""
    if isinstance(source, TemplateSet):
        return source
    if isinstance(source, str) and source.lower() in BUNDLED_TEMPLATES:
        return _bundled(source.lower())
    path = Path(source)
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise ConfigError(
            f"templates: {str(source)!r} is neither a bundled set "
            f"({', '.join(BUNDLED_TEMPLATES)}) nor a .yaml/.yml file"
        )
    if not path.is_file():
        raise DataError(f"templates file {str(path)!r} does not exist; check the path")
    where = f"templates file {str(path)!r}"
    text = read_text(path, where, encoding="utf-8")
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
