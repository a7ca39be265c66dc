"""Typo perturbation: seeded, deterministic character edits on the attribute words only.

A robustness run asks whether a misspelt attribute ("an Islmaic fan of ...") moves the
recommendations as much as the correctly spelt one. Edits never touch the entity, the
template, articles or helper nouns: only the words a value contributed.

Spec strings (the ``perturbation=`` argument): ``"typo"`` (one edit of any kind),
``"typo:2"`` (two edits), ``"typo:swap+drop"`` (kinds restricted), ``"typo:2:neighbour"``.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_recfair.errors import ConfigError

__all__ = ["KINDS", "NEIGHBOURS", "Typo", "apply_typos", "parse_perturbation", "typo_rng"]

KINDS = ("swap", "drop", "insert", "neighbour")
_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


def _neighbours() -> dict[str, str]:
    """Adjacent keys on a QWERTY keyboard: each row sits half a key right of the one above,
    so "g" touches f, h (same row), t, y (above) and v, b (below)."""
    pos = {ch: (r, c) for r, row in enumerate(_ROWS) for c, ch in enumerate(row)}
    offsets = {-1: (0, 1), 0: (-1, 1), 1: (-1, 0)}  # row delta -> allowed column deltas
    out: dict[str, str] = {}
    for ch, (r, c) in pos.items():
        near = [
            other
            for other, (r2, c2) in pos.items()
            if other != ch and abs(r2 - r) <= 1 and c2 - c in offsets[r2 - r]
        ]
        out[ch] = "".join(sorted(near))
    return out


NEIGHBOURS = _neighbours()


@dataclass(frozen=True)
class Typo:
    edits: int = 1
    kinds: tuple[str, ...] = KINDS

    @property
    def spec(self) -> str:
        """Canonical spec string, recorded in audit metadata and case ids."""
        out = "typo" if self.edits == 1 else f"typo:{self.edits}"
        if tuple(self.kinds) != KINDS:
            out += ":" + "+".join(self.kinds)
        return out


def parse_perturbation(value: str | Typo | None) -> Typo | None:
    """``None`` / ``"none"`` -> no perturbation; ``"typo[:N][:kind+kind]"`` -> Typo."""
    if value is None or isinstance(value, Typo):
        return value
    if not isinstance(value, str):
        raise ConfigError(f"perturbation: expected None or a string like 'typo'; got {value!r}")
    text = value.strip().lower()
    if text in ("", "none"):
        return None
    head, *rest = text.split(":")
    edits = 1
    kinds: tuple[str, ...] = KINDS
    if head != "typo" or len(rest) > 2:
        raise ConfigError(
            f"perturbation: {value!r} is not understood; expected 'typo', 'typo:N', "
            f"'typo:kind+kind' or 'typo:N:kind+kind' with kinds from {', '.join(KINDS)}"
        )
    for part in rest:
        if part.isdigit():
            edits = int(part)
        else:
            chosen = tuple(k.strip() for k in part.split("+"))
            unknown = [k for k in chosen if k not in KINDS]
            if unknown:
                raise ConfigError(
                    f"perturbation: unknown typo kind(s) {unknown} in {value!r}; "
                    f"choose from {', '.join(KINDS)}"
                )
            kinds = chosen
    if edits < 1:
        raise ConfigError(f"perturbation: the number of edits must be >= 1; got {value!r}")
    return Typo(edits=edits, kinds=kinds)


def typo_rng(seed: int, *key: object) -> random.Random:
    """An RNG seeded from (seed, key...) via SHA-256: stable across runs and processes."""
    material = "\x1f".join(str(k) for k in (seed, *key)).encode("utf-8")
    return random.Random(int.from_bytes(hashlib.sha256(material).digest()[:8], "big"))


def _edit(word: str, kind: str, rng: random.Random) -> str:
    n = len(word)
    if kind == "swap":
        spots = [i for i in range(n - 1) if word[i] != word[i + 1]]
        if spots:
            i = rng.choice(spots)
            return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    elif kind == "drop" and n >= 3:
        i = rng.randrange(n)
        return word[:i] + word[i + 1 :]
    elif kind == "insert":
        i = rng.randrange(n)
        ch = word[i]
        near = NEIGHBOURS.get(ch.lower())
        new = rng.choice(near) if near else ch  # doubled key when there is no QWERTY map
        new = new.upper() if ch.isupper() else new
        return word[: i + 1] + new + word[i + 1 :]
    elif kind == "neighbour":
        spots = [i for i, c in enumerate(word) if c.lower() in NEIGHBOURS]
        if spots:
            i = rng.choice(spots)
            new = rng.choice(NEIGHBOURS[word[i].lower()])
            new = new.upper() if word[i].isupper() else new
            return word[:i] + new + word[i + 1 :]
    return word


def _mutate(word: str, typo: Typo, rng: random.Random) -> str:
    # Some kinds cannot apply to a given word (swap on "oo"); try others before giving up.
    kinds = list(typo.kinds)
    rng.shuffle(kinds)
    for kind in [*kinds, "insert"]:
        out = _edit(word, kind, rng)
        if out != word:
            return out
    return word


def apply_typos(text: str, words: Sequence[str], typo: Typo, rng: random.Random) -> str:
    """Apply ``typo.edits`` edits to ``words`` inside ``text`` (nothing else changes)."""
    targets = [w for w in dict.fromkeys(words) if w and w in text]
    long_ones = [w for w in targets if len(w) >= 3]
    targets = long_ones or targets
    if not targets:
        return text
    edited = {w: w for w in targets}
    for _ in range(typo.edits):
        w = rng.choice(targets)
        edited[w] = _mutate(edited[w], typo, rng)
    if all(edited[w] == w for w in targets):
        # Two swaps can cancel out; a perturbed case must differ from the clean one.
        w = rng.choice(targets)
        edited[w] = _mutate(w, typo, rng)
    # Replace whole words only, left to right, so "Asian" inside "Asian-born" is not hit twice.
    out, pos = [], 0
    for w in sorted(targets, key=text.index):
        i = text.find(w, pos)
        if i < 0:
            continue
        out.append(text[pos:i])
        out.append(edited[w])
        pos = i + len(w)
    out.append(text[pos:])
    return "".join(out)
