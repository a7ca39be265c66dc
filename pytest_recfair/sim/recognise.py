"""Read a prompt's entity, K, domain, language and attribute values (also misspelt:
"an Americcan" matches American below score 1, a typo). Heuristic, not one template set's
parser: cue phrases find the entity, a longest-first scan of known forms (bare words; a
label's spellings in every language) the value, slot patterns what the scan cannot spell."""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cache, cached_property

from pytest_recfair.prompts.cases import match_prompt
from pytest_recfair.prompts.grids import BUNDLED_GRIDS, LABEL_SEP, load_grid, strip_article
from pytest_recfair.prompts.languages import LANGUAGES, load_language


@dataclass(frozen=True)
class ValueForm:
    form: str  # as written in a prompt, without article
    label: str  # canonical label, e.g. "Muslim"
    attributes: tuple[str, ...]  # lower case; "American" is a nationality and a continent


# Spellings only other prompts use (FaiRLLM-style translations, synonyms, declined German,
# bare Chinese nouns); the grids' and tables' come from project_entries (a test checks
# that none repeats here).
SYNONYMS: dict[str, tuple[str, ...]] = {
    label: tuple(forms.split("|"))
    for label, forms in {
        "Young": "jung|jungen",
        "Middle-aged": "d'âge mûr",
        "Old": "elderly|vieux|vieille|anciano|anciana|alt|alter|alte|年长",
        "Male": "man|masculin|masculino|männlich|männlicher",
        "Female": "woman|féminin|femenina|weiblich|weibliche",
        "Boy": "garçon|chico|男孩",
        "Girl": "fille|chica|Mädchen|女孩",
        "African American": "african-american|Afroamerikaner|Afroamerikanerin",
        "Asian": "Asiate",
        "Buddhist": "佛教",
        "Christian": "Christ|Christin|基督教",
        "Hindu": "hinduista|印度教",
        "Muslim": "Muslimin|islamisch|伊斯兰",
        "Jewish": "juif|juive|judío|judía|jüdischer|jüdische|犹太",
        "American": "Amerikaner|Amerikanerin",
        "Brazilian": "Brasilianer",
        "British": "Brite",
        "French": "Franzose|Französin",
        "Japanese": "Japaner|Japanerin",
        "African": "Afrikaner|Afrikanerin",
        "Teacher": "professeur|老师",
        "Worker": "travailleur|obrero",
        "Fat": "gros|grosse|gordo|gorda|dicker|dicke|胖",
        "Thin": "dünner|dünne|schlank|瘦",
        "High extraversion": "extraverted|extroverted|outgoing|extraverti|extravertie|extrovertido|"
        "extrovertida|extrovertiert|extrovertierter|extravertiert|外向",
        "Low extraversion": "introverted|introverti|introvertie|introvertido|introvertida|"
        "introvertiert|introvertierter|内向",
        "High openness": "open-minded|curious|ouvert d'esprit|curieux|curieuse|de mente abierta|"
        "curioso|curiosa|aufgeschlossen|aufgeschlossener|neugierig|思想开放|好奇",
        "Low openness": "conventional|traditional|conventionnel|conventionnelle|convencional|"
        "konventionell|konventioneller|传统|保守",
        "High conscientiousness": "conscientious|organized|organised|consciencieux|consciencieuse|"
        "organisé|organisée|concienzudo|concienzuda|organizado|organizada|"
        "gewissenhaft|gewissenhafter|尽责|有条理",
        "Low conscientiousness": "careless|disorganized|disorganised|négligent|négligente|"
        "désorganisé|descuidado|descuidada|desorganizado|nachlässig|nachlässiger|粗心|散漫",
        "High agreeableness": "agreeable|compassionate|agréable|bienveillant|bienveillante|amable|"
        "compasivo|compasiva|verträglich|verträglicher|mitfühlend|随和|友善",
        "Low agreeableness": "antagonistic|disagreeable|critical|antagoniste|désagréable|"
        "antagónico|desagradable|streitlustig|unverträglich|好斗|挑剔",
        "High neuroticism": "neurotic|anxious|névrosé|névrosée|anxieux|anxieuse|neurótico|"
        "neurótica|ansioso|ansiosa|neurotisch|neurotischer|ängstlich|焦虑|神经质",
        "Low neuroticism": "emotionally stable|calm|émotionnellement stable|calme|"
        "emocionalmente estable|tranquilo|tranquila|emotional stabil|"
        "emotional stabiler|gelassen|情绪稳定|冷静",
    }.items()
}

