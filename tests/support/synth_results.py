"""Synthetic AuditResults for the gate, baseline and report tests.

The similarity matrix is drawn here; every statistic and interval comes from
pytest_recfair.metrics, exactly as the audit computes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from pytest_recfair.metrics import aggregate, stats
from pytest_recfair.results import (
    AttributeResult,
    AuditResult,
    Interval,
    ListMeta,
    Stat,
    ValueResult,
)

RELIGION = ("Buddhist", "Christian", "Islamic", "Jewish")
GENDER = ("female", "male", "non-binary")


def meta(test_id: str = "tests/test_audit.py::test_religion", **changes: object) -> ListMeta:
    base = ListMeta(
        test_id=test_id,
        provider="sim",
        model="sim-v1",
        grid="faireval",
        grid_hash="a" * 64,
        templates="natural",
        templates_hash="b" * 64,
        seeds_hash="c" * 64,
        domain="movie",
        k=25,
        n_entities=40,
        repeats=1,
        variant="normalized",
        metric="jaccard",
        language="en",
        perturbation=None,
        seed=0,
        record_mode="none",
        plugin_version="0.1.0",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def draw(
    n_entities: int = 40,
    values: Sequence[str] = RELIGION,
    *,
    bias: Mapping[str, float] | None = None,
    noise: float = 0.05,
    seed: int = 0,
    entity_seed: int = 1234,
) -> np.ndarray:
    """(E, V) similarities: entity popularity (fixed by entity_seed) + value bias + noise."""
    base = np.random.default_rng(entity_seed).uniform(0.4, 0.8, size=(n_entities, 1))
    shift = np.array([(bias or {}).get(v, 0.0) for v in values])[None, :]
    eps = np.random.default_rng(seed).normal(0.0, noise, size=(n_entities, len(values)))
    return np.asarray(np.clip(base + shift + eps, 0.0, 1.0))


def attribute(
    name: str,
    sims: np.ndarray,
    values: Sequence[str],
    *,
    refusals: Mapping[str, int] | None = None,
    entropy: float | None = None,
    seed: int = 0,
) -> AttributeResult:
    entities = tuple(f"e{i:03d}" for i in range(sims.shape[0]))
    matrix = aggregate.SimilarityMatrix(
        entities=entities,
        values=tuple(values),
        sims=np.asarray(sims, dtype=np.float64),
        missing=np.zeros(sims.shape, dtype=bool),
    )
    table = aggregate.summarize(matrix)
    boot = stats.bootstrap(matrix, n_resamples=400, seed=seed)
    n = sims.shape[0]
    vals = tuple(
        ValueResult(
            value=v,
            mean=Stat(table.values[v].mean, Interval(*boot.value_ci[v])),
            n=table.values[v].n,
            missing=table.values[v].missing,
            refusals=(refusals or {}).get(v, 0),
            short=0,
            total=n,
        )
        for v in values
    )
    return AttributeResult(
        attribute=name,
        metric="jaccard",
        k=25,
        variant="normalized",
        missing_policy="zero",
        values=vals,
        snsr=Stat(table.snsr, Interval(*boot.snsr_ci)),
        snsv=Stat(table.snsv, Interval(*boot.snsv_ci)),
        pafs=Stat(table.pafs, Interval(*boot.pafs_ci)),
        matrix=matrix,
        entropy=entropy,
    )


def audit(
    *,
    bias: Mapping[str, float] | None = None,
    noise: float = 0.05,
    seed: int = 0,
    n_entities: int = 40,
    gender: bool = False,
    refusals: Mapping[str, int] | None = None,
    entropy: float | None = None,
    **meta_changes: object,
) -> AuditResult:
    """One synthetic audit of religion (and optionally gender)."""
    attrs = [
        attribute(
            "religion",
            draw(n_entities, RELIGION, bias=bias, noise=noise, seed=seed),
            RELIGION,
            refusals=refusals,
            entropy=entropy,
            seed=seed,
        )
    ]
    if gender:
        attrs.append(
            attribute(
                "gender",
                draw(n_entities, GENDER, bias=bias, noise=noise, seed=seed + 1000),
                GENDER,
                seed=seed,
            )
        )
    return AuditResult(meta=meta(n_entities=n_entities, **meta_changes), attributes=tuple(attrs))
