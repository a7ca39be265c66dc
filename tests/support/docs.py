"""Code blocks of the Markdown docs, for tests that run what a reader copies."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from tests.support.plugin import REPO

DOCS = REPO / "docs"
_FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.MULTILINE | re.DOTALL)
_HEADING = re.compile(r"^#+ (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    path: Path
    lang: str
    section: str  # the last heading above the block
    text: str  # dedented to the fence's indentation


def blocks(path: Path, lang: str) -> list[Block]:
    """Every fenced block of ``lang`` in ``path``, nested ones (in list items) included."""
    doc = path.read_text("utf-8")
    found = []
    for match in _FENCE.finditer(doc):
        indent, kind, body = match.groups()
        if kind != lang:
            continue
        headings = _HEADING.findall(doc, 0, match.start())
        text = "".join(line.removeprefix(indent) + "\n" for line in body.splitlines())
        found.append(Block(path, kind, headings[-1] if headings else "", text))
    return found


def commands(text: str, program: str = "pytest") -> list[list[str]]:
    """The ``program`` command lines of a shell block, split as the shell does (comments
    dropped, backslash continuations joined)."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0] == program:
            out.append(words[1:])
    return out
