"""Scoring of list-overlap replies: attribute results, repeats, entropy and noise floor.

Pure: parsed replies in, :class:`~pytest_recfair.results.AttributeResult` out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_recfair import metrics
from pytest_recfair.prompts import PromptCase
from pytest_recfair.replies import parse
from pytest_recfair.results import AttributeResult, Interval, Stat, ValueResult
from pytest_recfair.settings import AuditSettings

__all__ = ["Lists", "Reply", "score"]

# reply statuses counted per attribute value
_REFUSED = parse.ReplyStatus.REFUSED.value
_SHORT = parse.ReplyStatus.SHORT.value


@dataclass(frozen=True, slots=True)
class Reply:
    """One parsed reply to one prompt."""

    case: PromptCase
    items: list[str] | None  # None: no completion at all (provider error)
    status: str


Lists = dict[str, list[str] | None]  # entity id -> parsed list (None: no completion)


def score(settings: AuditSettings, replies: Sequence[Reply]) -> tuple[AttributeResult, ...]:
    """Group the replies once, then score every attribute (with every requested metric)."""
    neutral: list[Lists] = [{} for _ in range(settings.repeats)]
    # attribute -> repeat -> value -> lists, in prompt order
    grouped: dict[str, list[dict[str, Lists]]] = {}
    counts: dict[str, dict[str, Counter[str]]] = {}
    for r in replies:
        c = r.case
        if c.attribute is None or c.value is None:
            neutral[c.repeat][c.entity_id] = r.items
            continue
        runs = grouped.setdefault(c.attribute, [{} for _ in range(settings.repeats)])
        runs[c.repeat].setdefault(c.value, {})[c.entity_id] = r.items
        counts.setdefault(c.attribute, {}).setdefault(c.value, Counter())[r.status] += 1
    # the noise floor depends on the neutral lists only: once per metric, not per attribute
    floors = {m: _noise_floor(settings, m, neutral) for m in settings.metrics}
    several = len(settings.metrics) > 1
    return tuple(
        result
        for attr, runs in grouped.items()
        for result in _score_attribute(settings, attr, neutral, runs, counts[attr], floors, several)
    )


def _score_attribute(
    settings: AuditSettings,
    attr: str,
    neutral: Sequence[Lists],
    by_value: Sequence[Mapping[str, Lists]],
    counts: Mapping[str, Counter[str]],
    floors: Mapping[metrics.MetricName, Stat | None],
    suffix: bool,
) -> list[AttributeResult]:
    """One AttributeResult per metric; with several metrics each is named "attr.metric"."""
    cubes = [
        metrics.similarity_cube(
            neutral[i],
            by_value[i],
            K=settings.k,
            variant=settings.variant,
            missing=settings.missing,
            metrics=settings.metrics,
        )
        for i in range(settings.repeats)
    ]
    entropy = _entropy(by_value) if settings.repeats > 1 else None
    out = []
    for metric in settings.metrics:
        matrix = _mean_matrix([c.matrix(metric) for c in cubes])
        table = metrics.summarize(matrix)
        boot = metrics.intervals(
            matrix, n_resamples=settings.n_resamples, seed=settings.resample_seed
        )
        values = tuple(
            ValueResult(
                value=v,
                mean=Stat(stat.mean, _interval(boot.value_ci.get(v))),
                n=stat.n,
                missing=stat.missing,
                refusals=counts[v][_REFUSED],
                short=counts[v][_SHORT],
                total=sum(counts[v].values()),
            )
            for v, stat in table.values.items()
        )
        out.append(
            AttributeResult(
                attribute=f"{attr}.{metric}" if suffix else attr,
                metric=metric,
                k=settings.k,
                variant=settings.variant,
                missing_policy=settings.missing,
                values=values,
                snsr=Stat(table.snsr, _interval(boot.snsr_ci)),
                snsv=Stat(table.snsv, _interval(boot.snsv_ci)),
                pafs=Stat(table.pafs, _interval(boot.pafs_ci)),
                matrix=matrix,
                entropy=entropy,
                noise_floor=floors[metric],
                curves={v: [float(x) for x in arr] for v, arr in cubes[0].curves(metric).items()},
            )
        )
    return out


def _noise_floor(
    settings: AuditSettings, metric: metrics.MetricName, neutral: Sequence[Lists]
) -> Stat | None:
    """Neutral-vs-neutral similarity of repeated runs: how much moves by chance alone."""
    if settings.repeats < 2:
        return None
    floor = metrics.noise_floor(
        {e: [run.get(e) for run in neutral] for e in neutral[0]},
        metric=metric,
        k=settings.k,
        variant=settings.variant,
        n_resamples=settings.n_resamples,
        seed=settings.resample_seed,
    )
    return None if floor is None else Stat(float(floor.mean), _interval(floor.ci))


def _mean_matrix(matrices: Sequence[metrics.SimilarityMatrix]) -> metrics.SimilarityMatrix:
    """Average repeated runs per (entity, value): the entity stays the resampling unit."""
    if len(matrices) == 1:
        return matrices[0]
    first = matrices[0]
    stack = np.stack([m.sims for m in matrices])
    with np.errstate(invalid="ignore"):
        counts = np.sum(~np.isnan(stack), axis=0)
        sums = np.nansum(stack, axis=0)
        sims = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    missing = np.any(np.stack([m.missing for m in matrices]), axis=0)
    return metrics.SimilarityMatrix(
        entities=first.entities, values=first.values, sims=sims, missing=missing
    )


def _entropy(by_value: Sequence[Mapping[str, Lists]]) -> float | None:
    """Mean entropy (bits) of the repeated lists of each conditioned prompt."""
    scores = [
        metrics.entropy([run[v].get(e) or [] for run in by_value])
        for v, lists in by_value[0].items()
        for e in lists
    ]
    return float(np.mean(scores)) if scores else None


def _interval(ci: Any) -> Interval | None:
    if ci is None:
        return None
    lo, hi = ci
    return Interval(float(lo), float(hi))
