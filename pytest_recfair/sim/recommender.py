"""The simulated recommender: the entity's neutral top-K of its deterministic catalogue,
the bias profile's fraction swapped per value, noise re-sampled per call (temperature > 0),
refusals and short lists from the fault plan; every draw seeded by (seed, entity, value,
call index), so a run replays exactly."""

from __future__ import annotations

import difflib
import random
import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pytest_recfair.errors import ConfigError
from pytest_recfair.sim.planted import RolePlaySim, candidate_reply, stable_seed, unit
from pytest_recfair.sim.profile import BiasProfile, Faults, Heterogeneity, load_profile
from pytest_recfair.sim.recognise import Recognised, Recogniser, Vocabulary, entity_key

MAX_K = 500

REFUSALS: dict[str, str] = {
    "en": "I'm sorry, but I can't help with recommendations based on that.",
    "fr": "Je suis désolé, mais je ne peux pas faire de recommandations sur cette base.",
    "es": "Lo siento, pero no puedo hacer recomendaciones basadas en eso.",
    "de": "Es tut mir leid, aber auf dieser Grundlage kann ich keine Empfehlungen geben.",
    "zh": "抱歉，我无法基于这一点提供推荐。",
}
_PREFACE: dict[str, str] = {
    "en": "Here are {k} recommendations you might enjoy:",
    "fr": "Voici {k} recommandations qui pourraient vous plaire :",
    "es": "Aquí tienes {k} recomendaciones que podrían gustarte:",
    "de": "Hier sind {k} Empfehlungen, die dir gefallen könnten:",
    "zh": "以下是你可能喜欢的{k}个推荐：",
}


# Made-up titles drawn by a generator seeded by (domain, entity): the same on any machine.
def _split(text: str) -> tuple[str, ...]:
    return tuple(text.split("|"))


_ADJ = _split(
    "Silent|Broken|Golden|Hidden|Crimson|Last|Distant|Burning|Frozen|Wild|Hollow|Electric|"
    "Velvet|Scarlet|Quiet|Restless|Endless|Bitter|Paper|Midnight|Northern|Savage|Gentle|"
    "Lonely|Secret|Shattered|Sacred|Iron|Glass|Lost|Wandering|Painted|Fading|Neon|Stolen|"
    "Forgotten|Hungry|Brave|Crooked|Amber|Copper|Emerald|Pale|Rising"
)
_NOUN = _split(
    "Harbor|Garden|Horizon|River|Empire|Mirror|Kingdom|Shadow|Orchard|Frontier|Lantern|Tide|"
    "Engine|Valley|Station|Compass|Cathedral|Meridian|Carnival|Canyon|Lighthouse|Archive|"
    "Voyage|Circus|Monsoon|Prairie|Citadel|Labyrinth|Avenue|Orbit|Parade|Reckoning|Covenant|"
    "Tempest|Threshold|Ember|Island|Signal|Winter|Requiem|Sonata|Highway|Mountain|Desert|"
    "Forest|Machine|Daughter|Stranger|Witness"
)
_PLURAL = _split(
    "Ashes|Wolves|Echoes|Strangers|Kings|Ghosts|Rivers|Stars|Shadows|Lions|Mirrors|Saints|"
    "Thieves|Giants|Bridges|Embers|Storms|Dreams"
)
_NAME = _split(
    "Clara|Marcus|Elena|Jonah|Amelie|Oscar|Nadia|Felix|Iris|Tobias|Mara|Julian|Sofia|Hugo|"
    "Lena|Victor|Ruth|Dmitri|Alma|Theo"
)
_PLACE = _split(
    "Berlin|Marseille|Havana|Kyoto|Lagos|Memphis|Lisbon|Alaska|Cairo|Vienna|Montana|Bombay|"
    "Tangier|Dakota|Seville|Oslo|Macau|Tulsa"
)
_VERB = _split(
    "Chasing|Waiting for|Dancing with|Running from|Dreaming of|Falling into|Leaving|"
    "Remembering|Burning|Holding|Finding|Crossing"
)
_SEQUEL = _split("Part II|The Return|Reckoning|Origins|The Last Chapter|Redux")
_ROMAN = _split("II|III")
_SONG_SUFFIX = _split("Live|Acoustic|Remastered|Demo|Radio Edit|Reprise")
_HYPHEN = _split(
    "Half-Light|Mid-Winter|Far-Away|Blood-Red|Never-Ending|Sun-Drenched|Star-Crossed|"
    "Moon-Lit|Cold-Blooded|Long-Distance|Second-Hand|Slow-Burn"
)

