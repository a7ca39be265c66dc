"""Item matching: one canonical key per title, so "Amélie" and "Amelie" count as one item.
``normalize`` folds text deterministically; ``canonicalize`` merges near-duplicate keys
within ONE entity with rapidfuzz, under guards that keep sequels and plurals apart, and
returns (and logs) every fuzzy merge for review."""

from __future__ import annotations

import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain

import numpy as np
import numpy.typing as npt
from rapidfuzz import fuzz, process

from pytest_recfair.errors import ConfigError

logger = logging.getLogger(__name__)

#: rapidfuzz ``fuzz.ratio`` (0-100) on normalised keys needed to merge two titles. At 90 a
#: single edit is tolerated from about 10 characters on ("spiderman" / "spider man").
DEFAULT_THRESHOLD = 90.0
#: Keys shorter than this (in characters) are never fuzzy-merged: on short titles one edit
#: is a different title ("Heat" / "Beat").
MIN_FUZZY_LENGTH = 6
#: Keys longer than this are never fuzzy-merged (no title is this long).
MAX_FUZZY_LENGTH = 200
#: Entries of each title cache: a chunk of entities' titles (a few thousand) hit, while
#: the caches stay a few MB however many distinct titles a 10,000-entity audit has.
CACHE_SIZE = 1 << 14


@dataclass(frozen=True)
class Merge:
    """One fuzzy merge: ``merged`` now counts as ``kept`` (both as first written)."""

    entity: str | None
    kept: str
    merged: str
    score: float


# normalize

