"""The reply size cap: replies longer than a limit are cut, with a note, before anything
stores or parses them.

A recommender asked for 25 titles answers in a few kilobytes; a reply of megabytes is a
runaway generation, and keeping it whole makes cassettes of hundreds of megabytes (20 such
prompts: 96 MB). :func:`cut_text` keeps the first ``limit`` characters and appends
:func:`note`; :func:`cut_json` does the same to every over-long string of a decoded JSON
response body (the reply text of any provider's format), so the recorded body stays valid
JSON that replays to the same cut reply.

Pure: stdlib only.
"""

from __future__ import annotations

import contextlib
from typing import Final

from pytest_recfair.errors import ConfigError

__all__ = ["DEFAULT_MAX_REPLY_CHARS", "check_limit", "cut_json", "cut_text", "note", "was_cut"]

#: 100,000 characters: about 40 times a 25-item list with a sentence per title.
DEFAULT_MAX_REPLY_CHARS: Final = 100_000
_NOTE_MARK: Final = "[recfair: reply cut at "


def check_limit(value: object, name: str = "recfair_max_reply_chars") -> int:
    """A positive character limit, or a one-line ConfigError naming ``name``."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = int(value.strip().replace("_", ""))
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"{name}: expected a positive number of characters, got {value!r}; "
            f"use e.g. {name} = {DEFAULT_MAX_REPLY_CHARS}"
        )
    return value


def note(original_chars: int, limit: int) -> str:
    """The line appended to a cut reply (on its own line, so it never joins a title)."""
    return (
        f"\n{_NOTE_MARK}{limit:,} of {original_chars:,} characters; raise "
        "recfair_max_reply_chars to keep more]"
    )


def was_cut(text: str) -> bool:
    """Does ``text`` end with a cut note?"""
    return _NOTE_MARK in text[-200:]


def cut_text(text: str, limit: int) -> tuple[str, bool]:
    """``(text, False)`` when it fits, else ``(first limit chars + note, True)``."""
    if len(text) <= limit:
        return text, False
    return text[:limit] + note(len(text), limit), True


def cut_json(value: object, limit: int) -> tuple[object, int]:
    """A decoded JSON value with every string longer than ``limit`` cut (with the note),
    and how many were cut. Containers are copied only where something was cut."""
    if isinstance(value, str):
        out, cut = cut_text(value, limit)
        return out, int(cut)
    if isinstance(value, dict):
        total = 0
        items: dict[object, object] = {}
        for k, v in value.items():
            items[k], n = cut_json(v, limit)
            total += n
        return (items if total else value), total
    if isinstance(value, list):
        total = 0
        elems: list[object] = []
        for v in value:
            new, n = cut_json(v, limit)
            elems.append(new)
            total += n
        return (elems if total else value), total
    return value, 0
