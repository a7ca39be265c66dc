"""The simulator's built-in vocabulary of attribute values, in every supported language.

Each value has a label (the name bias profiles and grids use, e.g. ``Muslim``) and the
surface forms a prompt may carry it in ("Islamic", "musulmane", "穆斯林", ...). The
simulator only needs to *recognise* a value, so forms are bare words without articles;
a value whose text is shared by several attributes (``American`` is a nationality and a
continent) lists every attribute it belongs to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache

from pytest_recfair.prompts.grids import BUNDLED_GRIDS, load_grid, strip_article
from pytest_recfair.prompts.languages import LANGUAGES, load_language


@dataclass(frozen=True)
class ValueForm:
    """One recognisable spelling of an attribute value."""

    form: str  # as written in a prompt, without article
    label: str  # canonical label, e.g. "Muslim"
    attributes: tuple[str, ...]  # attribute names this label belongs to (lower case)


def _forms(text: str) -> tuple[str, ...]:
    return tuple(text.split("|"))


# Spellings the project's prompts never produce but other prompts do: FaiRLLM-style
# translations, synonyms ("elderly", "outgoing"), declined German forms, bare Chinese
# nouns. Everything the grids and translation tables say comes from them instead
# (project_entries); a test checks that no form here repeats one of theirs.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "Young": _forms("jung|jungen"),
    "Middle-aged": _forms("d'âge mûr"),
    "Old": _forms("elderly|vieux|vieille|anciano|anciana|alt|alter|alte|年长"),
    "Male": _forms("man|masculin|masculino|männlich|männlicher"),
    "Female": _forms("woman|féminin|femenina|weiblich|weibliche"),
    "Boy": _forms("garçon|chico|男孩"),
    "Girl": _forms("fille|chica|Mädchen|女孩"),
    "African American": _forms("african-american|Afroamerikaner|Afroamerikanerin"),
    "Asian": _forms("Asiate"),
    "Buddhist": _forms("佛教"),
    "Christian": _forms("Christ|Christin|基督教"),
    "Hindu": _forms("hinduista|印度教"),
    "Muslim": _forms("Muslimin|islamisch|伊斯兰"),
    "Jewish": _forms("juif|juive|judío|judía|jüdischer|jüdische|犹太"),
    "American": _forms("Amerikaner|Amerikanerin"),
    "Brazilian": _forms("Brasilianer"),
    "British": _forms("Brite"),
    "French": _forms("Franzose|Französin"),
    "Japanese": _forms("Japaner|Japanerin"),
    "African": _forms("Afrikaner|Afrikanerin"),
    "Teacher": _forms("professeur|老师"),
    "Worker": _forms("travailleur|obrero"),
    "Fat": _forms("gros|grosse|gordo|gorda|dicker|dicke|胖"),
    "Thin": _forms("dünner|dünne|schlank|瘦"),
    "High extraversion": _forms(
        "extraverted|extroverted|outgoing|extraverti|extravertie|extrovertido|"
        "extrovertida|extrovertiert|extrovertierter|extravertiert|外向"
    ),
    "Low extraversion": _forms(
        "introverted|introverti|introvertie|introvertido|introvertida|"
        "introvertiert|introvertierter|内向"
    ),
    "High openness": _forms(
        "open-minded|curious|ouvert d'esprit|curieux|curieuse|de mente abierta|"
        "curioso|curiosa|aufgeschlossen|aufgeschlossener|neugierig|思想开放|好奇"
    ),
    "Low openness": _forms(
        "conventional|traditional|conventionnel|conventionnelle|convencional|"
        "konventionell|konventioneller|传统|保守"
    ),
    "High conscientiousness": _forms(
        "conscientious|organized|organised|consciencieux|consciencieuse|"
        "organisé|organisée|concienzudo|concienzuda|organizado|organizada|"
        "gewissenhaft|gewissenhafter|尽责|有条理"
    ),
    "Low conscientiousness": _forms(
        "careless|disorganized|disorganised|négligent|négligente|désorganisé|"
        "descuidado|descuidada|desorganizado|nachlässig|nachlässiger|粗心|散漫"
    ),
    "High agreeableness": _forms(
        "agreeable|compassionate|agréable|bienveillant|bienveillante|amable|"
        "compasivo|compasiva|verträglich|verträglicher|mitfühlend|随和|友善"
    ),
    "Low agreeableness": _forms(
        "antagonistic|disagreeable|critical|antagoniste|désagréable|antagónico|"
        "desagradable|streitlustig|unverträglich|好斗|挑剔"
    ),
    "High neuroticism": _forms(
        "neurotic|anxious|névrosé|névrosée|anxieux|anxieuse|neurótico|neurótica|"
        "ansioso|ansiosa|neurotisch|neurotischer|ängstlich|焦虑|神经质"
    ),
    "Low neuroticism": _forms(
        "emotionally stable|calm|émotionnellement stable|calme|"
        "emocionalmente estable|tranquilo|tranquila|emotional stabil|"
        "emotional stabiler|gelassen|情绪稳定|冷静"
    ),
}

# Labels that no bundled grid has, with their attributes.
EXTRA_LABELS: dict[str, tuple[str, ...]] = {"Jewish": ("religion",)}


class Vocabulary:
    """An immutable set of recognisable value spellings; extend it with :meth:`extended`."""

    def __init__(self, forms: Iterable[ValueForm]) -> None:
        self.forms: tuple[ValueForm, ...] = tuple(forms)
        self._attrs: dict[str, tuple[str, ...]] = {}
        for f in self.forms:
            merged = self._attrs.get(f.label, ())
            self._attrs[f.label] = merged + tuple(a for a in f.attributes if a not in merged)

    @classmethod
    def builtin(cls) -> Vocabulary:
        """Every value of the bundled grids in every language of the translation tables,
        each label as a form of itself, plus the :data:`SYNONYMS`."""
        project = project_entries()
        labels = {label: attribute for _, label, attribute in project}
        entries = [(label, label, attribute) for label, attribute in labels.items()]
        entries += project
        for label, attributes in EXTRA_LABELS.items():
            entries += [(label, label, attribute) for attribute in attributes]
        for label, forms in SYNONYMS.items():
            entries += [(form, label, "") for form in forms]
        return cls(()).extended(entries)

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


def project_entries() -> list[tuple[str, str, str]]:
    """``(form, label, attribute)`` for every value of the bundled grids, in every language
    of the translation tables: what the project's own prompts can say.

    The ``typo`` attribute is left out on purpose: its values are misspellings the
    recogniser must match fuzzily and flag as typos.
    """
    return list(_project_entries())


@cache
def _project_entries() -> tuple[tuple[str, str, str], ...]:
    grids = [
        (strip_article(value.text.strip()), value.label, attribute.name)
        for name in BUNDLED_GRIDS
        for attribute in load_grid(name).attributes
        if attribute.name != "typo"
        for value in attribute.values
    ]
    # Translated forms: the tables key labels case-folded, the grids give their spelling.
    spelled = {label.casefold(): label for _, label, _ in grids}
    translated = [
        (leaf.strip(), spelled.get(label, label), attribute)
        for code in LANGUAGES
        for (attribute, label), spec in load_language(code).values.items()
        for key, leaf in (spec.items() if isinstance(spec, Mapping) else [("text", spec)])
        if key not in ("gender", "post") and isinstance(leaf, str) and leaf.strip()
    ]
    return (*grids, *translated)
