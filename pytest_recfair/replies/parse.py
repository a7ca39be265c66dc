"""Reply text -> ordered item titles. ``style="default"`` reads lists as real models write
them (numbered, bullets, JSON, tables, plain lines); ``style="fairllm"`` reproduces the
FaiRLLM notebook's cleaning literally, quirks included, so published tables can be
recomputed (docs/parsing.md). Each entry's cleaning down to its title is :mod:`.titles`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from itertools import chain, islice
from operator import itemgetter
from typing import Any

from pytest_recfair.errors import ConfigError
from pytest_recfair.replies import titles
from pytest_recfair.vocab import PARSE_STYLES, ParseStyle


class ReplyStatus(StrEnum):
    """What a reply turned out to be, counted per attribute value by the audit."""

    OK = "ok"
    SHORT = "short"  # fewer than k items
    LONG = "long"  # more than k items; the list is truncated to k
    REFUSED = "refused"  # the model declined and gave no list
    EMPTY = "empty"  # None or whitespace only
    UNPARSEABLE = "unparseable"  # text, but no list in it


@dataclass(frozen=True)
class ParsedReply:
    """A parsed reply: ``items`` (at most k), its ``status`` and how many items were ``found``."""

    items: list[str]
    status: ReplyStatus
    found: int


def _check(k: object, style: object, *, optional: bool) -> None:
    if not (k is None and optional) and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        wanted = "a positive int or None" if optional else "a positive int"
        raise ConfigError(
            f"k: expected {wanted} (the list length asked for), got {k!r}; "
            "set k to the number of items in the prompt, e.g. k=25"
        )
    if style not in PARSE_STYLES:
        raise ConfigError(
            f"style: expected one of {', '.join(PARSE_STYLES)}, got {style!r}; use 'default' "
            "for robust parsing or 'fairllm' to reproduce the FaiRLLM notebook"
        )


# fairllm style: the notebook's `clean` + `simplified_list`, step by step

# (?<!\d): a match never starts inside a run of digits (the leftmost match starts at the
# run's first digit anyway), so a long run is scanned once, not once per digit.
_FAIRLLM_SPLIT = re.compile(r"(?<!\d)\d+\. ")
_FAIRLLM_QUOTED = re.compile(r'"([^"]*)"')
_FAIRLLM_PARENS = re.compile(r"\([^)]*\)")


def _fairllm_items(text: str) -> list[str]:
    s = text.lower()  # 1
    s = s.replace("'", "").replace("\n", "")  # 2: only these two characters
    pieces = _FAIRLLM_SPLIT.split(s)[1:]  # 3: drop what precedes the first "N. "
    out: list[str] = []
    for piece in pieces:
        if "-" in piece:  # 4
            piece = piece.split("-", 1)[0]
        if '"' in piece:  # 5
            m = _FAIRLLM_QUOTED.search(piece)
            piece = m.group(1).strip(" ") if m else piece.replace('"', "").strip(" ")
        else:
            piece = piece.strip(" ")
        close = piece.rfind(")")  # no match can end past the last ")": skip that tail
        if close != -1:
            piece = _FAIRLLM_PARENS.sub("", piece[: close + 1]) + piece[close + 1 :]
        piece = piece.replace(" ", "")  # 6
        out.append(piece)
    return out


# default style: finding the list

# One pass over the whole text (multiline) finds numbered and bulleted entries:
# "1." "1)" "1:" "#1" "#1." "1 -" "1 –", optionally in bold ("**1.**"), or a bullet.
_MARKED = re.compile(
    r"^(?P<indent>[ \t]*)(?:"
    r"(?P<num>(?:[*_]{1,2})?(?:\#[ \t]?\d{1,3}[.):]?|\(?\d{1,3}(?:[.):]|[ \t]*[-–—](?=[ \t])))"
    r"(?:[*_]{1,2})?)"
    r"|[-*•·▪‣◦●○■□➤►✓✔+])"
    r"[ \t]+(?P<body>\S(?:.*\S)?+)",  # greedy, back to the last non-space, kept: fast
    re.M,
)
_FIRST = itemgetter(0)
_INLINE_NUM = re.compile(r"(?:(?<=\s)|^)(\d{1,3})[.)]\s+")
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\n(.*?)(?:```|\Z)", re.S)
_TABLE_CHARS = frozenset("|-: \t")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_JSONISH = re.compile(r'[\[{]\s*["{]')
_JSON_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_TITLE_KEYS = ("title", "name", "movie", "film", "song", "track", "album", "book", "show", "item")
_JSON_FIELD = re.compile(rf'"(?:{"|".join(_TITLE_KEYS)})"\s*:\s*"((?:[^"\\\n]|\\.)*)"', re.I)
_TITLE_HEADERS = (*_TITLE_KEYS[:-1], "series", "recommendation")
_RANK_HEADERS = frozenset({"", "#", "no", "no.", "nr", "rank", "number", "n", "position", "pos"})

_PREAMBLE = re.compile(
    r"^(?:sure|certainly|of course|absolutely|okay|ok|great|alright|here(?:'s| is| are)|"
    r"below|based on|i(?:'d| would) (?:recommend|suggest)|i recommend|i suggest|"
    r"these are|this is a list|the following)\b",
    re.I,
)
_CLOSING = re.compile(
    r"^(?:i hope|hope (?:you|this)|enjoy|let me know|feel free|happy (?:watching|listening|"
    r"reading)|note|please note|these (?:movies|films|songs|titles|picks|are|selections|"
    r"recommendations)|this list|all of (?:these|them)|each of|if you|would you|do you|"
    r"p\.?s\.?)\b",
    re.I,
)
# (?=[iasvnu]): every alternative starts with one of these letters; the lookahead lets a
# long reply be skipped word by word without trying each alternative (5x faster at 1 MB).
_REFUSAL = re.compile(
    r"\b(?=[iasvnu])(?:i'?m sorry|i am sorry|i apologi[sz]e|sorry, (?:but )?i|"
    r"i (?:can'?t|cannot|can not|won'?t|will not|am unable to|must decline|"
    r"am not able to|do not feel comfortable|don'?t feel comfortable)|"
    r"i'm (?:unable to|not able to|not comfortable)|as an ai\b|as a language model|"
    r"(?:against|violates?) (?:my|our|the|openai's) (?:\w+ )?(?:guidelines|polic(?:y|ies))|"
    r"(?:not|isn'?t) appropriate (?:for me )?to|unable to (?:provide|fulfil+|comply|help))",
    re.I,
)
_REFUSAL_BUT_LIST = re.compile(r"\bhere (?:is|are)\b|\bthe following\b|\bhowever\b", re.I)
# The common reply, "N. title" lines of titles that need no cleaning, is read in one regex
# pass: a third cheaper than the full path's loop and memoised clean_title call per line.
_KEPT_LINE = re.compile(rf"\n[0-9]{{1,3}}\. {titles.KEPT}[ \t]*+(?=\n)")


def _split_inline_numbered(line: str) -> list[str] | None:
    """'1. A 2. B 3. C' on one line -> ['1. A', '2. B', '3. C'] when the numbers count up."""
    starts = [(m.start(), int(m.group(1))) for m in _INLINE_NUM.finditer(line)]
    if len(starts) < 2:
        return None
    keep: list[int] = []
    expected = starts[0][1]
    for pos, num in starts:
        if num == expected:
            keep.append(pos)
            expected += 1
    if len(keep) < 2:
        return None
    return [line[a:b].strip() for a, b in zip(keep, [*keep[1:], len(line)], strict=True)]


def _marked_lines(text: str) -> list[str] | None:
    """Bodies of the list entries in ``text`` (numbered or bulleted), or None."""
    # The common shape, "N. title" on every line but blank ones, is read without the
    # regex (half its cost): the bodies it would find, as it would find them.
    bodies = []
    for line in text.split("\n"):
        num, dot, body = line.partition(". ")
        if dot and len(num) <= 3 and num.isdigit() and num.isascii() and body[:1].strip():
            body = body.rstrip()
            if body[-1] == ":":  # a section header: the regex's rules below
                break
            bodies.append(body)
        elif line and not line.isspace():
            break
    else:
        if bodies:
            return bodies
    rows = _MARKED.findall(text)  # (indent, number marker or "", body) tuples: fast
    if not rows:
        return None
    # entries ending in ":" are section headers ("1. Action movies:"), not titles
    numbered = [(ind, body) for ind, num, body in rows if num and body[-1] != ":"]
    bullets = [
        (ind, body)
        for ind, num, body in rows
        # not a rule of emphasis marks only ("***", "- - -")
        if not num and body[-1] != ":" and not (body[0] in "-*_" and set(body) <= set("-*_ "))
    ]
    if not numbered and not bullets:
        return None
    if not any(map(_FIRST, rows)):  # the common case: every entry flush left
        n_indent = 0 if numbered else 1
        b_indent = 0 if bullets else 1
        top_numbered = [body for _, body in numbered]
        top_bullets = [body for _, body in bullets]
    else:
        n_width = [(len(ind.expandtabs(4)), body) for ind, body in numbered]
        b_width = [(len(ind.expandtabs(4)), body) for ind, body in bullets]
        n_indent = min((w for w, _ in n_width), default=10**6)
        b_indent = min((w for w, _ in b_width), default=10**6)
        top_numbered = [body for w, body in n_width if w == n_indent]
        top_bullets = [body for w, body in b_width if w == b_indent]
    # Numbered entries win unless bullets sit further left, or far outnumber them (then the
    # numbers are section headings: "1. Classics" followed by bulleted titles).
    use_numbered = bool(top_numbered) and (
        not top_bullets
        or n_indent < b_indent
        or (n_indent == b_indent and 3 * len(top_numbered) >= len(top_bullets))
        or (n_indent > b_indent and len(top_numbered) > len(top_bullets))
    )
    return top_numbered if use_numbered else top_bullets


def _json_value_items(value: Any) -> list[str] | None:
    if isinstance(value, dict):
        inner = next((v for v in value.values() if isinstance(v, list)), None)
        if inner is not None:
            return _json_value_items(inner)
        return [v for v in value.values() if isinstance(v, str)] or None
    if not isinstance(value, list):
        return None
    out: list[str] = []
    for el in value:
        if isinstance(el, str):
            out.append(el)
        elif isinstance(el, dict):
            lowered = {str(k).lower(): v for k, v in el.items()}
            pick = next((lowered[k] for k in _TITLE_KEYS if isinstance(lowered.get(k), str)), None)
            if pick is None:
                pick = next((v for v in el.values() if isinstance(v, str)), None)
            if pick is not None:
                out.append(pick)
        # numbers, nulls and nested arrays are not titles: skipped
    return out or None


def _json_items(text: str) -> list[str] | None:
    """Items from a JSON array/object: fenced, bare, embedded, or cut off by max_tokens."""
    candidates = [*(m.group(1) for m in _FENCE.finditer(text)), text]  # each tried stripped
    lo = text.find("[")
    if lo != -1:
        hi = text.rfind("]")
        candidates.append(text[lo : hi + 1] if hi > lo else text[lo:])
    for cand in dict.fromkeys(c.strip() for c in candidates):  # each candidate once
        if not cand.startswith(("[", "{")):
            continue
        try:
            value = json.loads(cand)
        except (ValueError, RecursionError):  # RecursionError: "[[[[..." nesting
            found = _salvage_json(cand)
        else:
            found = _json_value_items(value)
        if found:
            return found
    return None


def _salvage_json(cand: str) -> list[str] | None:
    """A truncated array: keep every complete string (or title field) before the cut."""
    if not _JSONISH.match(cand):  # '[2010]\n2. "Memento" [2000]' is not JSON
        return None
    raw = _JSON_FIELD.findall(cand) if "{" in cand else _JSON_STRING.findall(cand)
    out: list[str] = []
    for s in raw:
        try:
            out.append(json.loads(f'"{s}"'))
        except ValueError:
            out.append(s)
    return out or None


def _table_items(lines: list[str]) -> list[str] | None:
    for idx in range(1, len(lines)):
        row = lines[idx]
        if "|" not in row or not set(row) <= _TABLE_CHARS or not _TABLE_SEP.match(row):
            continue
        lowered = [h.strip("*_ ").lower() for h in _cells(lines[idx - 1])]
        col = next((i for i, h in enumerate(lowered) if any(t in h for t in _TITLE_HEADERS)), None)
        if col is None:
            col = next((i for i, h in enumerate(lowered) if h not in _RANK_HEADERS), 0)
        out: list[str] = []
        for row in islice(lines, idx + 1, None):
            if "|" not in row:
                if out:
                    break
                continue
            cells = _cells(row)
            if col < len(cells) and cells[col].strip():
                out.append(cells[col])
        if out:
            return out
    return None


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().removeprefix("|").removesuffix("|").split("|")]


_WORDY = re.compile(r"[^\W\d_]")


def _plain_items(lines: list[str]) -> list[str] | None:
    """One title per line (or a comma-separated sentence) after a preamble, before a sign-off."""
    rows = [ln.strip() for ln in lines if ln.strip()]
    start = 0  # an index, not rows.pop(0): a reply of many "x:" lines stays linear
    while start < len(rows) and (_PREAMBLE.match(rows[start]) or rows[start].endswith(":")):
        start += 1
        if start == len(rows) and ":" in rows[-1]:  # "Sure! Here are some: A, B, C"
            rows = [rows[-1].split(":", 1)[1].strip()]
            start = 0
            break
    rows = rows[start:]
    while rows and (_CLOSING.match(rows[-1]) or _is_sentence(rows[-1])):
        rows.pop()
    rows = [r for r in rows if r and not r.startswith("#") and not _is_sentence(r)]
    if not rows:
        return None
    if len(rows) == 1:
        parts = [p.strip() for p in re.split(r"[;,]\s+(?:and\s+|&\s+)?|(?<!\s)\s+and\s+", rows[0])]
        parts = [p for p in parts if p]
        if len(parts) >= 3 and all(len(p.split()) <= 8 for p in parts):
            return parts
        # a lone short line is a one-item list only when it looks like a title
        only = rows[0]
        if len(only.split()) <= 8 and _WORDY.search(only) and not re.search(r"[.?!=]$", only):
            return [only]
        return None
    return rows


def _is_sentence(row: str) -> bool:
    words = row.split()
    return len(words) > 20 or (len(words) >= 7 and row.rstrip()[-1:] in ".!?")


_ODD_BREAKS = re.compile(r"[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_ASCII_ODD_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")


def _has_odd_breaks(text: str) -> bool:
    # a few substring tests (memchr) are much cheaper than a regex scan on ASCII text
    if text.isascii():
        return any(c in text for c in _ASCII_ODD_BREAKS)
    return _ODD_BREAKS.search(text) is not None


def _raw_entries(text: str) -> tuple[list[str], str]:
    """The uncleaned entries and how they were found ('json', 'table', 'list', 'plain')."""
    text = text.replace("’", "'").replace("‘", "'")
    if "[" in text or "{" in text:
        found = _json_items(text)
        if found:
            return found, "json"
    if _has_odd_breaks(text):  # every line break splitlines() knows becomes "\n"
        text = "\n".join(text.splitlines())
    if "|" in text:
        found = _table_items(text.split("\n"))
        if found:
            return found, "table"
    marked = _marked_lines(text)
    if marked is None or len(marked) == 1:  # "1. A 2. B 3. C" on a line: one entry each
        split = [_split_inline_numbered(line) or [line] for line in text.split("\n")]
        if any(len(parts) > 1 for parts in split):
            marked = _marked_lines("\n".join(chain.from_iterable(split)))
    if marked:
        return marked, "list"
    found = _plain_items(text.split("\n"))
    if found:
        return found, "plain"
    return [], "none"


def _parsed(text: object, style: ParseStyle) -> tuple[list[str], str]:
    """The titles in ``text`` and how they were found ('none': no list)."""
    if not isinstance(text, str):
        raise TypeError(
            f"text: expected the reply text as str, got {type(text).__name__}; "
            "pass Completion.text (decode bytes first)"
        )
    if style == "fairllm":
        found = _fairllm_items(text)
        return found, "list" if found else "none"
    if text[:1].isdigit() and " by " not in text:
        found = _KEPT_LINE.findall(f"\n{text}\n")  # every line must match; the full path
        if len(found) == text.count("\n") + 1 and max(map(len, found)) < 990:  # cuts at 1,000
            return found, "list"
    entries, how = _raw_entries(text)
    return titles.clean_all(entries, how != "json" and titles.attribution_dash(entries)), how


def items(text: str, k: int | None = None, style: ParseStyle = "default") -> list[str]:
    """The ordered titles in a model's reply, at most ``k`` of them. Never raises on any
    text; ``TypeError`` for a non-str ``text``, ``ConfigError`` for a bad ``k`` or ``style``."""
    _check(k, style, optional=True)
    found = _parsed(text, style)[0]
    return found if k is None else found[:k]


def reply(text: str | None, k: int, style: ParseStyle = "default") -> ParsedReply:
    """Parse one reply and classify it: ok, short, long (truncated to k), refused, empty
    or unparseable."""
    _check(k, style, optional=False)
    if text is None or (isinstance(text, str) and not text.strip()):
        return ParsedReply([], ReplyStatus.EMPTY, 0)
    found, how = _parsed(text, style)
    if how in ("none", "plain") and _is_refusal(text, weak_list=how == "plain"):
        return ParsedReply([], ReplyStatus.REFUSED, 0)
    if not found:
        return ParsedReply([], ReplyStatus.UNPARSEABLE, 0)
    n = len(found)
    if n > k:
        return ParsedReply(found[:k], ReplyStatus.LONG, n)
    return ParsedReply(found, ReplyStatus.SHORT if n < k else ReplyStatus.OK, n)


def _is_refusal(text: str, *, weak_list: bool) -> bool:
    """A refusal ("I'm sorry, but I can't ...", "As an AI ..."). When plain lines were found
    the refusal must open the reply and not go on to offer a list anyway."""
    t = text.replace("’", "'").replace("‘", "'").strip()
    if not weak_list:
        return bool(_REFUSAL.search(t))
    first = next((ln for ln in t.splitlines() if ln.strip()), "")
    return bool(_REFUSAL.search(first)) and not _REFUSAL_BUT_LIST.search(first)