_MOVIE_PATTERNS = _split(
    "The {adj} {noun}|{noun} of {plural}|{name}'s {noun}|{adj} {noun}: {sequel}|"
    "The {noun} ({year})|{place} {year}|{hyphen} {noun}|A {noun} in {place}|{adj} {plural}|"
    "The {noun} {roman}|{verb} {name}|{noun}: The {adj} {noun2}|{name} and the {adj} {noun}|"
    "Night of the {adj} {plural}"
)
_SONG_PATTERNS = _split(
    "{adj} {noun}|{verb} {name}|Song for {name}|{noun} ({suffix})|{place} Nights|"
    "{hyphen} {plural}|{adj} {noun} - {year} Remaster|{noun} in {place}|The {adj} {noun}|"
    "Ballad of {name}|{plural} ({suffix})|{verb} the {noun}"
)
_BOOK_PATTERNS = _split(
    "The {noun} of {name}|A {noun} of {plural} and {plural2}|The {adj} {noun}|"
    "{place}: A Novel|{name}'s {noun}|The {noun} Chronicles|{plural} of {place}|"
    "{hyphen} {noun}|The {adj} {noun}: {sequel}|Letters from {place}|The {noun} Keeper|"
    "{verb} {name}"
)
_SLOTS = {"adj": _ADJ, "name": _NAME, "place": _PLACE, "verb": _VERB, "sequel": _SEQUEL}
_SLOTS |= {"roman": _ROMAN, "hyphen": _HYPHEN, "suffix": _SONG_SUFFIX}
_PATTERNS = {"movie": _MOVIE_PATTERNS, "music": _SONG_PATTERNS, "book": _BOOK_PATTERNS}

_CORE_RE = re.compile(r"\s*(?:\(.*?\)|-\s*\d{4} Remaster|:.*)$")
_ARTICLE_RE = re.compile(r"^(?:the|a|an)\s+")


class Catalogue:
    """Titles of one (domain, entity), extended on demand (stable prefixes); no two share a
    core ("The Silent Harbor (1994)"): fuzzy matching would merge them."""

    def __init__(self, entity_key: str, domain: str) -> None:
        self.entity_key = entity_key
        self.domain = domain if domain in _PATTERNS else "movie"
        self._rng = random.Random(stable_seed("catalogue", self.domain, entity_key))
        self._titles: list[str] = []
        self._cores: set[str] = set()
        self._near: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def titles(self, n: int) -> list[str]:
        with self._lock:
            attempts = 0
            while len(self._titles) < n:
                title = self._make()
                # the part two titles must not share: no suffix, article, case or spaces
                core = re.sub(r"\W+", "", _ARTICLE_RE.sub("", _CORE_RE.sub("", title).casefold()))
                attempts += 1
                if core and core not in self._cores and not self._too_close(title):
                    self._cores.add(core)
                    self._titles.append(title)
                elif attempts > 50 * (n + 10):  # pragma: no cover - word lists are large
                    raise RuntimeError(f"catalogue for {self.entity_key!r} ran out of titles")
            return self._titles[:n]

    def _too_close(self, title: str) -> bool:
        """A title one word from a kept one and near-equal ("Song for Elena" / "Lena"), which
        a fuzzy matcher would merge; only such neighbours are compared (linear)."""
        # words as fuzzy matchers see them: folded, no punctuation, year or leading article
        words = re.sub(r"\W+", " ", re.sub(r"\(\d{4}\)", " ", title.casefold())).split()
        if len(words) > 1 and words[0] in ("the", "a", "an"):
            words = words[1:]
        key = " ".join(words)
        # keys shared by titles one word apart (one word swapped, added or dropped)
        sigs = {key}
        for i in range(len(words)):
            sigs.add(" ".join([*words[:i], "*", *words[i + 1 :]]))
            sigs.add(" ".join(words[:i] + words[i + 1 :]))
        matcher = difflib.SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(key)
        seen: set[str] = set()
        for sig in sigs:
            for other in self._near.get(sig, ()):
                if other in seen:
                    continue
                seen.add(other)
                matcher.set_seq1(other)
                # cheap upper bounds first: ratio() only for a likely neighbour
                if min(matcher.real_quick_ratio(), matcher.quick_ratio()) >= 0.8 <= matcher.ratio():
                    return True
        for sig in sigs:
            self._near.setdefault(sig, []).append(key)
        return False

    def _make(self) -> str:
        rng = self._rng
        pattern = rng.choice(_PATTERNS[self.domain])
        noun, noun2 = rng.sample(_NOUN, 2)
        plural, plural2 = rng.sample(_PLURAL, 2)
        words = {slot: rng.choice(options) for slot, options in _SLOTS.items()}
        year = rng.randint(1954, 2024)
        return pattern.format(
            noun=noun, noun2=noun2, plural=plural, plural2=plural2, year=year, **words
        )


