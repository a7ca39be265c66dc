"""The entities (cities, ...) behind an item-side shift: where the most shifted group's
lists gained the category that moved most, with the items of the neutral and the group's
lists side by side (each title with its catalogue category) and the replies.

Computed from the replies the pooled scorer holds anyway (no extra memory); at most
:data:`~pytest_recfair.engine.overlap.evidence.SHOW` entities per attribute.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_recfair.engine.items.scoring import ItemSideResult, field_codes
from pytest_recfair.engine.overlap.evidence import SHOW, compare_lists, reply_text, shown_titles
from pytest_recfair.replies.catalogue import Catalogue
from pytest_recfair.replies.matching import normalize

__all__ = ["entries"]


def entries(
    cases: Sequence[Any],
    titles: Sequence[list[str] | None],
    matched: Mapping[int, list[int | None] | None],
    catalogue: Catalogue,
    completions: Mapping[str, Any],
    results: Sequence[ItemSideResult],
) -> dict[str, dict[str, Any]]:
    """attribute -> evidence entry (report/evidence.py's shape)."""
    out = {}
    for res in results:
        entry = _entry(cases, titles, matched, catalogue, completions, res)
        if entry is not None:
            out[res.attribute] = entry
    return out


def _entry(
    cases: Sequence[Any],
    titles: Sequence[list[str] | None],
    matched: Mapping[int, list[int | None] | None],
    catalogue: Catalogue,
    completions: Mapping[str, Any],
    res: ItemSideResult,
) -> dict[str, Any] | None:
    shifted = [f for f in res.fields if f.max_shift is not None and f.most_shifted]
    if not shifted:
        return None
    f = max(shifted, key=lambda x: x.max_shift or 0.0)
    group = f.most_shifted or ""
    g = f.groups.index(group)
    moved = [(s or 0.0) - (n or 0.0) for s, n in zip(f.shares[g], f.shares[0], strict=True)]
    cat = max(range(len(moved)), key=lambda i: moved[i])
    codes = field_codes(catalogue, [f.field])[0]
    labels = codes.categories

    def tagged(i: int) -> tuple[list[str], list[str], int, int]:
        """Case i's titles with their category, their keys, items in ``cat``, matched."""
        shown, keys, hits, n = [], [], 0, 0
        for t, m in zip(shown_titles(titles[i] or []), matched.get(i) or [], strict=False):
            code = -1 if m is None else int(codes.codes[m])
            shown.append(f"{t} [{labels[code]}]" if code >= 0 else f"{t} [not in catalogue]")
            keys.append(normalize(t))
            n += code >= 0
            hits += code == cat
        return shown, keys, hits, n

    neutral: dict[str, int] = {}
    grouped: dict[str, list[int]] = {}
    for i, c in enumerate(cases):
        if c.repeat != 0 or titles[i] is None:
            continue
        if c.attribute is None:
            neutral[c.entity_id] = i
        elif c.attribute == res.attribute and (c.group or c.value) == group:
            grouped.setdefault(c.entity_id, []).append(i)
    rows = []
    for entity, idx in grouped.items():
        if entity not in neutral:
            continue
        n_shown, n_keys, n_hits, n_n = tagged(neutral[entity])
        per = [(i, *tagged(i)) for i in idx]
        hits, n = sum(p[3] for p in per), sum(p[4] for p in per)
        score = hits / max(n, 1) - n_hits / max(n_n, 1)
        i, shown, keys, _, _ = max(per, key=lambda p: (p[3], -p[0]))
        n_reply = _reply(completions, cases[neutral[entity]])
        diff = compare_lists(n_shown, n_keys, shown, keys)
        # the added items of the category that moved first: they are the shift
        diff["added"].sort(key=lambda t: not t.endswith(f" [{labels[cat]}]"))
        lists = [
            {"label": "neutral", "titles": n_shown, "reply": n_reply},
            {"label": f"{cases[i].value} ({group})", "titles": shown,
             **diff, "reply": _reply(completions, cases[i])},
        ]  # fmt: skip
        why = f"share of {labels[cat]!r}: neutral {n_hits}/{n_n}, {group} {hits}/{n} ({score:+.3f})"
        rows.append((score, entity, {"entity": cases[i].entity, "score": score, "why": why,
                                     "lists": lists}))  # fmt: skip
    rows.sort(key=lambda r: (-r[0], r[1]))
    if not rows:
        return None
    return {
        "what": (
            f"{f.field}: the {min(SHOW, len(rows))} of {len(rows)} entities whose lists for "
            f"{group} (shift {f.max_shift:.3f} from neutral) gained most {labels[cat]!r} "
            "items; titles tagged with their catalogue category, first repeat"
        ),
        "rows": [r[2] for r in rows[:SHOW]],
    }


def _reply(completions: Mapping[str, Any], case: Any) -> str:
    return reply_text(getattr(completions.get(case.id), "text", None))
