"""Drift of one audited test against its baseline: every gated statistic and each
attribute's unusable share (margin 0) as one family, so an unchanged model fails with
probability at most ``alpha`` however many comparisons. Ungated ones are in ``deltas``."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_recfair.cassettes import cache
from pytest_recfair.errors import DataError
from pytest_recfair.metrics import inference
from pytest_recfair.results import AttributeResult, AuditResult, GateFailure
from pytest_recfair.vocab import STATISTICS, DriftQuantity, Statistic, accept_command


@dataclass(frozen=True)
class Drift:
    """The drift verdict: failures, notes for people, every delta (now - baseline)."""

    failures: tuple[GateFailure, ...]
    notes: tuple[str, ...]
    deltas: dict[str, dict[str, float]]
    test: inference.DriftResult | None = None


def unusable_share(a: AttributeResult) -> float:
    """Share of answered (entity, value) cells with no usable list (never answered: in none)."""
    missing = np.asarray(a.matrix.missing, dtype=bool)
    answered = missing | ~np.isnan(np.asarray(a.matrix.sims, dtype=np.float64))
    return float(missing[answered].mean()) if answered.any() else math.nan


def _key(a: AttributeResult) -> tuple[str, str]:
    return (a.attribute.casefold(), a.metric)


def paired(
    result: AuditResult, baseline: AuditResult
) -> tuple[list[tuple[AttributeResult, AttributeResult]], list[str]]:
    """(now, baseline) attribute pairs both runs share, and notes on the ones they do not."""
    by_key = {_key(b): b for b in baseline.attributes}
    current = {_key(a) for a in result.attributes}
    pairs = [(a, by_key[_key(a)]) for a in result.attributes if _key(a) in by_key]
    notes = [
        f"{a.attribute} ({a.metric}) has no baseline entry, so it was not compared; "
        f"add it with {accept_command(result.meta.test_id)}"
        for a in result.attributes
        if _key(a) not in by_key
    ]
    notes += [
        f"{b.attribute} ({b.metric}) is in the baseline but was not audited"
        for b in baseline.attributes
        if _key(b) not in current
    ]
    return pairs, notes


def _member(
    a: AttributeResult,
    b: AttributeResult,
    stat: DriftQuantity,
    key: tuple[str, ...],
    margin: float | None = None,
) -> inference.DriftMember:
    """``stat`` of run ``a`` against baseline ``b``, ``a``'s columns in ``b``'s value order."""
    what = "missing" if stat == "unusable" else "sims"
    cols = [a.matrix.values.index(v) for v in b.matrix.values]
    now = np.asarray(getattr(a.matrix, what), dtype=np.float64)[:, cols]
    then = np.asarray(getattr(b.matrix, what), dtype=np.float64)
    return inference.DriftMember(key, stat, b.matrix.entities, then, a.matrix.entities, now, margin)


def _value_mismatch(a: AttributeResult, b: AttributeResult, test_id: str) -> GateFailure | None:
    if set(a.matrix.values) == set(b.matrix.values):
        return None
    only_b = sorted(set(b.matrix.values) - set(a.matrix.values))
    only_a = sorted(set(a.matrix.values) - set(b.matrix.values))
    return GateFailure(
        "incomparable",
        a.attribute,
        detail=(
            f"baseline and this run score different values of {a.attribute} (only in the "
            f"baseline: {only_b}; only in this run: {only_a}); re-record the baseline with "
            f"{accept_command(test_id)}"
        ),
    )


def _members(
    pairs: Sequence[tuple[AttributeResult, AttributeResult]],
    gated: Sequence[Statistic],
    floors: Mapping[tuple[str, str, str], float] | None = None,
    tolerance: float = 0.0,
) -> list[inference.DriftMember]:
    """The family: each gated statistic of each (attribute, metric), and ONE unusable-share
    member per attribute (the replies, hence the share, are the same for every metric)."""
    out: list[inference.DriftMember] = []
    seen: set[str] = set()
    for a, b in pairs:
        name = a.attribute.casefold()
        # a statistic named twice is one member; the unusable share's margin is its floor
        once: list[DriftQuantity] = [] if name in seen else ["unusable"]
        stats: list[DriftQuantity] = [*dict.fromkeys(gated), *once]
        seen.add(name)
        for stat in stats:
            floor = (floors or {}).get((name, a.metric, stat), 0.0)
            margin = floor if floor > tolerance or stat == "unusable" else None
            out.append(_member(a, b, stat, (a.attribute, a.metric, stat), margin))
    return out


def family_size(members: Sequence[inference.DriftMember]) -> int:
    """Distinct comparisons of a family (the unusable share once per attribute)."""

    def key(m: inference.DriftMember) -> tuple[str, ...]:
        metric = "*" if m.statistic == "unusable" else m.key[1] if len(m.key) > 1 else ""
        return (m.key[0].casefold(), metric, m.statistic)

    return len({key(m) for m in members})


def _deltas(a: AttributeResult, b: AttributeResult) -> dict[str, float]:
    d: dict[str, float] = {s: getattr(a, s).value - getattr(b, s).value for s in STATISTICS}
    if a.entropy is not None and b.entropy is not None:
        d["entropy"] = a.entropy - b.entropy
    d["refusal_gap"] = a.refusal_gap - b.refusal_gap
    d["unusable"] = unusable_share(a) - unusable_share(b)
    now, then = set(a.matrix.entities), set(b.matrix.entities)
    if now != then and now & then:
        # a subset run: the spreads as tested, on the shared entities
        quantities: tuple[DriftQuantity, ...] = (*STATISTICS, "unusable")
        for stat in quantities:
            pb, pc, _ = inference.shared_values(_member(a, b, stat, (a.attribute,)))
            d[stat] = pc - pb
    return {k: v for k, v in d.items() if not math.isnan(v)}


def _failure(
    v: inference.MemberVerdict,
    by_name: dict[tuple[str, str], tuple[AttributeResult, AttributeResult]],
    res: inference.DriftResult,
    family: int,
) -> GateFailure:
    a, b = by_name[(v.key[0], v.key[1])]
    spread = v.statistic != "unusable"
    # a subset run was tested on the shared entities: show what was tested, not the
    # full runs' statistics (their intervals belong to the full runs, so none is shown)
    sub = set(a.matrix.entities) != set(b.matrix.entities)
    now = getattr(a, v.statistic) if spread and not sub else None
    before = getattr(b, v.statistic) if spread and not sub else None
    screened = sum(m.screened for m in res.members)
    limit, asked = _margin(v, res), res.tolerance if spread else 0.0
    u = inference.UNUSABLE_ALPHA
    parts = f"; spreads at {1 - u:g} x alpha, unusable shares at {u:g} x alpha"
    return GateFailure(
        "drift",
        v.key[0],
        v.statistic,
        value=v.candidate if now is None else now.value,
        limit=limit,
        tolerance=asked if limit > asked else None,
        baseline=v.baseline if before is None else before.value,
        baseline_ci=None if before is None else before.ci,
        p_value=v.p_adjusted,
        alpha=res.alpha,
        n_paired=v.n_paired,
        value_ci=None if now is None else now.ci,
        detail=(
            f"family-wise: {family} comparisons"
            f"{f' ({screened} far inside the null screened out)' if screened else ''}, "
            f"step-down max-T over {res.n_resamples}{' (all)' if res.exact else ''} sign flips"
            f"{parts if res.split else ''}"
        ),
    )


def _power_notes(res: inference.DriftResult) -> list[str]:
    """Per attribute and gated statistic (its metrics on one line): the smallest worsening
    the test catches 9 times in 10 (from its own paired standard error), and a warning when
    the test's noise exceeds the tolerance."""
    groups: dict[tuple[str, str], list[inference.MemberVerdict]] = {}
    for v in res.members:
        if v.statistic != "unusable" and math.isfinite(v.mde):
            groups.setdefault((v.key[0], v.statistic), []).append(v)
    out: list[str] = []
    for (attribute, stat), vs in groups.items():
        what, word = stat.upper(), "drop" if stat == "pafs" else "rise"
        where = (
            f"{attribute} ({' / '.join(v.key[1] for v in vs)})" if len(vs[0].key) > 2 else attribute
        )
        det = " / ".join(f"{v.detectable:.3f}" for v in vs)
        se = " / ".join(f"{v.se:.3f}" for v in vs)
        n = max(v.n_paired for v in vs)
        raised = vs[0].margin > res.tolerance
        why = f" (noise floor of the baseline; {res.tolerance:g} set)" if raised else ""
        out.append(
            f"{where}: this test can detect an {what} {word} of {det} or more (90% power "
            f"over {n} entities, paired SE {se}, tolerance {vs[0].margin:.3g}{why})"
        )
        noisy = [v for v in vs if v.margin > 0 and v.mde > v.margin]
        if noisy:
            worst = max(v.detectable for v in noisy)
            out.append(
                f"{where}: warning: this test is too noisy for tolerance {vs[0].margin:.3g}: an "
                f"{what} {word} up to {worst:.3f} can pass; gate more entities or record repeats"
            )
    return out


