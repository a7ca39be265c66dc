"""Score an audit a chunk of entities at a time: bounded memory, shards that merge exactly.
A chunk leaves only its similarity-matrix rows (what the bootstrap resamples) and sums in
fixed-point integers, so neither chunk size nor chunk or shard order changes a bit."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_recfair.engine.overlap.evidence import Keeper
from pytest_recfair.engine.overlap.quality import (
    FAILED,
    QualityTally,
    merged_quality,
    nan_mean,
    stored_array,
    stored_rows,
)
from pytest_recfair.errors import DataError
from pytest_recfair.metrics.aggregate import (
    SimilarityCube,
    SimilarityMatrix,
    entropy,
    similarity_cubes,
    summarize,
)
from pytest_recfair.metrics.stats import forget_weights, intervals, noise_floor_of, noise_per_entity
from pytest_recfair.results import (
    AttributeResult,
    Interval,
    Stat,
    ValueResult,
    json_floats,
    pack_array,
)
from pytest_recfair.vocab import MetricName, MissingPolicy, Variant

FloatArray = npt.NDArray[np.float64]
Lists = dict[str, list[str] | None]  # entity id -> parsed list (None: no completion)

#: Fixed-point scale of the curve and entropy sums (2**-40 ~ 1e-12: far below any digit
#: shown, while integer sums are exact whatever the order of addition).
FIXED = 2**40
# |value| * FIXED * chunk entities must fit in int64 before it joins the Python-int sums.
_MAX_ABS = 2.0**14
_SUMS = ("merges", "prompt_tokens", "completion_tokens")  # Tally's counters shards add up


@dataclass(frozen=True, slots=True)
class TallyConfig:
    """The scoring settings a tally was built with; shards must agree on all of them."""

    metrics: tuple[MetricName, ...]
    k: int
    repeats: int
    variant: Variant
    missing: MissingPolicy

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "metrics": list(self.metrics)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TallyConfig:
        return cls(tuple(d["metrics"]), int(d["k"]), int(d["repeats"]), d["variant"], d["missing"])


@dataclass
class AttributeTally:
    """One attribute: matrix rows per metric plus the sums that summarise the rest."""

    values: tuple[str, ...]
    sims: dict[str, FloatArray]  # metric -> (entities, values), NaN until scored
    missing: npt.NDArray[np.bool_]  # (entities, values)
    curve_sum: dict[str, list[list[int]]]  # metric -> [value][k-1], fixed point
    curve_n: dict[str, list[list[int]]]  # metric -> [value][k-1], cells in the sum
    statuses: dict[str, Counter[str]]  # value -> reply status -> count
    entropy_sum: int = 0  # fixed point, over (value, entity) cells
    entropy_n: int = 0

    @classmethod
    def empty(cls, values: Sequence[str], n: int, config: TallyConfig) -> AttributeTally:
        V, K = len(values), config.k
        return cls(
            values=tuple(values),
            sims={m: np.full((n, V), np.nan) for m in config.metrics},
            missing=np.zeros((n, V), dtype=bool),
            curve_sum={m: [[0] * K for _ in range(V)] for m in config.metrics},
            curve_n={m: [[0] * K for _ in range(V)] for m in config.metrics},
            statuses={v: Counter() for v in values},
        )


@dataclass
class Tally:
    """The running scores of one audit over a fixed, ordered list of entities."""

    entities: tuple[str, ...]
    config: TallyConfig
    attributes: dict[str, AttributeTally]
    filled: npt.NDArray[np.bool_]
    noise: dict[MetricName, FloatArray] = field(default_factory=dict)  # (entities,) each
    merges: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    models: set[str] = field(default_factory=set)
    index: dict[str, int] = field(default_factory=dict, repr=False)  # entity -> row
    quality: QualityTally | None = None  # per-group recommendation quality (.quality)
    evidence: Keeper = field(default_factory=Keeper, repr=False)  # bounded: evidence.KEEP

    @classmethod
    def start(
        cls, entities: Sequence[str], layout: Mapping[str, Sequence[str]], config: TallyConfig
    ) -> Tally:
        """An empty tally: ``layout`` maps each attribute to its values, in order."""
        n, index = len(entities), {e: i for i, e in enumerate(entities)}
        if len(index) != n:
            raise DataError("Tally: entity ids must be unique; the seed set repeats one.")
        return cls(
            entities=tuple(entities),
            config=config,
            attributes={a: AttributeTally.empty(v, n, config) for a, v in layout.items()},
            filled=np.zeros(n, dtype=bool),
            noise={m: np.full(n, np.nan) for m in config.metrics} if config.repeats > 1 else {},
            index=index,
        )

    def add(self, replies: Iterable[Any]) -> None:
        """Score one chunk of entities: every (canonicalised) kind.Reply of each of them."""
        R = self.config.repeats
        neutral: list[Lists] = [{} for _ in range(R)]
        grouped: dict[str, list[dict[str, Lists]]] = {}
        counts: Counter[tuple[str, str, str]] = Counter()  # (attribute, value, status)
        for r in replies:
            c = r.case
            if c.attribute is None or c.value is None:
                neutral[c.repeat][c.entity_id] = r.items
                continue
            runs = grouped.get(c.attribute) or grouped.setdefault(
                c.attribute, [{} for _ in range(R)]
            )
            lists = runs[c.repeat].get(c.value)
            if lists is None:
                lists = runs[c.repeat][c.value] = {}
            if r.status == FAILED:  # no key: left out of the value's mean
                continue
            lists[c.entity_id] = r.items
            counts[c.attribute, c.value, r.status] += 1
        order = list(neutral[0])
        if not order:
            return
        rows = np.array([self._row(e) for e in order], dtype=np.int64)
        neutral = [{e: run.get(e) for e in order} for run in neutral]
        if unknown := [a for a in grouped if a not in self.attributes]:
            raise DataError(f"Tally: attribute {unknown[0]!r} is not in this audit's layout.")
        cfg = self.config
        cubes = [  # every attribute of a repeat in one pass: a recurring list is scored once
            similarity_cubes(
                neutral[i],
                {attr: runs[i] for attr, runs in grouped.items()},
                K=cfg.k,
                variant=cfg.variant,
                missing=cfg.missing,
                metrics=cfg.metrics,
            )
            for i in range(cfg.repeats)
        ]
        for attr, runs in grouped.items():
            self._add_attribute(attr, rows, [c[attr] for c in cubes], runs)
        for (attr, value, status), n in counts.items():
            self.attributes[attr].statuses[value][status] += n
        for m, per_entity in self.noise.items():
            repeats = {e: [run.get(e) for run in neutral] for e in order}
            per_entity[rows] = noise_per_entity(repeats, m, self.config.k, self.config.variant)
        self.filled[rows] = True

    def _row(self, entity: str) -> int:
        row = self.index.get(entity)
        if row is None:
            raise DataError(f"Tally: entity {entity!r} is not one of this audit's entities.")
        if self.filled[row]:
            raise DataError(f"Tally: entity {entity!r} was scored twice.")
        return row

    def _add_attribute(
        self,
        attr: str,
        rows: npt.NDArray[np.int64],
        cubes: Sequence[SimilarityCube],
        runs: Sequence[Mapping[str, Lists]],
    ) -> None:
        cfg = self.config
        at = self.attributes[attr]
        if unknown := sorted(set(cubes[0].values) - set(at.values)):
            raise DataError(
                f"Tally: attribute {attr!r} got replies for values {unknown} outside its layout."
            )
        cols = np.array([at.values.index(v) for v in cubes[0].values], dtype=np.int64)
        cells = np.ix_(rows, cols)
        # repeated runs averaged per (entity, value): the entity stays the resampling unit
        at.missing[cells] = np.any(np.stack([c.missing for c in cubes]), axis=0)
        for m in cfg.metrics:
            last = [c.sims[m][:, :, -1] for c in cubes]  # each run's matrix at k = K
            at.sims[m][cells] = last[0] if len(last) == 1 else nan_mean(np.stack(last), axis=0)
            _add_curves(at, m, cols, cubes[0].sims[m])
        if cfg.repeats > 1:
            scores = [
                entropy([run[v].get(e) or [] for run in runs])
                for v, lists in runs[0].items()
                for e in lists
            ]
            at.entropy_sum += int(_fixed(np.asarray(scores, dtype=np.float64)).sum())
            at.entropy_n += len(scores)

    def check_complete(self) -> None:
        """Every entity scored: checked before any bootstrap draws its weights (~8 MB)."""
        if left := int((~self.filled).sum()):
            raise DataError(
                f"Tally: {left} of {len(self.entities)} entities have no scores yet; merge "
                "every shard (1/N .. N/N) before reporting the audit."
            )

    def results(self, *, n_resamples: int, seed: int) -> tuple[AttributeResult, ...]:
        """The AttributeResults of a complete tally (every entity scored)."""
        self.check_complete()
        floors: dict[str, Stat | None] = {}
        for m, per in self.noise.items():
            f = noise_floor_of(per, n_resamples=n_resamples, seed=seed)
            floors[m] = None if f is None else Stat(float(f.mean), Interval.from_obj(f.ci))
        cfg, out = self.config, []
        try:
            for name, at in self.attributes.items():
                for m in cfg.metrics:
                    matrix = SimilarityMatrix(self.entities, at.values, at.sims[m], at.missing)
                    table = summarize(matrix)
                    boot = intervals(matrix, n_resamples=n_resamples, seed=seed)
                    values = tuple(
                        ValueResult(
                            value=v, mean=Stat(stat.mean, Interval.from_obj(boot.value_ci.get(v))),
                            n=stat.n, missing=stat.missing, refusals=at.statuses[v]["refused"],
                            short=at.statuses[v]["short"], total=sum(at.statuses[v].values()),
                        )
                        for v, stat in table.values.items()
                    )  # fmt: skip
                    out.append(AttributeResult(
                        attribute=f"{name}.{m}" if len(cfg.metrics) > 1 else name, metric=m,
                        k=cfg.k, variant=cfg.variant, missing_policy=cfg.missing, values=values,
                        snsr=Stat(table.snsr, Interval.from_obj(boot.snsr_ci)),
                        snsv=Stat(table.snsv, Interval.from_obj(boot.snsv_ci)),
                        pafs=Stat(table.pafs, Interval.from_obj(boot.pafs_ci)), matrix=matrix,
                        entropy=float(at.entropy_sum) / FIXED / at.entropy_n
                        if cfg.repeats > 1 and at.entropy_n else None,
                        noise_floor=floors.get(m), curves=_curves(at, m),
                    ))  # fmt: skip
        finally:
            forget_weights()  # the tables shared them; the audit is scored
        return tuple(out)

    def to_dict(self, packed: bool = False) -> dict[str, Any]:
        """JSON-able, scored rows only; ``packed`` (replay cache): rows as packed bytes."""
        rows = np.flatnonzero(self.filled)
        return {
            "entities": list(self.entities),
            "config": self.config.to_dict(),
            "rows": rows.tolist(),
            "attributes": {
                name: _attribute_to_dict(at, rows, packed) for name, at in self.attributes.items()
            },
            "noise": {m: json_floats(per[rows]) for m, per in self.noise.items()},
            **{n: getattr(self, n) for n in _SUMS},
            "models": sorted(self.models),
            **({"quality": self.quality.to_dict(packed)} if self.quality is not None else {}),
            "evidence": self.evidence.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Tally:
        config = TallyConfig.from_dict(d["config"])
        layout = {name: a["values"] for name, a in d["attributes"].items()}
        tally = cls.start([str(e) for e in d["entities"]], layout, config)
        rows = stored_rows(d["rows"], len(tally.entities))
        for name, a in d["attributes"].items():
            _attribute_from_dict(tally.attributes[name], a, rows)
        for m, values in d.get("noise", {}).items():
            tally.noise[m][rows] = np.asarray(values, dtype=np.float64)
        tally.filled[rows] = True
        for n in _SUMS:
            setattr(tally, n, int(d[n]))
        tally.models = set(d.get("models", []))
        tally.quality = None if (q := d.get("quality")) is None else QualityTally.from_dict(q)
        tally.evidence = Keeper.from_dict(d.get("evidence") or {})
        return tally


def merge(parts: Sequence[Tally]) -> Tally:
    """One tally from tallies of disjoint entity sets of the same audit (shards)."""
    if not parts:
        raise DataError("merge: no tally to merge; give at least one shard result.")
    first = parts[0]
    out = Tally.start(
        first.entities, {a: t.values for a, t in first.attributes.items()}, first.config
    )
    for part in parts:
        if part.entities != first.entities or part.config != first.config:
            raise DataError(
                "merge: the shard results are not of the same audit (different entities or "
                "scoring settings); merge results of one run of --fairness-shard=I/N only."
            )
        if set(part.attributes) != set(first.attributes):
            raise DataError("merge: the shard results score different attributes.")
        rows = np.flatnonzero(part.filled)
        if (twice := rows[out.filled[rows]]).size:
            raise DataError(
                f"merge: entity {first.entities[int(twice[0])]!r} is in two shard results; give "
                "each shard once."
            )
        for name, src in part.attributes.items():
            dst = out.attributes[name]
            if dst.values != src.values:
                raise DataError(f"merge: attribute {name!r} has other values in another shard.")
            for m in out.config.metrics:
                dst.sims[m][rows] = src.sims[m][rows]
                dst.curve_sum[m] = _add_lists(dst.curve_sum[m], src.curve_sum[m])
                dst.curve_n[m] = _add_lists(dst.curve_n[m], src.curve_n[m])
            dst.missing[rows] = src.missing[rows]
            for v, counter in src.statuses.items():
                dst.statuses[v].update(counter)
            dst.entropy_sum += src.entropy_sum
            dst.entropy_n += src.entropy_n
        for m, per in part.noise.items():
            out.noise[m][rows] = per[rows]
        out.filled[rows] = True
        for n in _SUMS:
            setattr(out, n, getattr(out, n) + getattr(part, n))
        out.models |= part.models
        out.quality = merged_quality(out.quality, part.quality)
        out.evidence.absorb(part.evidence)
    return out


def _fixed(x: FloatArray) -> npt.NDArray[np.int64]:
    """``x`` in units of 2**-40, rounded to the nearest (NaN counts as 0)."""
    clean = np.where(np.isnan(x), 0.0, x)
    if clean.size and float(np.max(np.abs(clean))) > _MAX_ABS:
        raise DataError(f"Tally: a score of {float(np.max(np.abs(clean)))} is out of range.")
    out: npt.NDArray[np.int64] = np.rint(clean * FIXED).astype(np.int64)
    return out


def _add_curves(at: AttributeTally, m: str, cols: npt.NDArray[np.int64], cube: FloatArray) -> None:
    """Add one chunk's (entities, values, K) cube to the fixed-point Sim@k sums."""
    sums = _fixed(cube).sum(axis=0).tolist()  # (values, K); int64 is safe for one chunk
    kept = (~np.isnan(cube)).sum(axis=0).tolist()
    for j, col in enumerate(cols.tolist()):
        at.curve_sum[m][col], at.curve_n[m][col] = _add_lists(
            [at.curve_sum[m][col], at.curve_n[m][col]], [sums[j], kept[j]]
        )


