"""The entities behind a list-overlap attribute's SNSR, kept while the replies stream by.

Only the :data:`KEEP` entities of widest spread (max - min similarity over values: a bound
on what one entity adds to any gap) keep their lists; (spread, position) order makes merged
shards equal the unsharded keeper."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_recfair import secrets
from pytest_recfair.report.fmt import fmt

#: candidates kept per attribute while streaming (each: its neutral and value lists)
KEEP = 12
#: entities shown per failing attribute
SHOW = 5
#: characters of a reply kept (the lists are always whole)
MAX_REPLY = 4000
_EMPTY = {"notes": ["no titles in this reply (a refusal?): see its text"]}


def reply_text(text: str | None) -> str:
    """A reply as shown: scrubbed of secrets, cut at MAX_REPLY characters."""
    if not text:
        return ""
    clean = secrets.scrub(text)
    return clean if len(clean) <= MAX_REPLY else clean[:MAX_REPLY] + " [...]"


def _spreads(sims: npt.NDArray[np.float64], rows: Sequence[int]) -> list[float | None]:
    """max - min of each row's scored values (None: none scored), for all rows at once."""
    if not rows:
        return []
    block = sims[np.asarray(rows, dtype=np.int64)]
    empty = np.all(np.isnan(block), axis=1)
    filled = np.where(empty[:, None], 0.0, block)  # all-NaN rows: no warning, ignored
    spread = np.nanmax(filled, axis=1) - np.nanmin(filled, axis=1)
    return [None if e else s for e, s in zip(empty.tolist(), spread.tolist(), strict=True)]


def compare_lists(
    neutral: Sequence[str], neutral_keys: Sequence[str], titles: Sequence[str], keys: Sequence[str]
) -> dict[str, list[str]]:
    """kept / dropped / added titles of a list against the neutral one (by title key)."""
    nk, k = set(neutral_keys), set(keys)
    return {
        "kept": [t for t, key in zip(titles, keys, strict=True) if key in nk],
        "dropped": [t for t, key in zip(neutral, neutral_keys, strict=True) if key not in k],
        "added": [t for t, key in zip(titles, keys, strict=True) if key not in nk],
    }