def _margin(v: inference.MemberVerdict, res: inference.DriftResult) -> float:
    if math.isfinite(v.margin):  # the member's own (a baseline floor may raise it)
        return v.margin
    return 0.0 if v.statistic == "unusable" else res.tolerance


def evaluate_drift(
    result: AuditResult,
    baseline: AuditResult,
    *,
    gated: Sequence[Statistic] = ("snsr",),
    tolerance: float = 0.0,
    alpha: float = 0.05,
    seed: int = 0,
    n_resamples: int = 2000,
    floors: Mapping[tuple[str, str, str], float] | None = None,
) -> Drift:
    """Test ``result`` against a compatible ``baseline`` as one family, margins >= ``floors``."""
    pairs, notes = paired(result, baseline)
    tid = result.meta.test_id
    mismatched = [f for f in (_value_mismatch(a, b, tid) for a, b in pairs) if f is not None]
    pairs = [(a, b) for a, b in pairs if _value_mismatch(a, b, tid) is None]
    deltas = {a.attribute: _deltas(a, b) for a, b in pairs}
    members = _members(pairs, gated, floors, tolerance)
    if not members:
        return Drift(tuple(mismatched), tuple(notes), deltas)
    try:
        res = _kept_drift_test(
            members, tolerance=tolerance, alpha=alpha, n_resamples=n_resamples, seed=seed
        )
    except DataError as exc:
        failed = (*mismatched, GateFailure("incomparable", detail=str(exc)))
        return Drift(failed, tuple(notes), deltas)
    by_name = {(a.attribute, a.metric): (a, b) for a, b in pairs}
    family = family_size(members)
    failures = tuple(_failure(v, by_name, res, family) for v in res.members if v.failed)
    failures = (*mismatched, *failures)
    notes.extend(  # a worsening beyond the margin, not significant family-wise
        f"{v.key[0]} ({v.key[1]}): "
        f"{'unusable share' if v.statistic == 'unusable' else v.statistic.upper()} "
        f"{v.baseline:.3f} -> {v.candidate:.3f} is worse by more than {_margin(v, res):g} but "
        f"not significantly (family-wise p = {v.p_adjusted:.3f} >= alpha {res.alpha:g} over "
        f"{v.n_paired} entities); not failed"
        for v in res.members
        if not v.failed and v.worsening > _margin(v, res)
    )
    notes.extend(_power_notes(res))
    n_base = max(len(b.matrix.entities) for _, b in pairs)
    if res.n_entities < n_base:
        notes.append(
            f"compared on the shared entities: {res.n_entities} of {n_base} baseline entities"
        )
    return Drift(failures, tuple(notes), deltas, res)