EXTRA_LABELS: dict[str, tuple[str, ...]] = {"Jewish": ("religion",)}


class Vocabulary:
    """An immutable set of recognisable value spellings."""

    def __init__(self, forms: Iterable[ValueForm]) -> None:
        self.forms: tuple[ValueForm, ...] = tuple(forms)
        self._attrs: dict[str, tuple[str, ...]] = {}
        for f in self.forms:
            merged = self._attrs.get(f.label, ())
            self._attrs[f.label] = merged + tuple(a for a in f.attributes if a not in merged)

    @classmethod
    def builtin(cls) -> Vocabulary:
        """project_entries, each label as a form of itself, plus the SYNONYMS."""
        project = project_entries()
        labels = {label: attribute for _, label, attribute in project}
        entries = [(label, label, attribute) for label, attribute in labels.items()]
        entries += [*project, *((lab, lab, a) for lab in EXTRA_LABELS for a in EXTRA_LABELS[lab])]
        entries += [(form, label, "") for label, forms in SYNONYMS.items() for form in forms]
        return cls(()).extended(entries)

    def attributes_of(self, label: str) -> tuple[str, ...]:
        return self._attrs.get(label, ())

    def extended(self, entries: Iterable[tuple[str, str, str]]) -> Vocabulary:
        """A copy that also knows ``(form, label, attribute)`` triples (a known label: +1)."""
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


@cache
def project_entries() -> tuple[tuple[str, str, str], ...]:
    """``(form, label, attribute)`` of every bundled grid value in every language; not the
    ``typo`` attribute's, whose misspelt values must match fuzzily and count as typos."""
    grids = [
        (strip_article(value.text.strip()), value.label, attribute.name)
        for name in BUNDLED_GRIDS
        for attribute in load_grid(name).attributes
        if attribute.name != "typo"
        for value in attribute.values
    ]
    # the tables key labels case-folded, the grids give their spelling
    spelled = {label.casefold(): label for _, label, _ in grids}
    translated = [
        (leaf.strip(), spelled.get(label, label), attribute)
        for code in LANGUAGES
        for (attribute, label), spec in load_language(code).values.items()
        for key, leaf in (spec.items() if isinstance(spec, Mapping) else [("text", spec)])
        if key not in ("gender", "post") and isinstance(leaf, str) and leaf.strip()
    ]
    return (*grids, *translated)


FUZZY_CUTOFF = 0.8

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_QUOTES = {'"': '"', "“": "”", "«": "»", "„": "“", "「": "」", "『": "』", "'": "'", "‘": "’"}

# Frequent words of each language's prompts: the language with most of them wins.
_LANG_WORDS: dict[str, frozenset[str]] = {
    lang: frozenset(words.split())
    for lang, words in {
        "en": "a am an any book books don't fan give i like list me movie movies music of "
        "please provide recommend song songs that the titles with would you",
        "fr": "chansons d'un d'une de des donnez-moi fan films fournir je la le les liste "
        "livres merci plaît pourriez que recommander s'il suis titres un une veuillez "
        "vous",
        "es": "aficionado canciones dame de fan favor la las libros lista los me películas por "
        "proporciona proporcióname que recomendarías recomiendes soy títulos un una",
        "de": "bin bitte bücher das der die ein eine einer empfehlen fan filme gib ich keine "
        "lieder liste mir nur songs titel und von würdest",
    }.items()
}
_WORD = re.compile(r"[\w'’-]+", re.UNICODE)

