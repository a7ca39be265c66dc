"""From lists to an attribute's fairness: every (entity, value) cell scored by the vectorised
engine (a 1,000 x 31 audit: under a second), per-value means, SNSR/SNSV/PAFS."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import pytest_recfair.vocab as vocab
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.metrics.common import check_choice, check_k, check_list, check_positive_int
from pytest_recfair.metrics.lists import NEUTRAL_PAD, SENSITIVE_PAD, curves_all_k, encode
from pytest_recfair.vocab import METRICS, MetricName, MissingPolicy, Variant

FloatArray = npt.NDArray[np.float64]
Sims = Sequence[float] | Mapping[str, float] | FloatArray


def _as_sims(sims: Sims, name: str = "sims") -> FloatArray:
    if isinstance(sims, Mapping):
        raw: Any = list(sims.values())
    elif isinstance(sims, str | bytes):
        raise TypeError(f"{name} must be a sequence or mapping of floats; got a string.")
    else:
        raw = sims
    for i, x in enumerate(raw):
        if isinstance(x, bool) or not isinstance(x, int | float | np.integer | np.floating):
            raise TypeError(f"{name}[{i}] must be a float similarity; got {x!r}.")
    arr = np.asarray(raw, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(
            f"{name} must hold at least one similarity (one per attribute value); "
            f"got {arr.size} values with shape {arr.shape}."
        )
    return arr


def snsr(sims: Sims) -> float:
    """Sensitive-to-Neutral Similarity Range: max - min (NaN in gives NaN out)."""
    a = _as_sims(sims)
    return float(np.max(a) - np.min(a))


def snsv(sims: Sims) -> float:
    """Sensitive-to-Neutral Similarity Variance: population standard deviation (ddof=0)."""
    return float(np.std(_as_sims(sims)))


def pafs(sims: Sims) -> float:
    """FairEval's PAFS: 1 - mean |s - mean(s)| (1 = every value equally similar)."""
    a = _as_sims(sims)
    return float(1.0 - np.mean(np.abs(a - np.mean(a))))


def entropy(runs: Sequence[Sequence[str]], k: int | None = None) -> float:
    """Entropy (bits, not normalised) of the items pooled over repeated runs cut to k: R runs
    of K items score log2(K) when all agree, log2(R*K) when none share one; no items 0."""
    kk = check_k(k)
    if isinstance(runs, str | bytes) or not isinstance(runs, Sequence):
        raise TypeError(f"runs must be a list of ranked lists; got {type(runs).__name__}.")
    if len(runs) == 0:
        raise ValueError("runs must hold at least one list (the repeated replies); got none.")
    counts: Counter[str] = Counter()
    for r, run in enumerate(runs):
        items = check_list(run, f"runs[{r}]")
        counts.update(items if kk is None else items[:kk])
    total = sum(counts.values())
    if total == 0:
        return 0.0
    h = -sum((c / total) * math.log2(c / total) for c in counts.values())
    return h + 0.0  # normalise -0.0


def curves(
    neutral: Sequence[str],
    sensitive: Sequence[str],
    K: int | None = None,
    variant: Variant = "normalized",
) -> dict[str, FloatArray]:
    """metric -> its value at k = 1..K (index k-1; K None: the longer list's length)."""
    v = check_choice(variant, vocab.VARIANTS, "variant")
    n = check_list(neutral, "neutral")
    s = check_list(sensitive, "sensitive")
    kk = check_k(K, "K")
    big = kk if kk is not None else max(len(n), len(s), 1)
    table: dict[str, int] = {}
    N, lN = encode([n], big, table, NEUTRAL_PAD, lambda _: "neutral")
    S, lS = encode([s], big, table, SENSITIVE_PAD, lambda _: "sensitive")
    res = curves_all_k(N, lN, S, lS, big, v)
    return {m: arr[0] for m, arr in res.items()}