def _kept_drift_test(
    members: Sequence[inference.DriftMember], **params: Any
) -> inference.DriftResult:
    """``inference.drift_test``, or its result for the same members and parameters kept
    in the content store (:mod:`pytest_recfair.cassettes.cache`, open on a replay): a
    replay against an unchanged baseline does not draw the reference again."""
    if cache.folder() is None:
        return inference.drift_test(members, **params)
    key = _drift_key(members, params)
    try:
        verdicts, *rest = cache.get(b"drift", key)
        return inference.DriftResult(tuple(inference.MemberVerdict(*v) for v in verdicts), *rest)
    except (TypeError, ValueError):  # none kept (or not a drift test's): computed
        pass
    res = inference.drift_test(members, **params)
    with contextlib.suppress(TypeError, ValueError):  # not plain data: not kept
        cache.put(b"drift", key, _plain(dataclasses.astuple(res)))
    return res


def _drift_key(members: Sequence[inference.DriftMember], params: Mapping[str, Any]) -> bytes:
    """The digest of the code, the parameters and every field of every member."""
    h = hashlib.blake2b(cache.code_version() + repr(sorted(params.items())).encode())
    seen: dict[int, bytes] = {}  # the members share entity lists and rows: each once
    for m in members:
        for f in dataclasses.fields(m):
            part = getattr(m, f.name)
            if (done := seen.get(id(part))) is None:
                raw = (
                    repr((part.dtype.str, part.shape)).encode()
                    + np.ascontiguousarray(part).tobytes()
                    if isinstance(part, np.ndarray)
                    else repr(part).encode("utf-8", "surrogatepass")
                )
                done = seen[id(part)] = hashlib.blake2b(raw).digest()
            h.update(f.name.encode() + done)
    return h.digest()


def _plain(value: Any) -> Any:
    """``value`` as marshal-able data (numpy scalars become Python's)."""
    if isinstance(value, tuple | list):
        return tuple(_plain(v) for v in value)
    return value.item() if isinstance(value, np.generic) else value
