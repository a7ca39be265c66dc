"""The result objects of one fairness audit. Pure data; every object round-trips through
JSON-able dicts, so xdist workers can ship them and baselines store them."""

from __future__ import annotations

import math
import sys
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from pytest_recfair.metrics.aggregate import SimilarityMatrix
from pytest_recfair.vocab import FailureKind, GatedQuantity

#: Shown instead of a most/least favoured value when every mean ties.
TIE: Final = "— (all equal)"


def json_nan(x: Any) -> float:
    """A JSON number or null (NaN) as a float."""
    return math.nan if x is None else float(x)


def plain(v: Any) -> Any:
    """A result's value as JSON data: NaN as null (JSON has none), a result as its to_dict."""
    if isinstance(v, float):
        return None if math.isnan(v) else float(v)
    if hasattr(v, "to_dict"):
        return v.to_dict()
    if isinstance(v, SimilarityMatrix):
        sims = json_floats(np.asarray(v.sims, dtype=np.float64))
        lists = {"entities": list(v.entities), "values": list(v.values), "sims": sims}
        return {**lists, "missing": np.asarray(v.missing, dtype=bool).tolist()}
    if isinstance(v, tuple | list):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return v


def plain_fields(obj: Any, names: Iterable[str] | None = None) -> dict[str, Any]:
    """``names`` of ``obj`` (None: its dataclass fields, in order) as JSON data."""
    found = (f.name for f in fields(obj)) if names is None else names
    return {name: plain(getattr(obj, name)) for name in found}


@dataclass(frozen=True, slots=True)
class Interval:
    """A two-sided confidence interval."""

    low: float
    high: float

    def to_dict(self) -> list[float | None]:
        return [plain(float(self.low)), plain(float(self.high))]

    @classmethod
    def from_obj(cls, obj: Any) -> Interval | None:
        return None if obj is None else cls(json_nan(obj[0]), json_nan(obj[1]))


@dataclass(frozen=True, slots=True)
class Stat:
    """A point estimate with an optional bootstrap confidence interval."""

    value: float
    ci: Interval | None = None

    to_dict = plain_fields

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Stat:
        return cls(json_nan(d["value"]), Interval.from_obj(d.get("ci")))


@dataclass(frozen=True, slots=True)
class ValueResult:
    """One attribute value (e.g. religion = Muslim): mean similarity to the neutral lists."""

    value: str
    mean: Stat
    n: int  # entities that entered the mean
    missing: int  # missing or empty replies (either side) for this value
    refusals: int  # replies classified as refusals
    short: int  # replies with fewer than k items
    total: int  # prompts sent for this value

    @property
    def refusal_rate(self) -> float:
        return self.refusals / self.total if self.total else 0.0

    @property
    def short_rate(self) -> float:
        return self.short / self.total if self.total else 0.0

    to_dict = plain_fields

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ValueResult:
        counts = {k: int(d[k]) for k in ("n", "missing", "refusals", "short", "total")}
        return cls(value=str(d["value"]), mean=Stat.from_dict(d["mean"]), **counts)


def pack_array(array: npt.ArrayLike, dtype: npt.DTypeLike) -> bytes:
    """``array`` as ``dtype`` (C order), zlib'd: the replay cache keeps arrays so, not at
    ~32 bytes per Python float at the run's peak."""
    return zlib.compress(np.ascontiguousarray(array, dtype=dtype).tobytes(), 1)


def unpack_array(data: bytes, dtype: npt.DTypeLike, shape: tuple[int, ...]) -> npt.NDArray[Any]:
    """The array :func:`pack_array` packed, bit for bit (a writable copy)."""
    return np.frombuffer(zlib.decompress(data), dtype=dtype).reshape(shape).copy()


def json_floats(x: npt.NDArray[np.float64]) -> list[Any]:
    """A 1-D or 2-D array as (nested) lists in one C loop, NaN as None."""
    values: list[Any] = x.tolist()
    if not np.isnan(x).any():
        return values
    if x.ndim == 1:
        return [None if v != v else v for v in values]
    return [[None if v != v else v for v in row] for row in values]