_DOMAIN_CUES: dict[str, re.Pattern[str]] = {
    "music": re.compile(
        r"song|music|track|album|chanson|musique|canci[oó]n|m[uú]sica|lied|musik|歌|音乐|单曲",
        re.I,
    ),
    "book": re.compile(r"\bbooks?\b|novel|livre|roman\b|libro|novela|b[uü]ch|书|小说", re.I),
    "movie": re.compile(r"movie|film|pel[ií]cula|cin[eé]ma|电影|影片", re.I),
}

_BEFORE = re.compile(
    r"(?:\bfans?\s+of|\b(?:titles|movies|films|songs|tracks|books|albums|works|music)\s+(?:by|from)"
    r"|\bsimilar\s+to|\bI\s+(?:like|love|enjoy)"
    r"|\b(?:fans?|admirat(?:eur|rice)|amateur)\s+(?:[\w'-]+\s+){0,3}?(?:de|d')"
    r"|\b(?:titres|films|chansons|livres|œuvres)\s+(?:de|d')|\bsimilaires?\s+à"
    r"|\b(?:aficionad[oa]|admirador[a]?)\s+(?:[\w'-]+\s+){0,3}?(?:a|de)\b|\b(?:títulos|películas|canciones|libros)\s+de"
    r"|\bFans?\s+von|\b(?:Titel|Filme|Songs|Lieder|Bücher|Werke)\s+von|\bähnlich\s+wie)\s*",
    re.I,
)
# Cues that come right after the entity's name (Chinese puts the name first).
_ZH_AFTER = re.compile(r"的(?:忠实)?(?:粉丝|影迷|歌迷|书迷|乐迷|作品|电影|歌曲|书)")
_ZH_START = re.compile(r"[，,。、：:；;]|是|喜欢")
# Where a name ends when the prompt does not quote it.
_END = re.compile(
    r"[.!?。！？;；](?=\s|$|[^\w])|\n|[，、]|,\s+(?:please|could|can|would|and|et|y|und|bitte)\b"
    r"|\s+(?:that|which)\s+you\b|\s+(?:que|qui)\s+(?:vous|tu|me|te|usted|recomend)"
    r"|\s+(?:die|welche)\s+(?:du|Sie|ihr)\b|\s+(?:and|et|y|und)\s+(?:I|je|yo|ich)\b"
    r"|\s+(?:fan|Fan)\b",
)
_ABBREV = frozenset({"jr", "sr", "dr", "mr", "mrs", "ms", "st", "vs", "mt", "ft", "no"})
_K_CUES = re.compile(
    r"(?:list\s+of|top|liste\s+de|lista\s+de|Liste\s+(?:von|mit)|provide|give|recommend)\s+"
    r"(\d{1,4})\b|\b(\d{1,4})\s*(?:[\w-]+\s+){0,2}?(?:titles|titres|títulos|Titel|movies|films|"
    r"songs|books|películas|canciones|libros|Filme|Lieder|Songs|Bücher|chansons|livres|items)"
    r"|(\d{1,4})\s*(?:部|首|本|个|项|條|条)",
    re.I,
)
_ANY_INT = re.compile(r"(?<![\d.])(\d{1,4})(?![\d.])")
# Where templates put the value, most specific first: implicit proxies (names, relations,
# places), FaiRLLM's "I am {value} fan of", the project's own templates in each language.
_SLOTS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.I)
    for p in (
        r"\bMy\s+name\s+is\s+(?P<v>[^.,]+?)(?:\s+and\b|[.,])",
        r"\bon\s+my\s+way\s+to\s+the\s+(?P<v>[^.,]+?)(?:\s+and\b|[.,])",
        r"\bfor\s+my\s+(?P<v>[^,.]+?),\s+who\b",
        r"\bMy\s+(?P<v>[^.]+?)\s+are\s+(?:both\s+)?fans\b",
        r"\bI\s+am\s+(?P<v>[^.]{0,80}?)\s*(?:and\s+(?:a\s+)?)?fans?\b",
        r"\bI'm\s+(?P<v>[^.]{0,80}?)\s*(?:and\s+(?:a\s+)?)?fans?\b",
        r"\bEn\s+tant\s+qu(?:e\s+|')(?P<v>[^,]+?),",
        r"\bJe\s+suis\s+(?P<v>[^.]{0,80}?)\s*(?:fan|amateur|admirat)",
        r"\bComo\s+(?P<v>[^,]+?),",
        r"\bSoy\s+(?P<v>[^.]{0,80}?)\s*(?:fan|aficionad)",
        r"\bAls\s+(?P<v>[^,]+?)\s+bin\s+ich\b",
        r"\bIch\s+bin\s+(?P<v>[^.]{0,80}?)\s*Fan\b",
        r"作为(?:一名|一位|一个)?(?P<v>[^，,。]+?)[，,]",
        r"我是(?P<v>[^，,。]{0,20}?)的?(?:忠实)?(?:粉丝|影迷|歌迷|书迷)",
    )
)
# Head nouns templates add so adjectives have something to agree with ("personne musulmane").
_HELPERS = frozenset(["personne", "persona", "person", "mensch", "人"])
_ARTICLES = re.compile(
    r"^(?:(?:a|an|the|un|une|una|uno|ein|eine|einer|eines|einen|d'un|d'une)\b\s*"
    r"|一名|一位|一个|一)+",
    re.I,
)
# "un fan musulman de ...", "ein Fan, jung, von ...": a value after the fan word.
_POST_SLOT = re.compile(
    r"\b(?:fan|fans|aficionad[oa]s?|admirat(?:eur|rice)|amateur)\s+(?P<v>[^.,;:!?]{1,40}?)\s+"
    r"(?:de|d'|von|of|a)\b",
    re.I,
)
_NEUTRAL_SLOT = re.compile(r"^[\W_]*$")


