"""Recommendation quality of a list-overlap audit per group, beside fairness.
Counts are integers per (entity, group), so merged shards give the unsharded numbers bit
for bit. ``min_quality`` failing for every group is one failure: fair but useless."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_recfair.errors import DataError
from pytest_recfair.gate.unanswered import NEUTRAL, group_of
from pytest_recfair.metrics import quality as mq
from pytest_recfair.metrics.stats import seeded_weights
from pytest_recfair.replies.catalogue import Catalogue
from pytest_recfair.replies.matching import normalize
from pytest_recfair.report.fmt import fmt, fmt_p, fmt_pair
from pytest_recfair.results import GateFailure, Interval, pack_array, unpack_array
from pytest_recfair.settings import AuditSettings

IntArray = npt.NDArray[np.int64]
#: Status of a reply that is not scored: its prompt got no valid response, or the neutral
#: prompt it is compared with did not. The entity leaves that value's mean (never 0).
FAILED = "failed"
OVERALL = "overall"
_USELESS = "the model recommends equally badly for every group: fair but useless"


def _key(text: str) -> str:
    """An entity's identity in a catalogue column: case, accents' form, punctuation out."""
    return " ".join(re.findall(r"\w+", unicodedata.normalize("NFKC", text).casefold()))


@dataclass
class QualityTally:
    """Per (entity, group) counts over one audit's fixed, ordered entities."""

    entities: tuple[str, ...]
    groups: tuple[str, ...]
    k: int
    basis: str  # "catalogue": matched titles; "list": valid items (no catalogue)
    source: str
    hits: IntArray
    listed: IntArray
    replies: IntArray
    known: npt.NDArray[np.bool_]  # entity has items in the catalogue (always True for "list")
    filled: npt.NDArray[np.bool_]
    catalogue: Catalogue | None = field(default=None, repr=False, compare=False)
    # title key -> the entities with an item of that title (one title, several directors)
    owners: dict[str, set[str]] | None = field(default=None, repr=False, compare=False)
    named: set[str] | None = field(default=None, repr=False, compare=False)  # every owner
    index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def start(
        cls,
        entities: Sequence[str],
        layout: Mapping[str, Sequence[str]],
        k: int,
        catalogue: Catalogue | None = None,
        column: str = "entity",
    ) -> QualityTally:
        groups = (NEUTRAL, *(group_of(a, v) for a, vs in layout.items() for v in vs))
        shape = (len(entities), len(groups))
        owners: dict[str, set[str]] | None = None
        if catalogue is not None and column in catalogue.fields:
            owners = {}
            for it in catalogue.items:
                if column in it.fields:
                    owners.setdefault(normalize(it.title), set()).add(_key(str(it.fields[column])))
        hits, listed, replies = (np.zeros(shape, dtype=np.int64) for _ in range(3))
        return cls(
            tuple(entities), groups, k, "list" if catalogue is None else "catalogue",
            "" if catalogue is None else catalogue.source, hits, listed, replies,
            # with owners, an entity is known once its replies arrive
            known=np.full(len(entities), owners is None),
            filled=np.zeros(len(entities), dtype=bool), catalogue=catalogue, owners=owners,
            named=None if owners is None else set().union(*owners.values()),
            index={e: i for i, e in enumerate(entities)},
        )  # fmt: skip

    def add(self, replies: Iterable[Any]) -> None:
        """Count one chunk's parsed replies (before titles are merged to keys)."""
        col = {g: j for j, g in enumerate(self.groups)}
        names: dict[int, set[str]] = {}
        cells: list[tuple[int, int, int, int]] = []  # (row, group, listed, hits)
        k, cat, owners = self.k, self.catalogue, self.owners  # no catalogue: a valid item hits
        for r in replies:
            case = r.case
            row = self.index.get(case.entity_id)
            j = col.get(group_of(case.attribute, case.value))
            if row is None or j is None:
                raise DataError(f"quality: reply for {case.entity_id!r} outside the layout")
            keys = names.get(row)
            if keys is None:  # the entity's names matter only to the catalogue's owners
                keys = names[row] = (
                    set() if owners is None else {_key(case.entity_id), _key(case.entity)}
                )
            if r.status == FAILED:  # no valid response: left out, as in the similarity
                continue
            if cat is None:
                n = min(len(r.items or ()), k)
                cells.append((row, j, n, n))
                continue
            items = (r.items or [])[:k]
            found = [cat.items[i].title for i in cat.match(items) if i is not None]
            hits = len(found) if owners is None else sum(
                not keys.isdisjoint(owners.get(normalize(t), ())) for t in found
            )  # fmt: skip
            cells.append((row, j, len(items), hits))
        if cells:  # added in one numpy call per count, not three per reply
            at = np.array(cells, dtype=np.int64).T
            np.add.at(self.replies, (at[0], at[1]), 1)
            np.add.at(self.listed, (at[0], at[1]), at[2])
            np.add.at(self.hits, (at[0], at[1]), at[3])
        for row, keys in names.items():
            if self.named is not None:
                self.known[row] = not keys.isdisjoint(self.named)
            self.filled[row] = True

    def to_dict(self, packed: bool = False) -> dict[str, Any]:
        """JSON-able; ``packed``: the count arrays as bytes (the replay cache)."""
        rows = np.flatnonzero(self.filled)
        kinds = {"hits": np.int64, "listed": np.int64, "replies": np.int64, "known": np.bool_}
        arrays = {n: getattr(self, n)[rows].astype(t) for n, t in kinds.items()}
        return {
            "entities": list(self.entities), "groups": list(self.groups), "k": self.k,
            "basis": self.basis, "source": self.source, "rows": rows.tolist(),
            **{n: pack_array(a, a.dtype) if packed else a.astype(np.int64).tolist()
               for n, a in arrays.items()},
        }  # fmt: skip

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> QualityTally:
        entities, groups = tuple(str(e) for e in d["entities"]), tuple(d["groups"])
        out = cls.start(entities, {}, int(d["k"]))
        out.groups, out.basis, out.source = groups, str(d["basis"]), str(d["source"])
        shape = (len(entities), len(groups))
        out.hits, out.listed, out.replies = (np.zeros(shape, dtype=np.int64) for _ in range(3))
        rows = stored_rows(d["rows"], len(entities))
        for name in ("hits", "listed", "replies"):
            getattr(out, name)[rows] = stored_array(d[name], np.int64, (-1, len(groups)))
        out.known[rows] = stored_array(d["known"], np.bool_, (-1,))
        out.filled[rows] = True
        return out

    def scores(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """(quality, valid-item share) per (entity, group); NaN where nothing was scored."""
        with np.errstate(invalid="ignore", divide="ignore"):
            slots = (self.replies * self.k).astype(np.float64)
            usable = (self.replies > 0) & self.known[:, None]
            quality = np.where(usable, self.hits / np.maximum(slots, 1), np.nan)
            valid = np.where(self.replies > 0, self.listed / np.maximum(slots, 1), np.nan)
        return quality, valid


def merged_quality(out: QualityTally | None, part: QualityTally | None) -> QualityTally | None:
    """``out`` with ``part``'s rows added; a shard without counts leaves the audit without."""
    if part is None:
        return None
    if out is None:  # the first shard's counts, read as a shard file's
        return QualityTally.from_dict(part.to_dict())
    if any(getattr(part, a) != getattr(out, a) for a in ("entities", "groups", "k", "basis")):
        raise DataError("merge: the shards' quality counts are not of the same audit.")
    rows = np.flatnonzero(part.filled)  # disjoint entities of the same audit
    for name in ("hits", "listed", "replies", "known"):
        getattr(out, name)[rows] = getattr(part, name)[rows]
    out.filled[rows] = True
    out.source = out.source or part.source
    return out


def nan_mean(x: npt.NDArray[np.float64], axis: int) -> npt.NDArray[np.float64]:
    """Mean over ``axis`` ignoring NaN; NaN (no warning) where nothing is left."""
    n = np.sum(~np.isnan(x), axis=axis)
    s = np.nansum(x, axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: npt.NDArray[np.float64] = np.where(n > 0, s / np.maximum(n, 1), np.nan)
    return out


def _num(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def _pair(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [float(ci[0]), float(ci[1])]


def quality_results(t: QualityTally, *, n_resamples: int, seed: int) -> dict[str, Any]:
    """The plain-JSON quality results of a complete tally (report and baseline)."""
    quality, valid = t.scores()
    by_attr: dict[str, list[int]] = {}
    for j, g in enumerate(t.groups[1:], start=1):
        by_attr.setdefault(g.split("=", 1)[0], []).append(j)
    groups: list[dict[str, Any]] = []
    attributes: list[dict[str, Any]] = []
    # one resample for every group (each attribute's used to draw the same one again),
    # with the weights the attribute tables use (same seed, resamples and entities)
    boot = None
    if len(quality) >= 2:
        W = seeded_weights(seed, n_resamples, len(quality))
        boot = mq.boot_means(quality, W)
    for name, cols in [(None, [0]), *by_attr.items()]:
        s = mq.summarize(quality[:, cols], [t.groups[j] for j in cols], n_resamples=n_resamples,
                         seed=seed, boot=None if boot is None else boot[:, cols])  # fmt: skip
        for j, gq in zip(cols, s.groups, strict=True):
            vmean = float(nan_mean(valid[:, [j]], axis=0)[0])
            groups.append({"group": gq.group, "quality": _num(gq.mean), "ci": _pair(gq.ci),
                           "valid": _num(vmean), "length": _num(vmean * t.k),
                           "n": gq.n})  # fmt: skip
        if name is not None:
            attributes.append({"attribute": name, "gap": _num(s.gap), "gap_ci": _pair(s.gap_ci)})
    per_entity = nan_mean(quality, axis=1)
    overall = float(nan_mean(per_entity[:, None], axis=0)[0])
    cols = quality.T.tolist()  # floats at C speed (x != x: NaN, None in JSON)
    return {
        "basis": t.basis,
        "catalogue": t.source or None,
        "k": t.k,
        "overall": _num(overall),
        "without_items": int((~t.known).sum()),
        "groups": groups,
        "attributes": attributes,
        "entities": list(t.entities),
        "scores": {g: [None if x != x else x for x in cols[j]] for j, g in enumerate(t.groups)},
    }


def stored_rows(rows: Any, n: int) -> IntArray:
    """A to_dict's row indices, each one of the ``n`` entities' positions."""
    out = np.asarray(rows, dtype=np.int64)
    if (bad := out[(out < 0) | (out >= n)]).size:  # -1 would pass for another entity
        raise ValueError(f"row index {int(bad[0])} is outside 0..{n - 1} (the entities' positions)")
    return out


def stored_array(value: Any, dtype: type[np.generic], shape: tuple[int, ...]) -> npt.NDArray[Any]:
    """A to_dict array: JSON lists (None: NaN) or the bytes of a packed one."""
    if isinstance(value, bytes):
        return unpack_array(value, dtype, shape)
    return np.asarray(value, dtype=dtype).reshape(shape)


def _what(q: Mapping[str, Any]) -> str:
    k = q["k"]
    if q["basis"] == "catalogue":
        src = f" ({q['catalogue']})" if q.get("catalogue") else ""
        return f"share of the {k} slots holding a title of the entity's catalogue{src}"
    return f"share of the {k} slots holding a valid list item (no catalogue)"


def _extremes(q: Mapping[str, Any], attribute: str) -> tuple[Any, Any] | None:
    """(lowest, highest) quality group of ``attribute``; None when none was measured."""
    mine = [
        g for g in q["groups"] if _attribute(g["group"]) == attribute and g["quality"] is not None
    ]
    return (min(mine, key=_quality), max(mine, key=_quality)) if mine else None


def _quality(g: Mapping[str, Any]) -> float:
    return float(g["quality"])


def _attribute(group: str) -> str | None:
    """The attribute of a group "<attribute>=<value>" (None: neutral, overall)."""
    return group.partition("=")[0] if "=" in group else None


def quality_lines(q: Mapping[str, Any] | None) -> list[str]:
    """Neutral and, per attribute, its worst and best value and the gap (every group is
    in the HTML table, the JSON report and the JUnit properties)."""
    if not q:
        return []

    def cell(g: Mapping[str, Any]) -> str:
        return f"{fmt(g['quality'])}{fmt_pair(g['ci'])}"

    neutral = next((g for g in q["groups"] if g["group"] == "neutral"), None)
    head = f"quality ({_what(q)}): overall {fmt(q['overall'])}"
    if neutral is not None:
        head += f"; neutral {cell(neutral)}, {fmt(neutral['length'], 1)} items"
    out = [head]
    for a in q["attributes"]:
        if (pair := _extremes(q, a["attribute"])) is None:
            continue
        worst, best = pair
        out.append(
            f"  {a['attribute']}: lowest {worst['group'].partition('=')[2]} {cell(worst)}, "
            f"{fmt(worst['length'], 1)} items; highest {best['group'].partition('=')[2]} "
            f"{cell(best)}; gap {fmt(a['gap'])}{fmt_pair(a['gap_ci'])}"
        )
    if q.get("without_items"):
        out.append(f"  {q['without_items']} entities have no item in the catalogue (left out)")
    return out


def quality_properties(q: Mapping[str, Any] | None) -> list[tuple[str, float | int | str]]:
    if not q:
        return []
    measured = [
        ("recfair.quality.overall", q["overall"]),
        *((f"recfair.quality.{g['group']}", g["quality"]) for g in q["groups"]),
        *((f"recfair.{a['attribute']}.quality_gap", a["gap"]) for a in q["attributes"]),
    ]
    return [("recfair.quality.basis", str(q["basis"])),
            *((k, float(v)) for k, v in measured if v is not None)]  # fmt: skip


def quality_failures(
    settings: AuditSettings, q: Mapping[str, Any] | None, base: Mapping[str, Any] | None
) -> tuple[GateFailure, ...]:
    """The quality checks of one result (``base``: the baseline's quality, or None)."""
    if not q:
        return ()
    out = [*_minimum(settings.min_quality, q), *_gaps(settings.max_quality_gap, q)]
    if base and base.get("basis") == q["basis"] and base.get("k") == q["k"]:
        out += _drift(settings, q, base)
    return tuple(out)


def _minimum(limit: float | None, q: Mapping[str, Any]) -> list[GateFailure]:
    if limit is None:
        return []
    measured = [g for g in q["groups"] if g["quality"] is not None]
    low = [g for g in measured if g["quality"] < limit]
    if not low:
        return []
    if len(low) == len(measured):
        lo, hi = min(g["quality"] for g in low), max(g["quality"] for g in low)
        detail = (
            f"recommendation quality is below min_quality {limit:g} for every group alike "
            f"({fmt(lo)} to {fmt(hi)}, {_what(q)}): {_USELESS}; its fairness figures say "
            f"nothing about a model that recommends nothing useful"
        )
        return [GateFailure("min_quality", None, value=q["overall"], detail=detail)]
    neutral = next((g["quality"] for g in measured if g["group"] == "neutral"), None)
    return [
        GateFailure("min_quality", _attribute(str(g["group"])), value=g["quality"],
                    value_ci=Interval.from_obj(g["ci"]), group=str(g["group"]),
                    detail=f"quality of {g['group']} {fmt(g['quality'])}{fmt_pair(g['ci'])} is "
                    f"below min_quality {limit:g} (neutral {fmt(neutral)}; {_what(q)})")
        for g in low
    ]  # fmt: skip


def _gaps(limit: float | None, q: Mapping[str, Any]) -> list[GateFailure]:
    if limit is None:
        return []
    out = []
    for a in q["attributes"]:
        if a["gap"] is None or a["gap"] <= limit or (pair := _extremes(q, a["attribute"])) is None:
            continue
        worst, best = pair
        detail = (
            f"quality gap {fmt(a['gap'])}{fmt_pair(a['gap_ci'])} between {best['group']} "
            f"({fmt(best['quality'])}) and {worst['group']} ({fmt(worst['quality'])}) is "
            f"above max_quality_gap {limit:g}: some groups get worse recommendations"
        )
        out.append(GateFailure(
            "max_quality_gap", a["attribute"], value=a["gap"], limit=limit, detail=detail,
            value_ci=Interval.from_obj(a["gap_ci"]), group=f"{best['group']} / {worst['group']}",
        ))  # fmt: skip
    return out


def _members(q: Mapping[str, Any]) -> dict[str, dict[str, float | None]]:
    """group -> entity -> quality, plus the overall member (each entity's group mean)."""
    entities = list(q["entities"])
    out = {g: dict(zip(entities, xs, strict=True)) for g, xs in q["scores"].items()}
    kept = [[x for x in xs if x is not None] for xs in zip(*q["scores"].values(), strict=True)]
    out[OVERALL] = {
        e: sum(xs) / len(xs) if xs else None for e, xs in zip(entities, kept, strict=True)
    }
    return out


def _drift(
    settings: AuditSettings, q: Mapping[str, Any], base: Mapping[str, Any]
) -> list[GateFailure]:
    tol, alpha = settings.quality_tolerance, settings.alpha
    drops = mq.drift(_members(base), _members(q), tolerance=tol)
    failing = [d for d in drops if d.p_value < alpha and d.delta < -tol]
    if not failing:
        return []
    groups = [d for d in drops if d.member != OVERALL]
    everyone = any(d.member == OVERALL for d in failing) and all(d.delta < -tol for d in groups)

    def failure(d: mq.Drop, detail: str) -> GateFailure:
        return GateFailure(
            "quality_drift", _attribute(d.member), value=d.value, limit=tol,
            baseline=d.baseline, p_value=d.p_value, alpha=alpha, n_paired=d.n_paired,
            group=None if d.member == OVERALL else d.member, detail=detail,
        )  # fmt: skip

    def change(d: mq.Drop) -> str:
        return (
            f"{fmt(d.baseline)} -> {fmt(d.value)} ({d.delta:+.3f}, tolerance {tol:g}; "
            f"family-wise p {fmt_p(d.p_value)} over {d.n_paired} entities)"
        )

    if everyone:
        d = next(d for d in failing if d.member == OVERALL)
        why = f"{_what(q)}; the lists may be as fair as the baseline's, but {_USELESS}"
        return [
            failure(d, f"recommendation quality fell for every group alike: {change(d)}, {why}")
        ]
    named = [d for d in failing if d.member != OVERALL]
    # the overall member is worded only when no single group explains its drop
    return [
        failure(d, f"{what} fell against the baseline: {change(d)}, {_what(q)}")
        for d in (named or failing)
        for what in [
            "quality (mean over the groups)" if d.member == OVERALL else f"quality of {d.member}"
        ]
    ]