_DASHES = dict.fromkeys(map(ord, "‐‑‒–—―−﹘﹣－"), "-")
_QUOTES = dict.fromkeys(map(ord, "‘’‚‛′`´"), "'") | dict.fromkeys(map(ord, "“”„‟″«»"), '"')
_ELISION = re.compile(r"^l'\s*(?=\w)")
_YEAR_PAREN = re.compile(r"\(\s*(?:1[89]|20)\d\d\s*\)")
_TOKEN = re.compile(r"[^\W_]+")
# One leading article is dropped, in the languages of the bundled templates. Not Italian
# "i" or German "die": those are also English words ("I, Robot", "Die Hard").
# fmt: off
_ARTICLES = frozenset([
    "the", "a", "an", "le", "la", "les", "el", "los", "las", "un", "una", "uno", "der", "das",
    "ein", "eine", "il", "lo", "gli", "o", "os", "as",
])
# fmt: on
_UNITS = ("", "i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix")
#: Sequel numerals 'ii'..'xxxix' -> '2'..'39'; not a lone 'v' or 'x' (a letter, a name).
_ROMAN = {r: str(n) for n in range(2, 40) if len(r := "x" * (n // 10) + _UNITS[n % 10]) > 1}


def _strip_latin_marks(text: str) -> str:
    """Drop accents on Latin letters only ("Amélie" -> "Amelie"); other scripts keep their
    combining marks, which change the word (Japanese dakuten, Devanagari vowel signs)."""
    out: list[str] = []
    base_latin = False
    for ch in unicodedata.normalize("NFKD", text):
        if unicodedata.combining(ch):
            if not base_latin:
                out.append(ch)
            continue
        base_latin = ch < "\u0250"
        out.append(ch)
    return unicodedata.normalize("NFC", "".join(out))


@lru_cache(maxsize=CACHE_SIZE)
def normalize(title: str) -> str:
    """The canonical key of a title: folded, punctuation-free, without a leading article
    ("Amélie"/"Amelie", "&"/"and", "Rocky II"/"Rocky 2" share one). Numbers stay; a
    title of punctuation only keeps its folded text, so it never collapses to ""."""
    if not isinstance(title, str):
        raise TypeError(f"title: expected str, got {type(title).__name__}; pass the item text")
    if title.isascii():  # the common case: NFKC, dashes and accents have nothing to do
        s = title.lower()
        if "`" in s:
            s = s.replace("`", "'")
    else:
        s = unicodedata.normalize("NFKC", title).casefold()
        s = _strip_latin_marks(s.translate(_DASHES).translate(_QUOTES))
    if "(" in s:
        s = _YEAR_PAREN.sub(" ", s)
    if "&" in s:
        s = s.replace("&", " and ")
    if "'" in s:
        s = _ELISION.sub("", s.strip())
        s = s.replace("'", "")  # "sorcerer's" -> "sorcerers", not "sorcerer s"
    tokens = _TOKEN.findall(s)  # runs of letters/digits; all else separates
    if len(tokens) > 1 and tokens[0] in _ARTICLES:
        tokens = tokens[1:]
    for i, tok in enumerate(tokens):
        if tok.strip("ivx"):  # cheap test first: most tokens are not numerals
            continue
        n = _ROMAN.get(tok)
        if n is not None:
            tokens[i] = n
        elif tok == "i" and i == len(tokens) - 1 and i > 0:  # "Part I", "Episode I"
            tokens[i] = "1"
    key = " ".join(tokens)
    return key or " ".join(unicodedata.normalize("NFKC", title).casefold().split())


# canonicalize

_DIGITS = re.compile(r"\d+")


@lru_cache(maxsize=CACHE_SIZE)
def _numbers(key: str) -> tuple[str, ...]:
    return tuple(_DIGITS.findall(key))


def _plural_pair(a: str, b: str) -> bool:
    """The keys differ only by a trailing 's' on some word ("alien" / "aliens")."""
    ta, tb = a.split(), b.split()
    if len(ta) != len(tb):
        return False
    diff = [(x, y) for x, y in zip(ta, tb, strict=True) if x != y]
    return bool(diff) and all(x + "s" == y or y + "s" == x for x, y in diff)


def _may_merge(a: str, b: str) -> bool:
    """Guards that run before any score counts."""
    if _numbers(a) != _numbers(b):  # sequels: "toy story 2" / "toy story 3", "rocky" / "rocky 2"
        return False
    if min(len(a), len(b)) < MIN_FUZZY_LENGTH:
        return False
    # plural-s on short titles is another title ("Alien"/"Aliens"); on long ones a typo
    return not (_plural_pair(a, b) and min(len(a.split()), len(b.split())) <= 3)


def canonicalize(
    lists: Sequence[Sequence[str]],
    *,
    fuzzy: bool = True,
    threshold: float = DEFAULT_THRESHOLD,
    entity: str | None = None,
    aliases: Mapping[str, str] | None = None,
) -> tuple[list[list[str]], list[Merge]]:
    """One entity's lists with each title replaced by its key (equal lists share one list
    of keys: read it, do not change it), and the fuzzy merges made. With ``fuzzy`` a key
    within ``threshold`` (``fuzz.ratio``, 0-100) of a kept key becomes it, unless numbers
    differ, either is under ``MIN_FUZZY_LENGTH`` or they are a short singular/plural pair;
    the most frequent spelling is kept. ``aliases`` (``{"Se7en": "Seven"}``) merge exactly
    and are not reported."""
    if isinstance(lists, str | bytes) or not isinstance(lists, Sequence):
        raise TypeError(
            f"lists: expected a sequence of title lists (one per reply), got "
            f"{type(lists).__name__}; wrap a single list as [titles]"
        )
    alias_keys = {normalize(k): normalize(v) for k, v in (aliases or {}).items()}
    # Equal lists (a fair value repeats the neutral list: 9,000 distinct of 31,000 at paper
    # scale) are keyed once and share that row; a list object given again is not re-read
    # (nor checked again). ``checked`` holds every list read, so their ids stay unique.
    by_id: dict[int, list[str]] = {}
    done: dict[tuple[str, ...], list[str]] = {}
    keyed: list[list[str]] = []
    checked: list[Sequence[str]] = []
    for i, lst in enumerate(lists):
        row = by_id.get(id(lst))
        if row is None:
            _check_list(i, lst)
            t = tuple(lst)
            row = done.get(t)
            if row is None:
                row = done[t] = list(map(normalize, lst))
                if alias_keys:
                    row = done[t] = [alias_keys.get(key, key) for key in row]
            by_id[id(lst)] = row
        checked.append(lst)
        keyed.append(row)
    _check_threshold(threshold)
    rows = {id(row): row for row in keyed}  # distinct rows, first seen first
    # Very long keys (pasted paragraphs, not titles) are matched exactly only: fuzzy
    # scoring cost grows with length squared.
    seen = dict.fromkeys(chain.from_iterable(rows.values()))  # first seen first
    keys = [k for k in seen if len(k) <= MAX_FUZZY_LENGTH]
    if not fuzzy or len(keys) < 2:
        return keyed, []
    # A copy as the choices: given one list twice, rapidfuzz scores pair by pair; given
    # two, several choices at once (SIMD). Same scores, half the time here.
    ratios = process.cdist(keys, keys[:], scorer=fuzz.ratio, score_cutoff=threshold, workers=1)
    np.fill_diagonal(ratios, 0.0)
    if not ratios.any():  # no pair within the threshold (most entities): nothing to count
        return keyed, []
    by = _by_count(keys, rows, keyed)
    target, scores = _fuzzy_targets([keys[i] for i in by], ratios[by][:, by])
    if not target:
        return keyed, []
    # the merges with titles as first written, looked up only for the few merged keys
    surface: dict[str, str] = {}
    wanted = set(target) | set(target.values())
    for lst, row in zip(checked, keyed, strict=True):
        for title, key in zip(lst, row, strict=True):
            if key in wanted and key not in surface:
                surface[key] = title
    merges = [
        Merge(entity, surface.get(target[key], target[key]), surface.get(key, key), score)
        for key, score in scores
    ]
    remap = target.get
    new = {
        i: row if target.keys().isdisjoint(row) else [remap(k, k) for k in row]
        for i, row in rows.items()
    }
    out = [new[id(row)] for row in keyed]
    for m in merges:
        logger.info(
            "recfair: merged %r into %r (ratio %.1f, entity %s)", m.merged, m.kept, m.score, entity
        )
    return out, merges


def _by_count(keys: list[str], rows: dict[int, list[str]], keyed: list[list[str]]) -> list[int]:
    """Positions of ``keys``, the most frequent first (a shared row counts once per reply);
    a stable sort, reverse too: ties keep first-seen order."""
    count = Counter(chain.from_iterable(rows.values()))
    for n_id, n in Counter(map(id, keyed)).items():
        if n > 1:
            for key in rows[n_id]:
                count[key] += n - 1
    return sorted(range(len(keys)), key=lambda i: count[keys[i]], reverse=True)


def _check_list(i: int, lst: object) -> None:
    # a list (the common case) skips the slow Sequence check, and is only read
    if type(lst) is not list and (isinstance(lst, str | bytes) or not isinstance(lst, Sequence)):
        raise TypeError(
            f"lists[{i}]: expected a list of titles, got {type(lst).__name__}; "
            "pass parse.items(...) output"
        )
    if not set(map(type, lst)) <= {str}:  # fast path; find the culprit only on error
        for j, bad in enumerate(lst):
            if not isinstance(bad, str):
                raise TypeError(
                    f"lists[{i}][{j}]: expected a title str, got {type(bad).__name__} ({bad!r})"
                )


def _check_threshold(threshold: float) -> None:
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise TypeError(f"threshold: expected a number 0-100, got {type(threshold).__name__}")
    if not 0.0 <= float(threshold) <= 100.0:
        raise ConfigError(
            f"threshold: expected a rapidfuzz ratio between 0 and 100, got {threshold!r}; "
            f"the default is {DEFAULT_THRESHOLD:g} (higher merges less)"
        )


def _fuzzy_targets(
    order: list[str], scores: npt.NDArray[np.float32]
) -> tuple[dict[str, str], list[tuple[str, float]]]:
    """Which keys merge into which earlier (more frequent) kept key, and each one's score;
    ``scores``: the keys' ``fuzz.ratio``, 0 below the cutoff."""
    # Only pairs above the cutoff are non-zero; visit them in order, earlier keys first.
    candidates: dict[int, list[int]] = {}
    rows, cols = scores.nonzero()
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        if j < i:
            candidates.setdefault(i, []).append(j)
    target: dict[str, str] = {}
    is_kept = [True] * len(order)
    merged: list[tuple[str, float]] = []
    for i in sorted(candidates):
        key = order[i]
        best, best_score = -1, -1.0
        for j in candidates[i]:
            sc = float(scores[i, j])
            if is_kept[j] and sc > best_score and _may_merge(key, order[j]):
                best, best_score = j, sc
        if best < 0:
            continue
        is_kept[i] = False
        target[key] = order[best]
        merged.append((key, round(best_score, 2)))
    return target, merged