@dataclass(frozen=True)
class SimilarityMatrix:
    """Per-entity similarities of one attribute (rows: entities, columns: values); ``sims``
    NaN where left out, ``missing``: the neutral or sensitive reply was missing or empty."""

    entities: tuple[str, ...]
    values: tuple[str, ...]
    sims: FloatArray
    missing: npt.NDArray[np.bool_]

    def __post_init__(self) -> None:
        shape = (len(self.entities), len(self.values))
        sims = np.array(self.sims, dtype=np.float64, copy=True)
        missing = np.array(self.missing, dtype=bool, copy=True)
        if sims.shape != shape or missing.shape != shape:
            raise ValueError(
                f"SimilarityMatrix: sims and missing must have shape (entities, values) = "
                f"{shape}; got sims {sims.shape}, missing {missing.shape}."
            )
        sims.setflags(write=False)
        missing.setflags(write=False)
        fixed = {"entities": tuple(self.entities), "values": tuple(self.values)}
        for name, value in (fixed | {"sims": sims, "missing": missing}).items():
            object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SimilarityMatrix):
            return NotImplemented
        return (
            self.entities == other.entities
            and self.values == other.values
            and bool(np.array_equal(self.sims, other.sims, equal_nan=True))
            and bool(np.array_equal(self.missing, other.missing))
        )


def _collect(
    neutral: Mapping[str, Sequence[str] | None],
    by_value: Mapping[str, Mapping[str, Sequence[str] | None]],
) -> tuple[tuple[str, ...], tuple[str, ...], list[Sequence[str] | None]]:
    """Entities (neutral's keys, in order), values, and the sensitive lists value-major."""
    if not isinstance(neutral, Mapping):
        raise TypeError(f"neutral must map entity -> list of items; got {type(neutral).__name__}.")
    if not isinstance(by_value, Mapping):
        raise TypeError(
            f"by_value must map value -> (entity -> list of items); got {type(by_value).__name__}."
        )
    if len(neutral) == 0:
        raise DataError("neutral has no entity; pass entity -> neutral list for each entity.")
    if len(by_value) == 0:
        raise DataError("by_value has no attribute value; pass value -> (entity -> list).")
    entities = tuple(neutral)
    values = tuple(by_value)
    for e in entities:
        if not isinstance(e, str):
            raise TypeError(f"neutral keys must be entity names (str); got {e!r}.")
    known = set(entities)
    lists: list[Sequence[str] | None] = []
    for v in values:
        if not isinstance(v, str):
            raise TypeError(f"by_value keys must be attribute values (str); got {v!r}.")
        col = by_value[v]
        if not isinstance(col, Mapping):
            raise TypeError(
                f"by_value[{v!r}] must map entity -> list of items; got {type(col).__name__}."
            )
        stray = [e for e in col if e not in known]
        if stray:
            raise DataError(
                f"by_value[{v!r}] has entities missing from neutral: "
                f"{', '.join(repr(e) for e in stray[:5])}"
                f"{' ...' if len(stray) > 5 else ''}. Every entity needs a neutral reply "
                f"(None if it failed); add it to neutral or drop it from by_value."
            )
        lists.extend(col.get(e) for e in entities)
    return entities, values, lists


@dataclass(frozen=True, eq=False)
class SimilarityCube:
    """Every requested metric at k = 1..K for every (entity, value) cell: ``sims[metric]``
    is (entities, values, K), index k-1 = metric@k (one engine call for all metrics)."""

    entities: tuple[str, ...]
    values: tuple[str, ...]
    K: int
    sims: dict[str, FloatArray]
    missing: npt.NDArray[np.bool_]

    def _cube(self, metric: str) -> FloatArray:
        if metric not in self.sims:
            raise KeyError(f"metric {metric!r} was not computed; have: {', '.join(self.sims)}")
        return self.sims[metric]

    def matrix(self, metric: MetricName = "jaccard", k: int | None = None) -> SimilarityMatrix:
        """The SimilarityMatrix of ``metric`` at ``k`` (default: K)."""
        kk = self.K if k is None else check_positive_int(k, "k")
        if kk > self.K:
            raise ConfigError(f"k must be <= K = {self.K} of this cube; got {kk}.")
        cube = self._cube(metric)
        return SimilarityMatrix(self.entities, self.values, cube[:, :, kk - 1], self.missing)

    def curves(self, metric: MetricName = "jaccard") -> dict[str, FloatArray]:
        """value -> mean Sim@k for k = 1..K (NaN-skipping under missing="skip")."""
        cube = self._cube(metric)
        return {
            v: _column_means(np.ascontiguousarray(cube[:, j, :]))[0]
            for j, v in enumerate(self.values)
        }


