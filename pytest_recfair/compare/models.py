"""Several models audited by one test, side by side (issue 11): each attribute's SNSR per
model, and per pair a paired test on the shared entities. Pure."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_recfair.errors import DataError
from pytest_recfair.results import (
    AttributeResult,
    AuditResult,
    Interval,
    Stat,
    json_nan,
    plain_fields,
)


@dataclass(frozen=True, slots=True)
class ModelSlot:
    """A test's place in a comparison: ``group`` is the test without the model's parameter,
    ``label`` the parameter's id, ``index`` its position."""

    group: str
    label: str
    index: int
    alpha: float = 0.05
    n_resamples: int = 2000
    seed: int = 0

    to_dict = plain_fields

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelSlot:
        return cls(str(d["group"]), str(d["label"]), int(d["index"]), float(d.get("alpha", 0.05)),
                   int(d.get("n_resamples", 2000)), int(d.get("seed", 0)))  # fmt: skip


@dataclass(frozen=True, slots=True)
class PairRow:
    """One attribute compared between models ``a`` and ``b``: ``delta`` is SNSR(b) - SNSR(a)
    on the shared entities; ``p_value`` two-sided, adjusted over attributes and pairs."""

    attribute: str
    a: str
    b: str
    snsr_a: float
    snsr_b: float
    delta: float
    ci: Interval | None
    p_value: float | None
    n_paired: int
    fairer: str | None
    note: str | None = None

    to_dict = plain_fields

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PairRow:
        p, fairer, note = (d.get(k) for k in ("p_value", "fairer", "note"))
        a, b, delta = (json_nan(d.get(k)) for k in ("snsr_a", "snsr_b", "delta"))
        return cls(str(d["attribute"]), str(d["a"]), str(d["b"]), a, b, delta,
                   Interval.from_obj(d.get("ci")), None if p is None else float(p),
                   int(d.get("n_paired", 0)), None if fairer is None else str(fairer),
                   None if note is None else str(note))  # fmt: skip


@dataclass(frozen=True, slots=True)
class ModelComparison:
    """``snsr[i][j]``: attribute i's SNSR on model j (None: no such attribute)."""

    group: str
    models: tuple[str, ...]
    test_ids: tuple[str, ...]
    model_ids: tuple[str, ...]
    attributes: tuple[str, ...]
    snsr: tuple[tuple[Stat | None, ...], ...]
    pairs: tuple[PairRow, ...]
    alpha: float

    to_dict = plain_fields

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelComparison:
        keys = ("models", "test_ids", "model_ids", "attributes")
        names: Any = {"group": str(d["group"])} | {k: tuple(str(x) for x in d[k]) for k in keys}
        snsr = tuple(tuple(None if s is None else Stat.from_dict(s) for s in r) for r in d["snsr"])
        pairs = tuple(PairRow.from_dict(p) for p in d["pairs"])
        return cls(**names, snsr=snsr, pairs=pairs, alpha=float(d["alpha"]))


def _keyed(r: AuditResult) -> dict[str, AttributeResult]:
    """A result's attributes by name; "name metric@k" when a name occurs more than once."""
    names = [a.attribute for a in r.attributes]
    return {
        (a.attribute if names.count(a.attribute) == 1 else f"{a.attribute} {a.metric}@{a.k}"): a
        for a in r.attributes
    }


def _usable(a: AttributeResult) -> bool:
    return bool(a.matrix.sims.size) and not bool(a.matrix.missing.all())


def _pair_rows(
    la: str, ra: AuditResult, lb: str, rb: AuditResult, slot: ModelSlot, n_pairs: int
) -> list[PairRow]:
    """The attributes both models scored as one family; Bonferroni over the group's pairs."""
    from pytest_recfair.metrics.pairs import PairMember, paired_models  # for 2+ models only

    ka, kb = _keyed(ra), _keyed(rb)
    shared = [k for k in ka if k in kb and _usable(ka[k]) and _usable(kb[k])]
    members = [PairMember(k, ka[k].matrix, kb[k].matrix) for k in shared]
    try:
        verdicts = paired_models(members, n_resamples=slot.n_resamples, seed=slot.seed)
    except DataError as exc:
        return [PairRow(k, la, lb, ka[k].snsr.value, kb[k].snsr.value, math.nan, None, None, 0,
                        None, str(exc)) for k in shared]  # fmt: skip
    rows = []
    for v in verdicts:
        p = min(1.0, v.p_adjusted * n_pairs)
        fairer = (la if v.delta > 0 else lb) if p <= slot.alpha and v.delta != 0 else None
        rows.append(  # lower SNSR is fairer
            PairRow(v.key, la, lb, v.a, v.b, v.delta, Interval(*v.ci), p, v.n_paired, fairer)
        )
    return rows


def _one_group(group: str, members: Sequence[tuple[ModelSlot, AuditResult]]) -> ModelComparison:
    members = sorted(members, key=lambda m: (m[0].index, m[0].label))
    keyed = [_keyed(r) for _, r in members]
    attributes = list(dict.fromkeys(k for kd in keyed for k in kd))
    # the SNSR as reports show it: n/a when no reply was usable (not a perfect 0)
    snsr = tuple(
        tuple(None if a is None else a.snsr if _usable(a) else Stat(math.nan) for a in row)
        for row in ([kd.get(k) for kd in keyed] for k in attributes)
    )
    first, combos = members[0][0], list(itertools.combinations(members, 2))
    pairs = tuple(
        row
        for (sa, ra), (sb, rb) in combos
        for row in _pair_rows(sa.label, ra, sb.label, rb, first, len(combos))
    )
    models, test_ids, model_ids = zip(
        *((s.label, r.meta.test_id, r.meta.model) for s, r in members), strict=True
    )
    return ModelComparison(
        group, models, test_ids, model_ids, tuple(attributes), snsr, pairs, first.alpha
    )


def compare_models(
    results: Mapping[str, AuditResult], slots: Mapping[str, ModelSlot]
) -> list[ModelComparison]:
    """One comparison per group of two or more models, in their parameters' order."""
    groups: dict[str, list[tuple[ModelSlot, AuditResult]]] = {}
    for test_id, slot in slots.items():
        if test_id in results:
            groups.setdefault(slot.group, []).append((slot, results[test_id]))
    return [_one_group(g, m) for g, m in sorted(groups.items()) if len(m) >= 2]