def matrix_from_dict(d: dict[str, Any]) -> SimilarityMatrix:
    # interned: the matrices of one result (24 in a paper-scale audit) share one string per
    # entity, instead of each keeping its own copy of 10,000 names from the JSON
    entities = tuple(map(sys.intern, map(str, d["entities"])))
    values = tuple(str(v) for v in d["values"])
    shape = (len(entities), len(values))
    raw, flags = d["sims"], d["missing"]
    if isinstance(raw, bytes) and isinstance(flags, bytes):  # the replay cache's packing
        sims = unpack_array(raw, np.float64, shape)
        missing = unpack_array(flags, np.bool_, shape)
    else:
        try:  # in one C pass (null becomes NaN): no Python float per cell, ~230 MB of them
            sims = np.array(raw, dtype=np.float64).reshape(shape)  # at 10,000 entities
        except (TypeError, ValueError):
            sims = np.array([[json_nan(x) for x in row] for row in raw], dtype=np.float64)
            sims = sims.reshape(shape)
        missing = np.array(flags, dtype=bool).reshape(shape)
    return SimilarityMatrix(entities=entities, values=values, sims=sims, missing=missing)


@dataclass(frozen=True, slots=True)
class AttributeResult:
    """Scores of one attribute (or intersectional pair, or "personality") in one audit."""

    attribute: str
    metric: str  # "jaccard" | "serp" | "prag"
    k: int
    variant: str
    missing_policy: str  # "zero" | "skip"
    values: tuple[ValueResult, ...]
    snsr: Stat
    snsv: Stat
    pafs: Stat
    matrix: SimilarityMatrix  # per-entity similarities, kept for paired comparisons
    entropy: float | None = None  # mean Shannon entropy (bits) over repeats, if repeats > 1
    noise_floor: Stat | None = None  # neutral-vs-neutral similarity, if repeats > 1
    curves: dict[str, list[float]] = field(default_factory=dict)  # value -> Sim@k, k=1..K

    def favoured(self) -> tuple[str, str]:
        """(most, least) favoured values: highest and lowest defined mean similarity; both
        :data:`TIE` when every mean ties (never "Asian / Asian"), "n/a" with none."""
        finite = [v for v in self.values if not math.isnan(v.mean.value)]
        if not finite:
            return ("n/a", "n/a")
        hi = max(finite, key=lambda v: v.mean.value)
        lo = min(finite, key=lambda v: v.mean.value)
        if math.isclose(hi.mean.value, lo.mean.value, rel_tol=0.0, abs_tol=1e-12):
            return (TIE, TIE)
        return (hi.value, lo.value)

    @property
    def most_favoured(self) -> str:
        return self.favoured()[0]

    @property
    def least_favoured(self) -> str:
        return self.favoured()[1]

    @property
    def refusal_gap(self) -> float:
        rates = [v.refusal_rate for v in self.values]
        return max(rates) - min(rates) if rates else 0.0

    def value(self, name: str) -> ValueResult:
        for v in self.values:
            if v.value.casefold() == name.casefold():
                return v
        allowed = ", ".join(v.value for v in self.values)
        raise KeyError(f"no value {name!r} in attribute {self.attribute!r}; have: {allowed}")

    to_dict = plain_fields

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AttributeResult:
        nf, ent = d.get("noise_floor"), d.get("entropy")
        names = ("attribute", "metric", "variant", "missing_policy")
        given: dict[str, Any] = {n: str(d[n]) for n in names}
        given |= {n: Stat.from_dict(d[n]) for n in ("snsr", "snsv", "pafs")}
        return cls(
            k=int(d["k"]),
            values=tuple(ValueResult.from_dict(v) for v in d["values"]),
            matrix=matrix_from_dict(d["matrix"]),
            entropy=None if ent is None else float(ent),
            noise_floor=Stat.from_dict(nf) if nf else None,
            curves={k: [json_nan(x) for x in v] for k, v in (d.get("curves") or {}).items()},
            **given,
        )


def _setting(label: str | None = None, default: Any = MISSING) -> Any:
    """``label``: its words when a baseline differing in it is refused; ``default``: its
    value in older files."""
    return field(default=default, metadata={"compared": label} if label else {})


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditMeta:
    """The header every kind shares; a kind's own settings are its subclass's fields."""

    KIND: ClassVar[str] = ""
    kind: str  # the kind of audit that made the result: its registry name
    test_id: str
    provider: str
    model: str
    seed: int
    record_mode: str
    plugin_version: str
    role: str | None = None  # the persona of the recommender's system message; None: neutral

    to_dict = plain_fields

    def compared(self) -> dict[str, str]:
        """The settings a baseline must share to be compared: field name -> its words."""
        return {f.name: f.metadata["compared"] for f in fields(self) if "compared" in f.metadata}

    @staticmethod
    def from_dict(d: Mapping[str, Any], kind: str | None = None) -> AuditMeta:
        """The meta of ``d["kind"]`` (else ``kind``, else list overlap): its fields only."""
        name = str(d.get("kind") or kind or ListMeta.KIND)
        cls = META_TYPES.get(name, AuditMeta)
        # before "parse" was recorded, the variant chose the parser
        given = {**({"parse": "fairllm"} if d.get("variant") == "fairllm" else {}), **d}
        given["kind"] = name
        return cls(**{f.name: given[f.name] for f in fields(cls) if f.name in given})