@dataclass
class Candidate:
    """One entity's lists for one attribute: label ("" neutral, else the value) ->
    (titles as written, their title keys, reply text)."""

    entity: str
    name: str
    row: int
    spread: float
    lists: dict[str, tuple[list[str], list[str], str]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, reply texts as shown (scrubbed, cut): what a shard file holds."""
        lists = {k: [t, keys, reply_text(r)] for k, (t, keys, r) in self.lists.items()}
        # vars, not asdict: its deep copy of every list cost a first run ~25,000 copies
        return {**vars(self), "lists": lists}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Candidate:
        return cls(**{**d, "lists": {k: tuple(v) for k, v in d["lists"].items()}})


def _order(c: Candidate) -> tuple[float, int]:
    return (-c.spread, c.row)


@dataclass
class Keeper:
    """Per attribute, the KEEP candidates with the widest spread seen so far."""

    kept: dict[str, list[Candidate]] = field(default_factory=dict)

    def add(self, raw: Sequence[Any], canon: Sequence[Any], completions: Mapping[str, Any],
            tally: Any) -> None:  # fmt: skip
        """One scored chunk: ``raw`` its replies as parsed, ``canon`` with title keys,
        ``tally`` the tally that has just scored it (its similarity rows)."""
        by = {  # (entity, attribute, value) -> position of its first run's reply
            (c.entity_id, c.attribute or "", c.value or ""): i
            for i, r in enumerate(raw)
            if (c := r.case).repeat == 0 and r.items is not None
        }

        def lists_of(key: tuple[str, str, str]) -> tuple[list[str], list[str], str]:
            r, c = raw[by[key]], canon[by[key]]  # only a kept candidate's lists are copied
            text = getattr(completions.get(r.case.id), "text", None)
            # scrubbed when written or shown (most candidates never are); the cut keeps
            # any secret that starts within the MAX_REPLY characters shown whole
            return list(r.items), list(c.items or []), (text or "")[: 4 * MAX_REPLY]

        metric = tally.config.metrics[0]
        names = {e: raw[i].case.entity for (e, a, _), i in by.items() if not a}
        entities = list(names)
        rows = [tally.index[e] for e in entities]
        for attr, at in tally.attributes.items():
            kept = self.kept.setdefault(attr, [])
            spreads = _spreads(at.sims[metric], rows)
            for entity, row, spread in zip(entities, rows, spreads, strict=True):
                if spread is None or (len(kept) >= KEEP and _order(kept[-1]) <= (-spread, row)):
                    continue  # no value scored, or narrower than every kept one
                lists = {"": lists_of((entity, "", ""))}
                lists.update(
                    (v, lists_of((entity, attr, v))) for v in at.values if (entity, attr, v) in by
                )
                kept.append(Candidate(entity, names[entity], row, spread, lists))
                kept.sort(key=_order)
                del kept[KEEP:]

    def absorb(self, other: Keeper) -> None:
        """Another shard's candidates (disjoint entities): the union, cut to KEEP."""
        for attr, cands in other.kept.items():
            kept = sorted([*self.kept.get(attr, []), *cands], key=_order)
            self.kept[attr] = kept[:KEEP]

    def to_dict(self) -> dict[str, Any]:
        return {a: [c.to_dict() for c in cands] for a, cands in self.kept.items()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Keeper:
        return cls({str(a): [Candidate.from_dict(c) for c in cands] for a, cands in d.items()})


def entries(tally: Any, results: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Each attribute result's evidence (label -> entry), from the kept candidates."""
    by_label = {a.attribute: a for a in results}
    several = len(tally.config.metrics) > 1
    out: dict[str, dict[str, Any]] = {}
    for name, at in tally.attributes.items():
        cands = tally.evidence.kept.get(name, [])
        for m in tally.config.metrics if cands else ():
            label = f"{name}.{m}" if several else name
            a = by_label.get(label)
            if a is not None and (entry := _entry(a, at.values, at.sims[m], cands)) is not None:
                out[label] = entry
    return out


def _entry(
    a: Any, values: Sequence[str], sims: Any, cands: Sequence[Candidate]
) -> dict[str, Any] | None:
    scored = [v for v in a.values if v.n > 0 and not math.isnan(v.mean.value)]
    if len(scored) < 2:
        return None
    hi = max(scored, key=lambda v: v.mean.value)
    lo = min(scored, key=lambda v: v.mean.value)
    i, j = values.index(hi.value), values.index(lo.value)
    gap = hi.mean.value - lo.mean.value

    def share(c: Candidate) -> float:
        s_hi, s_lo = float(sims[c.row, i]), float(sims[c.row, j])
        return (0.0 if math.isnan(s_hi) else s_hi / hi.n) - (
            0.0 if math.isnan(s_lo) else s_lo / lo.n
        )

    rows = []
    for c in sorted(cands, key=lambda c: (-share(c), c.row))[:SHOW]:
        neutral, nkeys, nreply = c.lists[""]
        neutral = list(map(secrets.scrub, neutral))  # parsed from a reply: scrubbed like it
        lists = [{"label": "neutral", "titles": neutral, "reply": reply_text(nreply)}]
        for value in (v for v in (hi.value, lo.value) if v in c.lists):
            titles, keys, reply = c.lists[value]
            diff = compare_lists(neutral, nkeys, titles := list(map(secrets.scrub, titles)), keys)
            lists.append({"label": value, "titles": titles, **diff, "reply": reply_text(reply),
                          **({} if titles else _EMPTY)})  # fmt: skip
        pct = f", {share(c) / gap:.0%} of it" if gap > 0 else ""
        rows.append({
            "entity": c.name, "id": c.entity, "score": share(c),
            "why": f"{share(c):+.4f} of the gap{pct}; {a.metric} {hi.value} "
            f"{fmt(sims[c.row, i])}, {lo.value} {fmt(sims[c.row, j])}",
            "lists": lists,
        })  # fmt: skip
    return {
        "what": (
            f"the {len(rows)} entities with the largest share of the gap {hi.value} − "
            f"{lo.value} ({fmt(gap)}, the SNSR), among the {len(cands)} whose {a.metric} "
            f"varies most across the values; lists of the first repeat"
        ),
        "rows": rows,
    }
