"""Run one audit: grid -> prompts -> recommender (live or cassette) -> parse -> score.

No pytest here. :func:`measure` produces the ungated result; :func:`run_audit` also gates
it against a baseline (the standalone API). The kind of audit (which prompts, how they
are scored) comes from :mod:`.registry`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_recfair import __version__, baselines, prompts, providers
from pytest_recfair.audit import overlap, registry, stream, verdict
from pytest_recfair.cassettes import CassetteStore
from pytest_recfair.errors import DataError, ProviderError, RecfairError
from pytest_recfair.prompts import Entity, Grid
from pytest_recfair.results import AuditMeta, AuditResult
from pytest_recfair.settings import AuditSettings

__all__ = ["measure", "run_audit"]


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
    )
    problem = None if baseline is None else baselines.incompatibility(baseline.meta, result.meta)
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
) -> AuditResult:
    """Audit ``recommender`` as ``settings`` say; the result is not gated (``gate=None``)."""
    entities = prompts.subsample(list(seeds), settings.entities, seed=settings.seed)
    if not entities:
        raise DataError(
            f"{test_id}: the seed set is empty; give @fairness(seeds=...) a file or fixture "
            "with at least one entity."
        )
    grid, attr_names = _attributes(settings, grid)
    kind = registry.select(settings)
    if kind is overlap.OVERLAP:
        return _measure_streamed(
            settings, recommender, grid, attr_names, entities, cassettes, test_id, progress
        )
    cases = kind.build_cases(settings, grid, entities, attr_names)
    outcome = providers.run_cases(
        recommender,
        cases,
        concurrency=settings.concurrency,
        cassettes=cassettes,
        test_id=test_id,
        progress=progress,
    )
    if outcome.errors and len(outcome.errors) == len(cases):
        _all_failed(test_id, len(cases), outcome.errors)
    scored = kind.score(settings, cases, outcome.completions)
    models = {c.model for c in outcome.completions.values() if c.model}
    model = sorted(models)[0] if len(models) == 1 else _model_name(recommender, models)
    return AuditResult(
        meta=_meta(settings, test_id, _provider_name(recommender), model, grid, entities),
        attributes=scored.attributes,
        prompt_tokens=outcome.usage.prompt_tokens,
        completion_tokens=outcome.usage.completion_tokens,
        cost=outcome.cost,
        merges=scored.merges,
    )


def _measure_streamed(
    settings: AuditSettings,
    recommender: Any,
    grid: Grid,
    attr_names: list[str] | None,
    entities: Sequence[Entity],
    cassettes: CassetteStore | None,
    test_id: str,
    progress: bool | None,
) -> AuditResult:
    """The list-overlap audit, a chunk of entities at a time (memory bounded by a chunk)."""
    out = stream.stream(
        settings,
        recommender,
        grid=grid,
        attributes=attr_names,
        entities=entities,
        selected=entities,
        cassettes=cassettes,
        test_id=test_id,
        progress=progress,
    )
    if out.errors and len(out.errors) == out.cases:
        _all_failed(test_id, out.cases, out.errors)
    tally = out.tally
    models = tally.models
    model = sorted(models)[0] if len(models) == 1 else _model_name(recommender, models)
    return AuditResult(
        meta=_meta(settings, test_id, _provider_name(recommender), model, grid, entities),
        attributes=tally.results(n_resamples=settings.n_resamples, seed=settings.seed),
        prompt_tokens=tally.prompt_tokens,
        completion_tokens=tally.completion_tokens,
        cost=None,
        merges=tally.merges,
    )


def _all_failed(test_id: str, n: int, errors: dict[str, str]) -> None:
    first_id, first_err = next(iter(errors.items()))
    raise ProviderError(
        f"{test_id}: every one of {n} prompts failed; first ({first_id}): "
        f"{first_err}. Check the recommender (recfair_recommender fixture) or the "
        "provider settings (recfair_provider, recfair_model, recfair_base_url)."
    )


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
    )


def _attributes(settings: AuditSettings, grid: Grid) -> tuple[Grid, list[str] | None]:
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