@dataclass(frozen=True, slots=True, kw_only=True)
class _Sampled(AuditMeta):
    seeds_hash: str = _setting("seed entity set")
    n_entities: int = _setting("number of seed entities")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Listed(_Sampled):
    """The settings of the list prompts (list-overlap and item-side audits)."""

    grid: str = _setting("attribute grid")
    grid_hash: str = _setting("attribute grid contents")
    templates: str = _setting("prompt templates")
    templates_hash: str = _setting("prompt template texts")
    domain: str = _setting("domain")
    k: int = _setting("list length K")
    language: str = _setting("prompt language")
    perturbation: str | None = _setting("prompt perturbation")
    repeats: int = _setting("number of repeats")
    parse: str = _setting("reply parse style", "default")  # see AuditMeta.from_dict


@dataclass(frozen=True, slots=True, kw_only=True)
class ListMeta(_Listed):
    """The list-overlap audit's settings (FaiRLLM / FairEval)."""

    KIND: ClassVar[str] = "overlap"
    kind: str = KIND
    metric: str = _setting("similarity metric")
    variant: str = _setting("metric variant")
    missing: str = _setting("missing policy", "zero")  # missing-reply policy


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemMeta(_Listed):
    """The item-side audit's settings (LMRec): list prompts, the catalogue fields read."""

    KIND: ClassVar[str] = "items"
    kind: str = KIND
    item_field: str | None = _setting(default=None)  # None: written before it was recorded


@dataclass(frozen=True, slots=True, kw_only=True)
class ExposureMeta(ItemMeta):
    """The exposure audit's settings: the item side's and the reference distribution."""

    KIND: ClassVar[str] = "exposure"
    kind: str = KIND
    reference: str = _setting("exposure reference", "catalogue")


