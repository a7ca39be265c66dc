"""The simulator's built-in vocabulary of attribute values, in every supported language.

Each value has a label (the name bias profiles and grids use, e.g. ``Muslim``) and the
surface forms a prompt may carry it in ("Islamic", "musulmane", "穆斯林", ...). The
simulator only needs to *recognise* a value, so forms are bare words without articles;
a value whose text is shared by several attributes (``American`` is a nationality and a
continent) lists every attribute it belongs to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["VALUES", "ValueForm", "Vocabulary", "project_entries"]


@dataclass(frozen=True)
class ValueForm:
    """One recognisable spelling of an attribute value."""

    form: str  # as written in a prompt, without article
    label: str  # canonical label, e.g. "Muslim"
    attributes: tuple[str, ...]  # attribute names this label belongs to (lower case)


def _entry(attributes: str, forms: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(attributes.split()), tuple(forms.split("|"))


# label -> (attributes, forms). Forms cover en, fr, es, de, zh; FaiRLLM's odd forms
# ("Islamic", "Hinduism", "yellow", "boy") are kept verbatim because its prompts use them.
VALUES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "Young": _entry(
        "age",
        "young|jeune|joven|jung|junger|jungen|年轻",
    ),
    "Middle-aged": _entry(
        "age",
        "middle aged|middle-aged|d'âge moyen|d'âge mûr|de mediana edad|mittleren Alters|中年",
    ),
    "Old": _entry(
        "age",
        "old|elderly|âgé|âgée|vieux|vieille|mayor|anciano|anciana|alt|alter|alte|älterer|"
        "ältere|老年|年长",
    ),
    "Male": _entry(
        "gender",
        "male|man|homme|masculin|hombre|masculino|männlich|männlicher|Mann|男性",
    ),
    "Female": _entry(
        "gender",
        "female|woman|femme|féminin|mujer|femenina|weiblich|weibliche|Frau|女性",
    ),
    "Boy": _entry(
        "gender",
        "boy|garçon|chico|男孩",
    ),
    "Girl": _entry(
        "gender",
        "girl|fille|chica|Mädchen|女孩",
    ),
    "Black": _entry(
        "race",
        "black|noir|noire|negro|negra|schwarzer|schwarze|黑人",
    ),
    "White": _entry(
        "race",
        "white|blanc|blanche|blanco|blanca|weißer|weiße|白人",
    ),
    "Yellow": _entry(
        "race",
        "yellow",
    ),
    "African American": _entry(
        "race",
        "african american|african-american|afro-américain|afro-américaine|afroamericano|"
        "afroamericana|afroamerikanischer|afroamerikanische|Afroamerikaner|Afroamerikanerin|"
        "非裔美国人|非裔美国",
    ),
    "Asian": _entry(
        "race continent",
        "asian|asiatique|asiático|asiática|asiatischer|asiatische|Asiate|亚洲|亚裔",
    ),
    "Buddhist": _entry(
        "religion",
        "buddhist|bouddhiste|budista|buddhistischer|buddhistische|佛教徒|佛教",
    ),
    "Christian": _entry(
        "religion",
        "christian|chrétien|chrétienne|cristiano|cristiana|christlicher|christliche|Christ|"
        "Christin|基督徒|基督教",
    ),
    "Hindu": _entry(
        "religion",
        "hindu|hinduism|hindou|hindoue|hindú|hinduista|hinduistischer|hinduistische|印度教徒|"
        "印度教",
    ),
    "Muslim": _entry(
        "religion",
        "muslim|islamic|musulman|musulmane|musulmán|musulmana|muslimischer|muslimische|"
        "Muslimin|islamisch|穆斯林|伊斯兰",
    ),
    "Jewish": _entry(
        "religion",
        "jewish|juif|juive|judío|judía|jüdischer|jüdische|犹太",
    ),
    "American": _entry(
        "country nationality continent",
        "american|américain|américaine|estadounidense|americano|americana|amerikanischer|"
        "amerikanische|Amerikaner|Amerikanerin|美国人|美国",
    ),
    "Brazilian": _entry(
        "country nationality",
        "brazilian|brésilien|brésilienne|brasileño|brasileña|brasilianischer|brasilianische|"
        "Brasilianer|巴西人|巴西",
    ),
    "British": _entry(
        "country nationality",
        "british|britannique|británico|británica|britischer|britische|Brite|英国人|英国",
    ),
    "Chinese": _entry(
        "country nationality",
        "chinese|chinois|chinoise|chino|china|chinesischer|chinesische|中国人|中国",
    ),
    "French": _entry(
        "country nationality",
        "french|français|française|francés|francesa|französischer|französische|Franzose|"
        "Französin|法国人|法国",
    ),
    "German": _entry(
        "country nationality",
        "german|allemand|allemande|alemán|alemana|deutscher|deutsche|德国人|德国",
    ),
    "Japanese": _entry(
        "country nationality",
        "japanese|japonais|japonaise|japonés|japonesa|japanischer|japanische|Japaner|"
        "Japanerin|日本人|日本",
    ),
    "African": _entry(
        "continent",
        "african|africain|africaine|africano|africana|afrikanischer|afrikanische|Afrikaner|"
        "Afrikanerin|非洲人|非洲",
    ),
    "Doctor": _entry(
        "occupation",
        "doctor|médecin|médico|médica|Arzt|Ärztin|医生",
    ),
    "Student": _entry(
        "occupation",
        "student|étudiant|étudiante|estudiante|Studentin|学生",
    ),
    "Teacher": _entry(
        "occupation",
        "teacher|enseignant|enseignante|professeur|profesor|profesora|Lehrer|Lehrerin|教师|老师",
    ),
    "Worker": _entry(
        "occupation",
        "worker|ouvrier|ouvrière|travailleur|trabajador|trabajadora|obrero|Arbeiter|"
        "Arbeiterin|工人",
    ),
    "Writer": _entry(
        "occupation",
        "writer|écrivain|écrivaine|escritor|escritora|Schriftsteller|Schriftstellerin|作家",
    ),
    "Fat": _entry(
        "physical physics body",
        "fat|gros|grosse|gordo|gorda|dicker|dicke|胖",
    ),
    "Thin": _entry(
        "physical physics body",
        "thin|mince|delgado|delgada|dünner|dünne|schlank|瘦",
    ),
    "High extraversion": _entry(
        "personality extraversion",
        "extraverted|extroverted|outgoing|extraverti|extravertie|extrovertido|extrovertida|"
        "extrovertiert|extrovertierter|extravertiert|外向",
    ),
    "Low extraversion": _entry(
        "personality extraversion",
        "introverted|introverti|introvertie|introvertido|introvertida|introvertiert|"
        "introvertierter|内向",
    ),
    "High openness": _entry(
        "personality openness",
        "open-minded|curious|ouvert d'esprit|curieux|curieuse|de mente abierta|curioso|"
        "curiosa|aufgeschlossen|aufgeschlossener|neugierig|思想开放|好奇",
    ),
    "Low openness": _entry(
        "personality openness",
        "conventional|traditional|conventionnel|conventionnelle|convencional|konventionell|"
        "konventioneller|传统|保守",
    ),
    "High conscientiousness": _entry(
        "personality conscientiousness",
        "conscientious|organized|organised|consciencieux|consciencieuse|organisé|organisée|"
        "concienzudo|concienzuda|organizado|organizada|gewissenhaft|gewissenhafter|尽责|有条理",
    ),
    "Low conscientiousness": _entry(
        "personality conscientiousness",
        "careless|disorganized|disorganised|négligent|négligente|désorganisé|descuidado|"
        "descuidada|desorganizado|nachlässig|nachlässiger|粗心|散漫",
    ),
    "High agreeableness": _entry(
        "personality agreeableness",
        "agreeable|compassionate|agréable|bienveillant|bienveillante|amable|compasivo|"
        "compasiva|verträglich|verträglicher|mitfühlend|随和|友善",
    ),
    "Low agreeableness": _entry(
        "personality agreeableness",
        "antagonistic|disagreeable|critical|antagoniste|désagréable|antagónico|desagradable|"
        "streitlustig|unverträglich|好斗|挑剔",
    ),
    "High neuroticism": _entry(
        "personality neuroticism",
        "neurotic|anxious|névrosé|névrosée|anxieux|anxieuse|neurótico|neurótica|ansioso|"
        "ansiosa|neurotisch|neurotischer|ängstlich|焦虑|神经质",
    ),
    "Low neuroticism": _entry(
        "personality neuroticism",
        "emotionally stable|calm|émotionnellement stable|calme|emocionalmente estable|"
        "tranquilo|tranquila|emotional stabil|emotional stabiler|gelassen|情绪稳定|冷静",
    ),
}


class Vocabulary:
    """An immutable set of recognisable value spellings; extend it with :meth:`extended`."""

    def __init__(self, forms: Iterable[ValueForm]) -> None:
        self.forms: tuple[ValueForm, ...] = tuple(forms)
        self._attrs: dict[str, tuple[str, ...]] = {}
        for f in self.forms:
            merged = self._attrs.get(f.label, ())
            self._attrs[f.label] = merged + tuple(a for a in f.attributes if a not in merged)

    @classmethod
    def builtin(cls, *, project: bool = True) -> Vocabulary:
        """The built-in values; with ``project=True`` also every value spelling in the
        project's grids and language tables (``pytest_recfair/prompts/data``)."""
        forms: list[ValueForm] = []
        for label, (attributes, spellings) in VALUES.items():
            forms.append(ValueForm(label, label, attributes))
            forms.extend(ValueForm(s, label, attributes) for s in spellings)
        vocab = cls(forms)
        return vocab.extended(project_entries()) if project else vocab

    def attributes_of(self, label: str) -> tuple[str, ...]:
        return self._attrs.get(label, ())

    def labels(self) -> list[str]:
        return list(self._attrs)

    def extended(self, entries: Iterable[tuple[str, str, str]]) -> Vocabulary:
        """A copy that also knows ``(form, label, attribute)`` triples (from a grid or a
        bias profile); a label already known keeps its attributes and gains the new one."""
        forms = list(self.forms)
        known = {(f.form.casefold(), f.label) for f in forms}
        for form, label, attribute in entries:
            form = form.strip()
            if not form or (form.casefold(), label) in known:
                continue
            attrs = self.attributes_of(label)
            if attribute and attribute.casefold() not in attrs:
                attrs = (*attrs, attribute.casefold())
            forms.append(ValueForm(form, label, attrs))
            known.add((form.casefold(), label))
        return Vocabulary(forms)


