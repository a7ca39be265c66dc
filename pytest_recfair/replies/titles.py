"""One list entry of a reply -> its title (the default parse style's cleaning).
Memoised: the same titles recur in every list of an entity."""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import islice

#: Entries of the title cleaning cache: a chunk of entities' lines hit; bounded, so a
#: 10,000-entity audit's distinct titles do not pile up (see matching.CACHE_SIZE).
CACHE_SIZE = 1 << 14

# link text stops at any bracket, so each "[" is scanned up to the next one (linear)
_LINK = re.compile(r"\[([^\[\]]+)\]\([^)]*\)")
_LABELS = ("title", "movie", "film", "song", "track", "album", "book", "name")
_LABEL = re.compile(rf"^(?:\*\*)?(?:{'|'.join(_LABELS)})(?:\*\*)?\s*:\s*", re.I)
_OPEN_CLOSE = {'"': '"', "“": "”", "«": "»", "„": "“", "'": "'", "*": "*", "_": "_", "`": "`"}
_LEAD_WRAPPED = re.compile(
    r"^(?P<w>\*\*|__|\*|_|\"|“|«|„|`)(?P<t>[^\"“”«»„*`]+?)(?:\*\*|__|\*|_|\"|”|»|“|`)"
    r"(?P<rest>(?s:.*))$"
)
_REST_IS_EXTRA = re.compile(r"^(?:$|\s*[(\[,:;|–—-]|\s+by\b|\s+from\b|\s+\d{4}\b|\s*\.)", re.I)
_SEPARATORS = re.compile(r"(?<!\s)\s+[–—-]\s+|—|:\s+|(?<!\s)\s+\|\s+")
_YEAR_PAREN = re.compile(r"(?<!\s)\s*[(\[](?:c\.\s*)?(?:1[89]|20)\d\d(?:[^)\]]*)[)\]]")
_TRAILING_YEAR = re.compile(r"(?<!\s)\s*(?:,|[–—-])\s*(?:1[89]|20)\d\d\s*$")
_BY = re.compile(
    r"(?<!\s)\s+by\s+(?!(?i:me|you|him|her|us|them|myself|yourself|night|day|design|chance|"
    r"proxy|the\s+sea|the\s+way|now)\b)"
    r"[A-Z\d][\w.'&-]*(?:\s+(?:[A-Z\d][\w.'&-]*|&|and|the|of|de|van|von|der|da|la|le))*\s*$"
)
_WORD = re.compile(r"[^\W\d_][\w'.-]*")
# fmt: off
_SMALL_WORDS = frozenset([
    "a", "an", "the", "of", "and", "or", "nor", "but", "in", "on", "at", "to", "for", "with",
    "from", "by", "vs", "vs.", "via", "as", "into", "over", "per", "de", "la", "le", "les", "du",
    "des", "el", "los", "las", "y", "et", "und", "der", "die", "das", "von", "zu", "del", "di",
    "da", "e", "o",
])
_DESC_LEADS = frozenset([
    "directed", "starring", "written", "produced", "featuring", "feat", "feat.", "dir", "dir.",
    "by", "about", "set", "based", "this", "it", "it's", "follows", "tells", "released", "genre",
    "year", "from", "a.k.a.", "aka",
])
# fmt: on


def _is_description(seg: str) -> bool:
    """Is the text after a ' - ' / ': ' separator a description rather than a subtitle?"""
    seg = seg.strip()
    if not seg:
        return True
    if seg[0] in "([":
        return False
    words = _WORD.findall(seg)
    if not words:
        # "Title - 2010" is a year; "Blade Runner: 2049"-like numbers stay part of the title
        return bool(re.fullmatch(r"(?:1[89]|20)\d\d\.?", seg))
    if words[0].lower() in _DESC_LEADS:
        return True
    if any(w[0].islower() and w.lower() not in _SMALL_WORDS for w in words):
        return True
    # Title case all through: a subtitle ("Dr. Strangelove or: How I Learned to Stop
    # Worrying and Love the Bomb") unless it is very long or a multi-word sentence.
    return len(words) > 14 or (len(words) >= 3 and seg[-1] == ".")


_MAX_CUTS = 16


def _split_description(s: str) -> str:
    # a title has a few separators at most; looking at more only costs time on junk
    cuts = list(islice(_SEPARATORS.finditer(s), _MAX_CUTS + 1))
    for i, m in enumerate(cuts[:_MAX_CUTS]):
        if m.start() == 0:
            continue
        end = cuts[i + 1].start() if i + 1 < len(cuts) else len(s)
        if m.group().strip() == "—" or _is_description(s[m.end() : end]):
            return s[: m.start()]
    return s


def _strip_wrapping(s: str) -> str:
    if len(s) < 2 or (s[0] not in _OPEN_CLOSE and s[0] not in '"“”'):
        return s  # the common case
    i, j = 0, len(s)  # indices, not slices: '"""..."""' costs one pass, not one per layer
    while j - i >= 2:
        close = _OPEN_CLOSE.get(s[i])
        if close is not None and s[j - 1] == close:
            i, j = i + 1, j - 1
        elif s[i] in '"“”' and s.count(s[i], i, j) == 1 and s[j - 1] not in '"“”':
            i += 1  # an unbalanced opening quote (cut by max_tokens)
        else:
            break
        while i < j and s[i].isspace():
            i += 1
        while j > i and s[j - 1].isspace():
            j -= 1
    return s[i:j]


def _drop_trailing_parens(s: str) -> str:
    """'Title (2010) (Remastered)' -> 'Title': drop trailing bracket groups, never all."""
    end = len(s.rstrip())
    cut = len(s)
    while end and s[end - 1] in ")]":
        k = end - 2
        while k >= 0 and s[k] not in "()[]":
            k -= 1
        if k < 0 or s[k] not in "([":
            break
        while k and s[k - 1].isspace():
            k -= 1
        if k == 0:  # the group is the whole title: keep it
            break
        end = cut = k
    return s[:cut]