def _add_lists(a: list[list[int]], b: list[list[int]]) -> list[list[int]]:
    return [[x + y for x, y in zip(ra, rb, strict=True)] for ra, rb in zip(a, b, strict=True)]


def _curves(at: AttributeTally, metric: str) -> dict[str, list[float]]:
    """value -> mean Sim@k, k = 1..K (NaN where no entity could be scored)."""
    return {
        v: [float(s) / FIXED / n if n else float("nan") for s, n in zip(sums, ns, strict=True)]
        for v, sums, ns in zip(at.values, at.curve_sum[metric], at.curve_n[metric], strict=True)
    }


def _attribute_to_dict(
    at: AttributeTally, rows: npt.NDArray[np.int64], packed: bool = False
) -> dict[str, Any]:
    pack = (lambda x: pack_array(x, np.float64)) if packed else json_floats
    missing = at.missing[rows]
    return {
        "values": list(at.values), "sims": {m: pack(s[rows]) for m, s in at.sims.items()},
        "missing": pack_array(missing, np.bool_) if packed else missing.astype(int).tolist(),
        "curve_sum": at.curve_sum, "curve_n": at.curve_n,
        "statuses": {v: dict(c) for v, c in at.statuses.items()},
        "entropy_sum": at.entropy_sum, "entropy_n": at.entropy_n,
    }  # fmt: skip


def _attribute_from_dict(
    at: AttributeTally, d: Mapping[str, Any], rows: npt.NDArray[np.int64]
) -> None:
    shape = (len(rows), len(at.values))
    for m, table in d["sims"].items():
        at.sims[m][rows] = stored_array(table, np.float64, shape)
    at.missing[rows] = stored_array(d["missing"], np.bool_, shape)
    at.curve_sum = {m: [[int(x) for x in r] for r in t] for m, t in d["curve_sum"].items()}
    at.curve_n = {m: [[int(x) for x in r] for r in t] for m, t in d["curve_n"].items()}
    at.statuses = {v: Counter({s: int(n) for s, n in c.items()}) for v, c in d["statuses"].items()}
    at.entropy_sum = int(d["entropy_sum"])
    at.entropy_n = int(d["entropy_n"])