_PROMPTS_DATA = Path(__file__).resolve().parent.parent / "prompts" / "data"
_ARTICLE = re.compile(r"^(?:a|an)\s+", re.IGNORECASE)
_PROJECT_CACHE: list[tuple[str, str, str]] | None = None


def project_entries(root: Path | None = None) -> list[tuple[str, str, str]]:
    """``(form, label, attribute)`` for every value in the project's grid and language files.

    Read as plain data (no import of ``pytest_recfair.prompts``), and skipped silently when
    the files are absent or shaped differently: the built-in table still covers the
    published FaiRLLM/FairEval values. The ``typo`` attribute is left out on purpose —
    its values are misspellings the recogniser must match fuzzily and flag as typos.
    """
    global _PROJECT_CACHE
    if root is None and _PROJECT_CACHE is not None:
        return list(_PROJECT_CACHE)
    base = root or _PROMPTS_DATA
    entries: list[tuple[str, str, str]] = []
    for path in sorted((base / "grids").glob("*.yaml")):
        data = _load(path)
        for attribute in data.get("attributes") or []:
            if not isinstance(attribute, dict) or str(attribute.get("name")) == "typo":
                continue
            for value in attribute.get("values") or []:
                if isinstance(value, dict) and value.get("label") and value.get("text"):
                    text = _ARTICLE.sub("", str(value["text"]).strip())
                    entries.append((text, str(value["label"]), str(attribute["name"])))
    for path in sorted((base / "languages").glob("*.yaml")):
        values = _load(path).get("values") or {}
        if not isinstance(values, dict):
            continue
        for attribute, by_label in values.items():
            if not isinstance(by_label, dict):
                continue
            for label, spec in by_label.items():
                leaves = spec.items() if isinstance(spec, dict) else [("text", spec)]
                for key, leaf in leaves:
                    if key not in ("gender", "post") and isinstance(leaf, str) and leaf.strip():
                        entries.append((leaf.strip(), str(label), str(attribute)))
    if root is None:
        _PROJECT_CACHE = entries
    return list(entries)


def _load(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}