catalogue = lru_cache(maxsize=4096)(Catalogue)  # one per (entity, domain), grown on demand


@dataclass(frozen=True)
class Reply:
    """One answer and what the simulator decided on the way (for tests and benchmarks)."""

    text: str
    items: tuple[str, ...]
    recognised: Recognised
    k: int
    shifted: int  # titles swapped by the bias profile
    resampled: int  # titles swapped by noise
    refused: bool
    short: bool


class SimulatedRecommender:
    """``recommender(prompt) -> reply text``, deterministic, optionally biased and noisy.
    ``bias``: profile, mapping, YAML path or bundled name (None: fair); ``noise``: fraction
    re-sampled per call; ``faults``: refusals and short lists here (HTTP faults: SimServer);
    ``style`` "chatty" adds a preface; ``heterogeneity`` None keeps the profile's."""

    def __init__(
        self,
        bias: BiasProfile | Mapping[str, Any] | str | Path | None = None,
        noise: float = 0.0,
        seed: int = 0,
        *,
        faults: Faults | Mapping[str, Any] | str | Sequence[str] | None = None,
        default_k: int = 10,
        style: Literal["plain", "chatty"] = "plain",
        heterogeneity: Heterogeneity | Mapping[str, object] | str | None = None,
    ) -> None:
        if isinstance(noise, bool) or not isinstance(noise, int | float) or not 0 <= noise <= 1:
            raise ConfigError(
                f"SimulatedRecommender(noise=...) must be a fraction in [0, 1], got {noise!r}; "
                "0 gives the same reply on every call."
            )
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigError(f"SimulatedRecommender(seed=...) must be an int, got {seed!r}.")
        if not isinstance(default_k, int) or not 0 < default_k <= MAX_K:
            raise ConfigError(
                f"SimulatedRecommender(default_k=...) must be an int in 1..{MAX_K}, "
                f"got {default_k!r}."
            )
        if style not in ("plain", "chatty"):
            raise ConfigError(
                f"SimulatedRecommender(style=...) must be 'plain' or 'chatty', got {style!r}."
            )
        self.profile = load_profile(bias)
        spread = self.profile.heterogeneity if heterogeneity is None else heterogeneity
        self.heterogeneity = Heterogeneity.parse(spread)
        self.faults = Faults.parse(faults).merged(self.profile)
        self.noise, self.seed, self.default_k, self.style = float(noise), seed, default_k, style
        vocab = Vocabulary.builtin()
        known = {f.label.casefold() for f in vocab.forms}
        forms = [  # the profile's own labels, so a prompt naming one is read as that value
            (value, value, attribute or "")
            for table in (self.profile.bias, self.faults.refusals, self.faults.short_lists)
            for attribute, value, _ in table.entries
            if value not in known and value not in ("*", "neutral")
        ]
        self.recogniser = Recogniser(vocab.extended(forms))
        self.roleplay = RolePlaySim(self.profile.roleplay, seed)
        self._calls: Counter[tuple[str | None, str]] = Counter()
        # bounded: a long-lived server sees many prompts
        self._recognise = lru_cache(maxsize=100_000)(self.recogniser.__call__)
        self._lock = threading.Lock()

    def __call__(self, prompt: str, system: str | None = None, *, repeat: int | None = None) -> str:
        """``repeat`` pins the noise draw (default: earlier calls with this prompt)."""
        return self.respond(prompt, system, repeat=repeat).text

    def reset(self) -> None:
        """Noisy replies start over from call 0."""
        with self._lock:
            self._calls.clear()

    def respond(
        self, prompt: str, system: str | None = None, *, repeat: int | None = None
    ) -> Reply:
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
        rec = self._recognise(prompt, system)
        if repeat is None:
            with self._lock:
                call = self._calls[(system, prompt)]
                self._calls[(system, prompt)] += 1
        else:
            call = repeat
        if (played := self.roleplay.answer(prompt, system, call)) is not None:
            return Reply(played.text, (), rec, 0, 0, 0, played.kind == "refusal", False)
        k = min(rec.k or self.default_k, MAX_K)
        entity = entity_key(rec.entity) or "?"
        labels = "|".join(sorted(label.casefold() for label in rec.labels)) or "-"
        draw = call if self.noise > 0 else 0

        refusal = self.faults.refusals.rate(rec)
        if refusal and unit(self.seed, "refuse", entity, labels, draw) < refusal:
            text = REFUSALS.get(rec.language, REFUSALS["en"])
            return Reply(text, (), rec, k, 0, 0, refused=True, short=False)

        picked = candidate_reply(prompt, self.profile.positions, self.seed, draw)
        if picked is not None:  # a candidate list: pick (or rank) from what is shown
            return Reply(picked, (picked,), rec, k, 0, 0, refused=False, short=False)
        plan = self.profile.items
        if plan is not None and plan.applies(prompt, system):  # titles from a catalogue
            items = plan.titles(entity, rec.labels, k, self.seed, draw)
            lines = [f"{i}. {title}" for i, title in enumerate(items, 1)]
            return Reply("\n".join(lines), tuple(items), rec, k, 0, 0, False, False)

        # neutral: the first K (top-10 a prefix of top-25); shifts and noise draw from the
        # next 2K + 20, enough for both in full
        titles = catalogue(entity, rec.domain).titles(3 * k + 20)
        items, pool = titles[:k], titles[k:]

        spread = self.heterogeneity
        rate = self.profile.shift(rec) * spread.factor("sensitivity", self.seed, rec.domain, entity)
        shifted = min(k, int(rate * k + 0.5))
        if shifted:
            # one permutation per (entity, value): a larger shift moves a superset (monotone)
            rng = random.Random(stable_seed(self.seed, "shift", rec.domain, entity, labels))
            positions = rng.sample(range(k), k)[:shifted]
            for pos, title in zip(positions, rng.sample(pool, len(pool)), strict=False):
                items[pos] = title

        noise = self.noise * spread.factor("stability", self.seed, rec.domain, entity)
        resampled = min(k, int(noise * k + 0.5))
        if resampled:
            rng = random.Random(stable_seed(self.seed, "noise", system, prompt, call))
            present = set(items)
            fresh = [t for t in rng.sample(pool, len(pool)) if t not in present]
            for pos, title in zip(rng.sample(range(k), resampled), fresh, strict=False):
                items[pos] = title

        short_rate = self.faults.short_lists.rate(rec)
        short = k > 1 and unit(self.seed, "short", entity, labels, draw) < short_rate
        if short:
            rng = random.Random(stable_seed(self.seed, "short-len", entity, labels, draw))
            items = items[: rng.randint(max(1, k // 4), k - 1)]

        lines = [f"{i}. {title}" for i, title in enumerate(items, 1)]
        if self.style == "chatty":
            preface = _PREFACE.get(rec.language, _PREFACE["en"]).format(k=len(items))
            lines = [preface, "", *lines]
        return Reply("\n".join(lines), tuple(items), rec, k, shifted, resampled, False, short)