def _link_text(s: str) -> str:
    lead = _LINK.match(s)
    if lead:  # a leading link is the title; what follows it is commentary
        return lead.group(1).strip()
    close = s.rfind(")") + 1  # no link ends past the last ")": the tail is not scanned
    return _LINK.sub(r"\1", s[:close]) + s[close:]


# (?<![*_]): only whole runs of * or _ are tried (same matches; linear on long runs)
_EMPHASIS = re.compile(r"(?:(?<=\s)|^)[*_]+|(?<![*_])[*_]+(?=\s|$|[:,.;)(])")

# Entries that are plain words with at most a "(1999)" need none of the rules below.
_PLAIN, _YEAR = r"[A-Za-z0-9][A-Za-z0-9']*+(?: [A-Za-z0-9']++)*+", r"\((?:1[89]|20)\d\d\)"
_SIMPLE = re.compile(rf"\s*+({_PLAIN})(?:\s*+{_YEAR})?\s*+")


# Capitalised words (inner hyphens allowed), at most one ": " subtitle: none of the rules
# below changes such an entry unless it opens with a label or the subtitle reads as a
# description (then they run). Possessive: nothing that may follow a word can extend it.
_WORD_CAP = r"[A-Z][A-Za-z']*+(?:-[A-Za-z']++)*+"
_CAPITALISED = re.compile(rf"({_WORD_CAP}(?: {_WORD_CAP})*)(?:: ({_WORD_CAP}(?: {_WORD_CAP})*))?")
# An entry after "N. " that the two cases above return as is (bar a "(1999)", kept out of the
# group), as a pattern: parse reads lists of them with no work per entry (having ruled out
# " by "). The lookbehinds and lookahead are clean_title's label and description tests.
_NOT_LABEL = "".join(rf"(?<!\. (?i:{label}): )" for label in _LABELS)
_NOT_LEAD = rf"(?!(?i:{'|'.join(map(re.escape, sorted(_DESC_LEADS)))})\b)"
KEPT = (
    rf"({_PLAIN}|{_WORD_CAP}(?: {_WORD_CAP})*+(?:: {_NOT_LABEL}{_NOT_LEAD}{_WORD_CAP}"
    rf"(?: {_WORD_CAP}){{0,13}})?(?! ?\())(?: ?{_YEAR})?"
)


@lru_cache(maxsize=CACHE_SIZE)
def clean_title(raw: str) -> str:
    simple = _SIMPLE.fullmatch(raw)
    if simple and " by " not in raw:
        return " ".join(simple.group(1).split())
    caps = _CAPITALISED.fullmatch(raw)
    if caps and (
        caps[2] is None
        or (
            caps[1].lower() not in _LABELS
            and caps[2].split(" ", 1)[0].lower() not in _DESC_LEADS
            and caps[2].count(" ") < 14
        )
    ):
        return raw
    s = raw.strip()
    if "](" in s:
        s = _link_text(s)
    if ":" in s:
        s = _LABEL.sub("", s)  # "Title: Inception"
    m = _LEAD_WRAPPED.match(s)
    wrapped = bool(m and m.group("t").strip() and _REST_IS_EXTRA.match(m.group("rest")))
    if m and wrapped:
        s = m.group("t")  # **Title** (2010) - ... / "Title" by Artist
    else:
        if "*" in s or "_" in s or "`" in s:
            s = _EMPHASIS.sub("", s.replace("**", "").replace("__", "").replace("`", ""))
        s = _split_description(s)
    if "(" in s or "[" in s:
        close = max(s.rfind(")"), s.rfind("]")) + 1  # as in _link_text
        s = _drop_trailing_parens(_YEAR_PAREN.sub("", s[:close]) + s[close:])
    s = s.strip()
    if s[-1:].isdigit():
        s = _TRAILING_YEAR.sub("", s)
    s = _strip_wrapping(s.strip())
    if not wrapped and " by " in s:  # a quoted "Stand by Me" is the whole title
        s = _BY.sub("", s)
    s = s.strip().rstrip(",;").strip()
    if s.endswith(".") and not s.endswith("..."):
        last = s.rsplit(None, 1)[-1]
        if len(last) > 3 and last.count(".") == 1:  # keep "Jr." / "U.S." / "Vol."
            s = s[:-1]
    s = _strip_wrapping(s.strip())
    return " ".join(s.split())


def attribution_dash(entries: list[str]) -> bool:
    """Every entry is 'Title - Someone': the dash separates an attribution, not a subtitle."""
    return len(entries) >= 3 and all(
        (" - " in e or " – " in e)
        and not e.lstrip().startswith(("**", '"', "“"))
        and _DASH_SPLIT.search(e.strip())
        for e in entries
    )


_DASH_SPLIT = re.compile(r"\S\s+[-–]\s+\S")

# No title is this long; cutting longer entries first keeps cleaning linear in the reply's
# length whatever an entry holds (a 1 MB "list entry" is cleaned like its first 1,000 chars).
MAX_ENTRY_CHARS = 1000


def clean_all(entries: list[str], dash: bool) -> list[str]:
    """The titles of one reply's entries; ``dash``: entries are "Title - Artist"."""
    if dash:
        entries = [re.split(r"(?<!\s)\s+[-–]\s+", e.strip(), maxsplit=1)[0] for e in entries]
    if max(map(len, entries), default=0) > MAX_ENTRY_CHARS:  # C-level: this runs for every reply
        entries = [e[:MAX_ENTRY_CHARS] for e in entries]
    return list(filter(None, map(clean_title, entries)))  # C-level loop: no empty titles
