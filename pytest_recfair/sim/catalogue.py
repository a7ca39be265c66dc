"""Deterministic per-entity catalogues of plausible titles.

Titles are built from word lists with a random generator seeded by (domain, entity), so
the same entity always gets the same catalogue, in any process, on any machine
(``hashlib``, never ``hash()``, which is salted per process).
"""

from __future__ import annotations

import difflib
import hashlib
import random
import re
import threading
from functools import lru_cache


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
# The one-word slots of the patterns, in the order they are drawn.
_SLOTS = {"adj": _ADJ, "name": _NAME, "place": _PLACE, "verb": _VERB, "sequel": _SEQUEL}
_SLOTS |= {"roman": _ROMAN, "hyphen": _HYPHEN, "suffix": _SONG_SUFFIX}
_PATTERNS = {"movie": _MOVIE_PATTERNS, "music": _SONG_PATTERNS, "book": _BOOK_PATTERNS}

_CORE_RE = re.compile(r"\s*(?:\(.*?\)|-\s*\d{4} Remaster|:.*)$")
_ARTICLE_RE = re.compile(r"^(?:the|a|an)\s+")


def stable_seed(*parts: object) -> int:
    """A 64-bit seed from any parts; identical in every process (unlike ``hash``)."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


def unit(*parts: object) -> float:
    """A uniform draw in [0, 1) from any parts (see :func:`stable_seed`)."""
    return stable_seed(*parts) / 2.0**64


class Catalogue:
    """Titles for one (domain, entity), generated on demand and cached.

    ``titles(n)`` returns the first ``n`` titles; a longer request extends the same list,
    so every prefix is stable. Titles never repeat their core (no "Silent Harbor" next to
    "The Silent Harbor (1994)"), which keeps fuzzy canonicalisation from merging them.
    """

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
        """Reject a title one word away from a kept one when the two strings are near-equal
        ("Song for Elena" / "Song for Lena"): a fuzzy matcher would merge them, and the
        audit would count two different titles as one. Only such neighbours are compared,
        so the check stays linear."""
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


@lru_cache(maxsize=4096)
def catalogue(entity_key: str, domain: str) -> Catalogue:
    """The (shared, thread-safe) catalogue of one entity."""
    return Catalogue(entity_key, domain)