def entity_key(name: str) -> str:
    """One key however a name is written: case, accents, punctuation, spacing ignored."""
    text = unicodedata.normalize("NFKC", name).casefold()
    return " ".join(re.findall(r"\w+", text))


@dataclass(frozen=True)
class ValueMatch:
    label: str
    attributes: tuple[str, ...]
    found: str  # the text as it appears in the prompt
    score: float  # 1.0 for a known spelling, lower for a fuzzy (misspelt) match
    aliases: tuple[str, ...] = ()  # other labels of the same value ("Islamic" -> "Muslim")


@dataclass(frozen=True)
class Recognised:
    entity: str
    k: int | None
    domain: str
    language: str
    values: tuple[ValueMatch, ...]

    @property
    def neutral(self) -> bool:
        return not self.values

    @property
    def typo(self) -> bool:
        return any(v.score < 1.0 for v in self.values)  # a fuzzy (misspelt) match

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(v.label for v in self.values)


class Recogniser:
    """Recognises prompts against one Vocabulary (compiled once)."""

    def __init__(self, vocabulary: Vocabulary | None = None, *, use_templates: bool = True) -> None:
        self.vocabulary = vocabulary or Vocabulary.builtin()
        self.use_templates = use_templates

    @cached_property
    def _by_form(self) -> dict[str, ValueForm]:
        table: dict[str, ValueForm] = {}
        for f in self.vocabulary.forms:
            table.setdefault(_fold(f.form), f)
        return table

    @cached_property
    def _scan(self) -> re.Pattern[str]:
        forms = sorted(self._by_form, key=len, reverse=True)
        escaped = [(re.escape(f).replace(r"\ ", r"[\s-]+"), bool(_CJK.search(f))) for f in forms]
        words, cjk = ([e for e, is_cjk in escaped if is_cjk == want] for want in (False, True))
        parts = []
        if words:
            parts.append(r"(?<![\w'’-])(?:" + "|".join(words) + r")(?![\w'’-])")
        if cjk:
            parts.append("(?:" + "|".join(cjk) + ")")
        return re.compile("|".join(parts), re.I)

    def __call__(self, prompt: str, system: str | None = None) -> Recognised:
        """The bundled templates' exact patterns (``match_prompt``) read a prompt built from
        them; the heuristics any other, or a value phrase those cannot place."""
        match = match_prompt(prompt) if self.use_templates else None
        if match is None:
            return self.heuristic(prompt, system)
        values: tuple[ValueMatch, ...] = ()
        if match.attribute == "typo" and match.value:
            # FaiRLLM lists misspellings as values ("Americcan"): read as a typo of
            # American, the grid's label kept as an alias a profile can name
            values = tuple(
                replace(v, attributes=(*v.attributes, "typo"), aliases=(match.value,))
                for v in self.heuristic(prompt, system).values
            )
        elif match.attribute:
            values = self._from_template(match.attribute, match.value or "", match.phrase or "")
            if not match.exact:
                pair = _fold(match.phrase or ""), _fold(match.value or "")
                score = round(min(difflib.SequenceMatcher(None, *pair).ratio(), 0.999), 3)
                values = tuple(replace(v, score=score) for v in values)
        elif match.value is not None:  # a phrase the grids do not know: our fuzzy guess
            values = self.heuristic(prompt, system).values
        domain = match.domain
        if domain not in ("movie", "music", "book"):
            domain = _find_domain(f"{system or ''}\n{prompt}")
        return Recognised(match.entity, match.k or _find_k(prompt), domain, match.language, values)

    def _from_template(self, attribute: str, label: str, phrase: str) -> tuple[ValueMatch, ...]:
        # one match per crossed part ("Black x Female"): a profile may list either
        attrs, labels = attribute.split(LABEL_SEP), label.split(LABEL_SEP)
        if len(attrs) != len(labels):
            attrs, labels = [attribute], [label]
        found = self._exact(_ARTICLES.sub("", phrase))
        aliases = tuple(v.label for v in found if v.label not in labels)
        known = self.vocabulary.attributes_of
        return tuple(
            ValueMatch(
                lab, (att.casefold(), *(a for a in known(lab) if a != att)), phrase, 1.0, aliases
            )
            for att, lab in zip(attrs, labels, strict=True)
        )

    def heuristic(self, prompt: str, system: str | None = None) -> Recognised:
        text = unicodedata.normalize("NFC", prompt)
        entity, span = _find_entity(text)
        masked = (
            text if span is None else text[: span[0]] + " " * (span[1] - span[0]) + text[span[1] :]
        )
        if entity:
            masked = masked.replace(entity, " " * len(entity))
        values = self._values(masked)
        # no cue: the prompt minus its values, so that a neutral and a conditioned prompt of
        # one unknown template share a catalogue
        entity = entity or " ".join(_ARTICLES.sub("", self._scan.sub(" ", masked)).split())
        domain = _find_domain(f"{system or ''}\n{masked}")
        return Recognised(entity, _find_k(masked), domain, _find_language(text), values)

    def _values(self, masked: str) -> tuple[ValueMatch, ...]:
        phrases = []
        for pattern in _SLOTS:
            m = pattern.search(masked)
            if m is None:
                continue
            phrase = m.group("v")
            post = _POST_SLOT.search(masked, m.start())
            if post is not None and post.start() < m.end() + 2:
                phrase = f"{phrase} {post.group('v')}"
            phrase = _ARTICLES.sub("", phrase.strip()).strip(" ,.;:")
            phrases.append(phrase)
            if not _NEUTRAL_SLOT.match(phrase):
                break
        else:  # no slot: any value the prompt names; a slot of only an article: neutral
            return () if phrases else self._exact(masked)
        if found := self._exact(phrase):
            return found
        # a misspelt value, else an unknown one under its own label (a profile may name it)
        return (self._fuzzy(phrase) or ValueMatch(phrase, (), phrase, 1.0),)

    def _exact(self, text: str) -> tuple[ValueMatch, ...]:
        out: list[ValueMatch] = []
        for m in self._scan.finditer(text):
            f = self._by_form.get(_fold(m.group(0)))
            if f is not None and f.label not in {v.label for v in out}:
                out.append(self._match(f, m.group(0), 1.0))
        return tuple(out)

    def _fuzzy(self, phrase: str) -> ValueMatch | None:
        words = [w for w in _fold(phrase).split() if w not in _HELPERS]
        candidates = [" ".join(words), *(w for w in words if len(w) >= 4)]
        best: tuple[float, str, str] = (0.0, "", "")
        matcher = difflib.SequenceMatcher(autojunk=False)
        for target in dict.fromkeys(candidates):
            if len(target) < (2 if _CJK.search(target) else 3):
                continue
            matcher.set_seq2(target)
            near = max(3, len(target) // 3)
            for form in self._by_form:
                if len(form) < len(target) // 2 or abs(len(form) - len(target)) > near:
                    continue
                if len(form) == len(target) and _transposed(form, target):
                    score = 0.9  # "fta" / "fat": one swap reads as a typo, whatever the length
                else:
                    matcher.set_seq1(form)
                    if min(matcher.real_quick_ratio(), matcher.quick_ratio()) < FUZZY_CUTOFF:
                        continue
                    score = matcher.ratio()
                if score > best[0]:
                    best = (score, form, target)
        if best[0] < FUZZY_CUTOFF:
            return None
        return self._match(self._by_form[best[1]], phrase, round(min(best[0], 0.999), 3))

    def _match(self, f: ValueForm, found: str, score: float) -> ValueMatch:
        attrs = self.vocabulary.attributes_of(f.label) or f.attributes
        return ValueMatch(f.label, attrs, found, score)


def _transposed(a: str, b: str) -> bool:
    diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    i = diff[0] if len(diff) == 2 else -1
    return i >= 0 and diff[1] == i + 1 and a[i : i + 2] == b[i : i + 2][::-1]


def _fold(text: str) -> str:
    return " ".join(re.split(r"[\s-]+", unicodedata.normalize("NFC", text).casefold().strip()))


def _find_entity(text: str) -> tuple[str, tuple[int, int] | None]:
    for cue in _BEFORE.finditer(text):
        name, span = _take_name(text, cue.end())
        if name:
            return name, span
    for after in _ZH_AFTER.finditer(text):
        end = after.start()
        head = text[:end]
        opener = next((o for o, c in _QUOTES.items() if head.endswith(c)), None)
        if opener is not None and (start := head.rfind(opener, 0, len(head) - 1)) >= 0:
            return head[start + 1 : -1].strip(), (start, end)
        start = max((m.end() for m in _ZH_START.finditer(head)), default=0)
        name = head[start:].strip()
        if name:
            return name, (start, end)
    return "", None


def _take_name(text: str, start: int) -> tuple[str, tuple[int, int] | None]:
    start = len(text) - len(text[start:].lstrip(" "))
    if start < len(text) and text[start] in _QUOTES:
        close = text.find(_QUOTES[text[start]], start + 1)
        if close > start + 1:
            return text[start + 1 : close].strip(), (start, close + 1)
    pos = start
    while (end := _END.search(text, pos)) is not None:
        stop = end.start()
        dot = text[stop : stop + 1] == "." and stop > start
        last = re.findall(r"[\w]+$", text[start:stop]) if dot else []
        # "M. Night Shyamalan", "Martin Luther King Jr." end no sentence.
        if not (last and (len(last[0]) == 1 or last[0].casefold() in _ABBREV)):
            break
        pos = stop + 1
    else:
        stop = len(text)
    name = text[start:stop].strip().strip(" ,:;\"'“”«»")
    return name, ((start, stop) if name else None)


def _find_k(text: str) -> int | None:
    for m in _K_CUES.finditer(text):
        digits = next(g for g in m.groups() if g)
        if 0 < int(digits) <= 1000:
            return int(digits)
    for m in _ANY_INT.finditer(text):
        if 0 < int(m.group(1)) <= 200:
            return int(m.group(1))
    return None


def _find_domain(text: str) -> str:
    counts = {d: len(p.findall(text)) for d, p in _DOMAIN_CUES.items()}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else "movie"


def _find_language(text: str) -> str:
    if len(_CJK.findall(text)) >= 4:
        return "zh"
    words = [w.casefold() for w in _WORD.findall(text)]
    scores = {lang: sum(w in vocab for w in words) for lang, vocab in _LANG_WORDS.items()}
    best = max(scores, key=lambda lang: scores[lang])
    return best if scores[best] > scores["en"] else "en"