def similarity_cube(
    neutral: Mapping[str, Sequence[str] | None],
    by_value: Mapping[str, Mapping[str, Sequence[str] | None]],
    K: int | None = 25,
    variant: Variant = "normalized",
    missing: MissingPolicy = "zero",
    metrics: Sequence[MetricName] = METRICS,
) -> SimilarityCube:
    """All ``metrics`` at k = 1..K (None: the longest list) for every entity and value;
    inputs and missing-reply rules are ``similarity_matrix``'s."""
    return similarity_cubes(neutral, {"": by_value}, K, variant, missing, metrics)[""]


def similarity_cubes(
    neutral: Mapping[str, Sequence[str] | None],
    by_attribute: Mapping[str, Mapping[str, Mapping[str, Sequence[str] | None]]],
    K: int | None = 25,
    variant: Variant = "normalized",
    missing: MissingPolicy = "zero",
    metrics: Sequence[MetricName] = METRICS,
) -> dict[str, SimilarityCube]:
    """``similarity_cube`` of each attribute against one set of neutral lists, in one pass
    (a list recurring in several attributes is scored once)."""
    v = check_choice(variant, vocab.VARIANTS, "variant")
    pol = check_choice(missing, vocab.MISSING_POLICIES, "missing")
    kk = check_k(K, "K")
    if isinstance(metrics, str) or not isinstance(metrics, Sequence) or not metrics:
        raise TypeError(f"metrics must be a non-empty list of metric names; got {metrics!r}.")
    ms = tuple(dict.fromkeys(check_choice(m, METRICS, "metric") for m in metrics))
    parts = {a: _collect(neutral, by_value) for a, by_value in by_attribute.items()}
    if not parts:
        return {}
    entities = tuple(neutral)
    E = len(entities)
    nlists = [neutral[e] for e in entities]
    every = [x for _, _, lists in parts.values() for x in lists]  # value-major per attribute
    if kk is None:
        # non-lists are reported by encode below, with the cell they are in
        kk = max([len(x) for x in (*nlists, *every) if isinstance(x, Sized)] + [1])
    table: dict[str, int] = {}
    N, lN = encode(nlists, kk, table, NEUTRAL_PAD, lambda i: f"neutral[{entities[i]!r}]")

    def cell(i: int) -> str:  # how encode names position i of ``every``
        for _, values, lists in parts.values():
            if i < len(lists):
                return f"by_value[{values[i // E]!r}][{entities[i % E]!r}]"
            i -= len(lists)
        raise IndexError(i)

    S, lS = encode(every, kk, table, SENSITIVE_PAD, cell)  # a list shared by values once
    ent = np.tile(np.arange(E, dtype=np.int64), S.shape[0] // max(E, 1))
    res = curves_all_k(N, lN, S, lS, kk, v, ms, ent=ent)
    out: dict[str, SimilarityCube] = {}
    start = 0
    for attr, (_, values, _) in parts.items():
        V = len(values)
        cells = slice(start, start + V * E)
        start += V * E
        # A list truncated to k >= 1 is empty only if it was empty: missingness is k-free.
        miss = (lN[:, None] == 0) | (lS[cells].reshape(V, E).T == 0)
        # Never answered (no key for the entity): left out under either policy, as the
        # FaiRLLM notebook walks only the names in each value's file; nor a missing reply.
        cols = by_attribute[attr].values()
        absent = np.array([[e not in col for col in cols] for e in entities], dtype=bool)
        left_out = (miss | absent) if pol == "skip" else absent
        miss &= ~absent
        sims: dict[str, FloatArray] = {}
        for m, arr in res.items():
            cube = arr[cells].reshape(V, E, kk).transpose(1, 0, 2)  # pairs are value-major
            if left_out.any():
                cube = np.where(left_out[:, :, None], np.nan, cube)
            cube = np.ascontiguousarray(cube)
            cube.setflags(write=False)
            sims[m] = cube
        miss.setflags(write=False)
        out[attr] = SimilarityCube(entities, values, kk, sims, miss)
    return out


def similarity_matrix(
    neutral: Mapping[str, Sequence[str] | None],
    by_value: Mapping[str, Mapping[str, Sequence[str] | None]],
    metric: MetricName = "jaccard",
    k: int | None = 25,
    variant: Variant = "normalized",
    missing: MissingPolicy = "zero",
) -> SimilarityMatrix:
    """metric(neutral[e], by_value[v][e]) @ k per entity and value. A missing (None or
    empty) reply scores 0.0 under "zero", NaN under "skip"; an absent key (never answered)
    is NaN under both, as in the FaiRLLM notebook."""
    m = check_choice(metric, METRICS, "metric")
    cube = similarity_cube(neutral, by_value, check_k(k), variant, missing, (m,))
    return cube.matrix(m)


@dataclass(frozen=True)
class ValueStat:
    """One attribute value: mean similarity, entities in the mean, missing/empty cells."""

    mean: float
    n: int
    missing: int


@dataclass(frozen=True)
class AttributeTable:
    """Per-value means and their spread; a value with no scorable entity makes max, min and
    the spreads NaN (an audit must not pass on a value it could not measure)."""

    values: dict[str, ValueStat]
    max: float
    min: float
    max_value: str | None
    min_value: str | None
    snsr: float
    snsv: float
    pafs: float

    @property
    def means(self) -> dict[str, float]:
        return {v: s.mean for v, s in self.values.items()}


def _column_means(sims: FloatArray) -> tuple[FloatArray, npt.NDArray[np.int64]]:
    """Non-NaN column means (np.mean of contiguous 1-D: the notebooks' sums) and counts."""
    V = sims.shape[1]
    means = np.full(V, np.nan)
    n = np.zeros(V, dtype=np.int64)
    for j in range(V):
        col = sims[:, j]
        kept = np.ascontiguousarray(col[~np.isnan(col)])
        n[j] = kept.size
        if kept.size:
            means[j] = np.mean(kept)
    return means, n


def summarize(matrix: SimilarityMatrix) -> AttributeTable:
    """The AttributeTable of a SimilarityMatrix (what attribute_table returns)."""
    means, n = _column_means(np.asarray(matrix.sims))
    miss = np.sum(matrix.missing, axis=0)
    stats = {
        v: ValueStat(float(means[j]), int(n[j]), int(miss[j])) for j, v in enumerate(matrix.values)
    }
    finite = ~np.isnan(means)
    if finite.any():
        idx = np.flatnonzero(finite)
        max_value: str | None = matrix.values[int(idx[np.argmax(means[idx])])]
        min_value: str | None = matrix.values[int(idx[np.argmin(means[idx])])]
    else:
        max_value = min_value = None
    return AttributeTable(
        stats, float(np.max(means)), float(np.min(means)), max_value, min_value, snsr(means),
        snsv(means), pafs(means),
    )  # fmt: skip


def attribute_table(
    neutral: Mapping[str, Sequence[str] | None],
    by_value: Mapping[str, Mapping[str, Sequence[str] | None]],
    metric: MetricName = "jaccard",
    k: int | None = 25,
    variant: Variant = "normalized",
    missing: MissingPolicy = "zero",
) -> AttributeTable:
    """Per-value mean similarity (with n and missing counts), max, min, SNSR, SNSV, PAFS."""
    return summarize(similarity_matrix(neutral, by_value, metric, k, variant, missing))


def rows_to_lists(
    rows: Iterable[tuple[str, Sequence[str] | None]], n: int | None = 500
) -> dict[str, Sequence[str] | None]:
    """Read result rows as the FaiRLLM notebook does: the first ``n`` (None: all), keyed by
    name, a repeated name keeping its LATER row; for attribute_table(variant="fairllm")."""
    nn = None if n is None else check_positive_int(n, "n")
    out: dict[str, Sequence[str] | None] = {}
    for i, row in enumerate(rows):
        if nn is not None and i >= nn:
            break
        try:
            name, items = row
        except (TypeError, ValueError):
            raise TypeError(f"rows[{i}] must be a (name, items) pair; got {row!r}.") from None
        if not isinstance(name, str):
            raise TypeError(f"rows[{i}][0] must be the entity name (str); got {name!r}.")
        out[name] = None if items is None else check_list(items, f"rows[{i}][1]")
    return out
