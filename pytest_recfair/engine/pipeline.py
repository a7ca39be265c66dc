"""Run one audit: grid -> prompts -> recommender (live or cassette) -> parse -> score.

No pytest here. :func:`measure` produces the ungated result; :func:`run_audit` also gates
it against a baseline (the standalone API). The kind of audit (which prompts, how they
are scored) comes from :mod:`.registry`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_recfair import __version__, prompts, providers
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.engine import overlap, registry, stream, verdict
from pytest_recfair.engine import shardfile as shards
from pytest_recfair.engine.base import AuditInputs
from pytest_recfair.engine.shardfile import Shard
from pytest_recfair.engine.tally import Tally
from pytest_recfair.errors import DataError, ProviderError, RecfairError
from pytest_recfair.gate import baselines
from pytest_recfair.gate import unanswered as failures
from pytest_recfair.prompts import Entity, Grid
from pytest_recfair.results import AuditMeta, AuditResult
from pytest_recfair.settings import AuditSettings

__all__ = [
    "KindCases",
    "attributes_of",
    "check_failures",
    "entities_of",
    "kind_cases",
    "kind_meta",
    "measure",
    "result_of",
    "run_audit",
    "score_kind",
    "send_kind_cases",
    "stream_audit",
    "with_failures",
]


def run_audit(
    settings: AuditSettings,
    recommender: Any,
    *,
    seeds: Sequence[Entity],
    grid: Grid,
    cassettes: CassetteStore | None,
    test_id: str,
    baseline: AuditResult | None = None,
    progress: bool | None = None,
    inputs: AuditInputs | None = None,
) -> AuditResult:
    """Audit ``recommender`` as ``settings`` say, and gate the result (against ``baseline``).

    ``recommender`` is an HTTP provider, a ``CallableProvider`` or a plain callable
    ``recommend(prompt) -> str | list[str]``. An incompatible ``baseline`` (other seeds,
    grid, templates, k, missing policy ...) is not compared: the gate outcome carries a
    "baseline" failure saying why.
    """
    result = measure(
        settings,
        recommender,
        seeds=seeds,
        grid=grid,
        cassettes=cassettes,
        test_id=test_id,
        progress=progress,
        inputs=inputs,
    )
    problem = None if baseline is None else baselines.result_incompatibility(baseline, result)
    return verdict.gate_result(settings, result, None if problem else baseline, problem)


def measure(
    settings: AuditSettings,
    recommender: Any,
    *,
    seeds: Sequence[Entity],
    grid: Grid,
    cassettes: CassetteStore | None,
    test_id: str,
    progress: bool | None = None,
    inputs: AuditInputs | None = None,
    failed: Mapping[str, str] | None = None,
    live: Any = None,
) -> AuditResult:
    """Audit ``recommender`` as ``settings`` say; the result is not gated (``gate=None``).

    ``failed``: case id -> error of prompts known to have failed already (batch lines the
    service did not answer); they are not sent and count as failed prompts. ``live``: the
    progress line advanced per prompt sent live (liveline.LiveLine).
    """
    kind = registry.select(settings)
    inputs = inputs or AuditInputs()
    if kind is overlap.OVERLAP:
        meta, out = stream_audit(
            settings,
            recommender,
            seeds=seeds,
            grid=grid,
            cassettes=cassettes,
            test_id=test_id,
            progress=progress,
            inputs=inputs,
            failed=failed,
            live=live,
        )
        summary = failures.FailureSummary(
            out.cases, failures.summarize(out.failed, out.errors).failed
        )
        return with_failures(result_of(settings, meta, out.tally), summary)
    asked = kind_cases(settings, kind, seeds=seeds, grid=grid, test_id=test_id, inputs=inputs)
    outcome = send_kind_cases(
        settings,
        recommender,
        asked.cases,
        cassettes=cassettes,
        test_id=test_id,
        progress=progress,
        failed=failed,
        live=live,
    )
    meta = kind_meta(settings, test_id, recommender, asked, outcome.completions)
    return score_kind(settings, kind, asked, outcome, meta=meta, inputs=inputs)


@dataclasses.dataclass(frozen=True)
class KindCases:
    """The prompts of a kind of audit other than list overlap, with what built them."""

    cases: list[Any]
    grid: Grid
    entities: list[Entity]


def kind_cases(
    settings: AuditSettings,
    kind: Any,
    *,
    seeds: Sequence[Entity],
    grid: Grid,
    test_id: str,
    inputs: AuditInputs,
) -> KindCases:
    """Every prompt of the whole audit of ``kind`` (a shard sends its entities' share)."""
    entities = entities_of(settings, seeds, test_id)
    grid, attr_names = attributes_of(settings, grid)
    built = kind.build_cases(settings, grid, entities, attr_names, inputs)
    return KindCases(asked_cases(settings, built, inputs), grid, entities)


def send_kind_cases(
    settings: AuditSettings,
    recommender: Any,
    cases: Sequence[Any],
    *,
    cassettes: CassetteStore | None,
    test_id: str,
    progress: bool | None = None,
    failed: Mapping[str, str] | None = None,
    live: Any = None,
) -> providers.RunOutcome:
    """Send ``cases`` (those already known to have failed are not sent, they stay failed)."""
    known = {c.id: failed[c.id] for c in cases if c.id in failed} if failed else {}
    outcome = providers.run_cases(
        recommender,
        [c for c in cases if c.id not in known],
        stream.run_options(settings, live),
        cassettes=cassettes,
        test_id=test_id,
        progress=False if live is not None else progress,
    )
    if known:
        outcome = dataclasses.replace(outcome, errors={**outcome.errors, **known})
    return outcome


def kind_meta(
    settings: AuditSettings,
    test_id: str,
    recommender: Any,
    asked: KindCases,
    completions: Mapping[str, providers.Completion],
) -> AuditMeta:
    """The metadata of a kind's audit (the model as the replies name it)."""
    models = {c.model for c in completions.values() if c.model}
    model = sorted(models)[0] if len(models) == 1 else _model_name(recommender, models)
    provider = _provider_name(recommender)
    return _meta(settings, test_id, provider, model, asked.grid, asked.entities)


def score_kind(
    settings: AuditSettings,
    kind: Any,
    asked: KindCases,
    outcome: providers.RunOutcome,
    *,
    meta: AuditMeta,
    inputs: AuditInputs,
) -> AuditResult:
    """The ungated result of a kind's audit from its replies (one run's, or merged
    shards'); a failed prompt is never scored, and too many of them is an error."""
    summary = _failures(settings, meta.test_id, len(asked.cases), asked.cases, outcome.errors)
    scored = kind.score(settings, asked.cases, outcome.completions, inputs)
    return AuditResult(
        meta=meta,
        attributes=scored.attributes,
        prompt_tokens=outcome.usage.prompt_tokens,
        completion_tokens=outcome.usage.completion_tokens,
        cost=outcome.cost,
        merges=scored.merges,
        extras=dict(scored.extras),
        failed=summary.by_group(),
        prompts=summary.total if summary.count else 0,
    )


def stream_audit(
    settings: AuditSettings,
    recommender: Any,
    *,
    seeds: Sequence[Entity],
    grid: Grid,
    cassettes: CassetteStore | None,
    test_id: str,
    progress: bool | None = None,
    shard: Shard | None = None,
    failed: Mapping[str, str] | None = None,
    inputs: AuditInputs | None = None,
    live: Any = None,
) -> tuple[AuditMeta, stream.Streamed]:
    """Score a list-overlap audit chunk by chunk (memory bounded by a chunk).

    With ``shard`` only that share of the entities is sent and scored (the tally and the
    metadata are those of the whole audit, for ``shards.merge_results``). ``failed``:
    case id -> error of prompts already known to have failed (a batch line the service
    did not answer): not sent, counted as failed prompts.
    """
    entities = entities_of(settings, seeds, test_id)
    grid, attr_names = attributes_of(settings, grid)
    out = stream.stream(
        settings,
        recommender,
        grid=grid,
        attributes=attr_names,
        entities=entities,
        selected=shards.select(entities, shard),
        cassettes=cassettes,
        test_id=test_id,
        progress=progress,
        failed=failed,
        asked=lambda cases: asked_cases(settings, cases, inputs or AuditInputs()),
        inputs=inputs,
        live=live,
    )
    _failures(settings, test_id, out.cases, out.failed, out.errors)
    models = out.tally.models
    model = sorted(models)[0] if len(models) == 1 else _model_name(recommender, models)
    meta = _meta(settings, test_id, _provider_name(recommender), model, grid, entities)
    return meta, out


def result_of(settings: AuditSettings, meta: AuditMeta, tally: Tally) -> AuditResult:
    """The (ungated) AuditResult of a complete tally: one run's, or merged shards'."""
    return AuditResult(
        meta=meta,
        attributes=tally.results(n_resamples=settings.n_resamples, seed=settings.resample_seed),
        prompt_tokens=tally.prompt_tokens,
        completion_tokens=tally.completion_tokens,
        cost=_cost(settings, tally.prompt_tokens, tally.completion_tokens),
        merges=tally.merges,
    )


def _cost(settings: AuditSettings, prompt_tokens: int, completion_tokens: int) -> float | None:
    prices = stream.prices_of(settings)
    if prices is None:
        return None
    return (prompt_tokens * prices[0] + completion_tokens * prices[1]) / 1e6


def entities_of(settings: AuditSettings, seeds: Sequence[Entity], test_id: str) -> list[Entity]:
    entities = prompts.subsample(list(seeds), settings.entities, seed=settings.seed)
    if not entities:
        raise DataError(
            f"{test_id}: the seed set is empty; give @fairness(seeds=...) a file or fixture "
            "with at least one entity."
        )
    return entities


def _failures(
    settings: AuditSettings,
    test_id: str,
    total: int,
    cases: Sequence[Any],
    errors: Mapping[str, str],
) -> failures.FailureSummary:
    """The prompts that got no valid response; a ProviderError listing them per value
    (with the first errors) when their share is above ``max_failed``."""
    summary = failures.summarize(cases, errors)
    summary = failures.FailureSummary(total=total, failed=summary.failed)
    if not summary.within(settings.max_failed):
        raise ProviderError(summary.message(test_id, settings.max_failed))
    return summary


def check_failures(
    settings: AuditSettings, test_id: str, cases: Sequence[Any], errors: Mapping[str, str]
) -> None:
    """ProviderError when more of ``cases`` failed than ``max_failed`` allows."""
    _failures(settings, test_id, len(cases), cases, errors)


def with_failures(result: AuditResult, summary: failures.FailureSummary) -> AuditResult:
    if not summary.count:
        return result
    return dataclasses.replace(result, failed=summary.by_group(), prompts=summary.total)


def asked_cases(settings: AuditSettings, cases: Sequence[Any], inputs: AuditInputs) -> list[Any]:
    """The cases to send: those a published run never answered are left out (their
    entity then leaves that value's mean, as the FaiRLLM notebook does); the ``system``
    setting replaces the templates' system message."""
    if settings.system is not None:
        cases = [dataclasses.replace(c, system=settings.system) for c in cases]
    if not inputs.absent:
        return list(cases)
    return [
        c
        for c in cases
        if c.attribute is None or (c.attribute, c.value, c.entity_id) not in inputs.absent
    ]


def _meta(
    settings: AuditSettings,
    test_id: str,
    provider: str,
    model: str,
    grid: Grid,
    entities: Sequence[Entity],
) -> AuditMeta:
    return AuditMeta(
        test_id=test_id,
        provider=provider,
        model=model,
        grid=grid.name,
        grid_hash=grid.digest,
        templates=settings.templates,
        templates_hash=prompts.templates_digest(
            settings.templates, settings.domain, settings.language
        ),
        seeds_hash=prompts.seeds_digest(list(entities)),
        domain=settings.domain,
        k=settings.k,
        n_entities=len(entities),
        repeats=settings.repeats,
        variant=settings.variant,
        metric=settings.metric,
        language=settings.language,
        perturbation=settings.perturbation,
        seed=settings.seed,
        record_mode=settings.record_mode,
        plugin_version=__version__,
        missing=settings.missing,
        parse=settings.parse_style,
    )


def attributes_of(settings: AuditSettings, grid: Grid) -> tuple[Grid, list[str] | None]:
    """Which attributes to ask about; "personality" comes from its own bundled grid."""
    if settings.attr is None:
        return grid, None
    try:
        grid.attribute(settings.attr)
    except (KeyError, RecfairError) as exc:
        if not settings.personality:
            names = ", ".join(a.name for a in grid.attributes)
            raise DataError(
                f"@fairness(attr={settings.attr!r}): grid {grid.name!r} has no such attribute "
                f"({exc}). Allowed: {names}, an intersectional pair such as "
                "'race x gender', or 'personality'."
            ) from None
        grid = prompts.load_grid("personality")
    return grid, [settings.attr]


def _provider_name(recommender: Any) -> str:
    name = getattr(recommender, "name", None)
    if isinstance(name, str) and name:
        return name
    return "callable"


def _model_name(recommender: Any, seen: set[str]) -> str:
    model = getattr(recommender, "model", None)
    if isinstance(model, str) and model:
        return model
    if seen:
        return ",".join(sorted(seen))
    qual = getattr(recommender, "__qualname__", None) or type(recommender).__qualname__
    return str(qual)