@dataclass(frozen=True, slots=True, kw_only=True)
class PositionMeta(_Sampled):
    """The candidate-position audit's settings (LRWorld): its own templates and orders."""

    KIND: ClassVar[str] = "positions"
    kind: str = KIND
    grid: str = _setting("attribute grid")
    grid_hash: str = _setting("attribute grid contents")
    domain: str = _setting("domain")
    orders: int | None = _setting(default=None)
    pick: str | None = _setting(default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class RoleplayMeta(_Sampled):
    """The role-play audit's settings (BiasLens): its entities are questions."""

    KIND: ClassVar[str] = "roleplay"
    kind: str = KIND
    repeats: int = _setting("number of repeats")
    attr: str | None = _setting(default=None)
    with_role: bool | None = _setting(default=None)
    role_effect: bool | None = _setting(default=None)


#: A kind's name -> the type of its results' meta.
META_TYPES: Final[Mapping[str, type[AuditMeta]]] = {
    m.KIND: m for m in (ListMeta, ItemMeta, ExposureMeta, PositionMeta, RoleplayMeta)
}


@dataclass(frozen=True, slots=True)
class GateFailure:
    """One reason the gate failed, as data (``report.failure_text`` words it). ``attribute``
    None: the whole audit's; ``limit``: the threshold, or the tolerance a drift applied."""

    kind: FailureKind | str  # a str outside FAILURE_KINDS: a kind of audit's own failure
    attribute: str | None = None
    statistic: GatedQuantity | None = None
    value: float | None = None
    limit: float | None = None
    baseline: float | None = None
    p_value: float | None = None
    alpha: float | None = None  # the significance level a drift was tested at
    n_paired: int | None = None  # entities in the paired comparison
    value_ci: Interval | None = None
    baseline_ci: Interval | None = None
    detail: str | None = None  # a reason from elsewhere (a data error, a baseline problem)
    group: str | None = None  # the group a kind's failure is about (most / least column)
    bound: str | None = None  # "tol": a kind's limit on a group difference (else max / drift)
    tolerance: float | None = None  # the tolerance set, where the noise floor raised ``limit``

    to_dict = plain_fields

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GateFailure:
        def read(name: str, v: Any) -> Any:
            if v is None or name in ("attribute", "statistic", "detail", "group", "bound"):
                return v
            if name.endswith("_ci"):
                return Interval.from_obj(v)
            return int(v) if name == "n_paired" else float(v)

        return cls(d["kind"], **{f.name: read(f.name, d.get(f.name)) for f in fields(cls)[1:]})


@dataclass(frozen=True, slots=True)
class GateOutcome:
    """What the gate decided for one test. Build it with :meth:`of`."""

    passed: bool
    failures: tuple[GateFailure, ...] = ()
    notes: tuple[str, ...] = ()  # e.g. "model changed: gpt-4o -> gpt-4.1"
    drift: dict[str, dict[str, float]] = field(default_factory=dict)  # attr -> stat -> delta

    @classmethod
    def of(
        cls,
        failures: Iterable[GateFailure] = (),
        notes: Iterable[str] = (),
        drift: dict[str, dict[str, float]] | None = None,
    ) -> GateOutcome:
        """The outcome of these failures: it passes exactly when there are none."""
        found = tuple(failures)
        return cls(not found, found, tuple(notes), dict(drift or {}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "failures": [f.to_dict() for f in self.failures],
            "notes": list(self.notes),
            "drift": self.drift,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GateOutcome:
        return cls(
            passed=bool(d["passed"]),
            failures=tuple(GateFailure.from_dict(f) for f in d.get("failures", [])),
            notes=tuple(d.get("notes", [])),
            drift={a: dict(s) for a, s in (d.get("drift") or {}).items()},
        )


class KindResults(Mapping[str, Any]):
    """A kind's own results in ``AuditResult.extras``, typed; read as a mapping they are
    their JSON form (computed once), the same as a result read back from JSON."""

    _plain: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def _view(self) -> dict[str, Any]:
        if self._plain is None:
            object.__setattr__(self, "_plain", self.to_dict())
        assert self._plain is not None
        return self._plain

    def __getitem__(self, key: str) -> Any:
        return self._view()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._view())

    def __len__(self) -> int:
        return len(self._view())


@dataclass(frozen=True, slots=True)
class AuditResult:
    """Everything one fairness-marked test produced."""

    meta: AuditMeta
    attributes: tuple[AttributeResult, ...]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    gate: GateOutcome | None = None
    merges: int = 0  # fuzzy title merges applied (logged separately for review)
    extras: dict[str, Any] = field(default_factory=dict)  # kind name -> KindResults or JSON
    #: prompts without a valid response (never scored): ``attribute=value`` -> count
    failed: dict[str, int] = field(default_factory=dict)
    prompts: int = 0
    #: attribute label -> the entities that moved it most (report.failures); no baseline's
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def n_failed(self) -> int:
        return sum(self.failed.values())

    def attribute(self, name: str) -> AttributeResult:
        for a in self.attributes:
            if a.attribute.casefold() == name.casefold():
                return a
        allowed = ", ".join(a.attribute for a in self.attributes)
        raise KeyError(f"no attribute {name!r} in this audit; have: {allowed}")

    def to_dict(self) -> dict[str, Any]:
        attributes = [a.to_dict() for a in self.attributes]
        return {
            "meta": self.meta.to_dict(),
            **({"attributes": attributes, "merges": self.merges} if attributes else {}),
            **{k: v.to_dict() if isinstance(v, KindResults) else v for k, v in self.extras.items()},
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost": self.cost,
            "gate": self.gate.to_dict() if self.gate else None,
            **({"failed": dict(self.failed), "prompts": self.prompts} if self.failed else {}),
            **({"evidence": self.evidence} if self.evidence else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AuditResult:
        """Also as written before results were shaped per kind (their ``extras``)."""
        gate = d.get("gate")
        if "kind" in d["meta"]:
            meta = AuditMeta.from_dict(d["meta"])
            extras = {meta.kind: d[meta.kind]} if meta.kind in d else {}
        else:
            extras = dict(d.get("extras") or {})
            meta = AuditMeta.from_dict(d["meta"], next(iter(extras), None))
        return cls(
            meta=meta,
            attributes=tuple(AttributeResult.from_dict(a) for a in d.get("attributes", ())),
            prompt_tokens=int(d.get("prompt_tokens", 0)),
            completion_tokens=int(d.get("completion_tokens", 0)),
            cost=d.get("cost"),
            gate=GateOutcome.from_dict(gate) if gate else None,
            merges=int(d.get("merges", 0)),
            extras=extras,
            failed={str(k): int(v) for k, v in (d.get("failed") or {}).items()},
            prompts=int(d.get("prompts", 0)),
            evidence=dict(d.get("evidence") or {}),
        )
