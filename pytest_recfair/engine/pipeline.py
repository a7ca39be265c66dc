"""Run one audit: grid -> prompts -> recommender (live or cassette) -> the kind's scorer.

No pytest here. :func:`measure` produces the ungated result; :func:`run_audit` also gates
it against a baseline (the standalone API). Every kind of audit takes the same path: the
kind (from :mod:`.registry`) builds the prompts and scores them a chunk of entities at a
time (:mod:`.stream`); failures, tokens, the runner's cost and the metadata are counted
here the same way for every kind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from pytest_recfair.engine import registry, stream, verdict
from pytest_recfair.engine.base import AuditKind, AuditRequest, Scorer, Sent
from pytest_recfair.errors import ProviderError
from pytest_recfair.gate import baselines
from pytest_recfair.gate import unanswered as failures
from pytest_recfair.prompts.grids import Grid
from pytest_recfair.prompts.seeds import Entity, seeds_digest
from pytest_recfair.prompts.templates import templates_digest
from pytest_recfair.results import META_TYPES, AuditMeta, AuditResult
from pytest_recfair.settings import AuditSettings
from pytest_recfair.vocab import PLUGIN_VERSION

__all__ = ["Run", "check_failures", "finish", "measure", "meta_of", "run", "run_audit"]


def run_audit(request: AuditRequest, baseline: AuditResult | None = None) -> AuditResult:
    """Audit the request's recommender and gate the result (against ``baseline``).

    The recommender is an HTTP provider, a ``CallableProvider`` or a plain callable
    ``recommend(prompt) -> str | list[str]``. An incompatible ``baseline`` (other seeds,
    grid, templates, k, missing policy ...) is not compared: the gate outcome carries a
    "baseline" failure saying why.
    """
    result = measure(request)
    problem = None if baseline is None else baselines.result_incompatibility(baseline, result)
    return verdict.gate_result(request.settings, result, None if problem else baseline, problem)


def measure(request: AuditRequest) -> AuditResult:
    """Audit the request's recommender as its settings say; the result is not gated."""
    with stream.fewer_collections():
        done = run(request)
        return finish(request.settings, done.meta, done.scorer, done.sent)


@dataclass(frozen=True)
class Run:
    """One run's (or shard's) scorer, what was sent, and the whole audit's metadata."""

    kind: AuditKind
    entities: list[Entity]
    meta: AuditMeta
    scorer: Scorer
    sent: Sent


def run(request: AuditRequest) -> Run:
    """Send and score the request's prompts (its shard's share, with a shard)."""
    kind = registry.kind_for(request.settings)
    out = stream.stream(request, kind)
    meta = meta_of(request, kind, out.grid, out.entities, out.sent.models)
    return Run(kind, out.entities, meta, out.scorer, out.sent)


def finish(settings: AuditSettings, meta: AuditMeta, scorer: Scorer, sent: Sent) -> AuditResult:
    """The ungated result from a complete scorer (one run's, or merged shards'); too
    many failed prompts are a ProviderError listing them."""
    summary = check_failures(settings, meta.test_id, sent)
    scored = scorer.scored()
    return AuditResult(
        meta=meta,
        attributes=scored.attributes,
        prompt_tokens=sent.prompt_tokens,
        completion_tokens=sent.completion_tokens,
        cost=sent.cost,
        merges=scored.merges,
        extras=dict(scored.extras),
        evidence=dict(scored.evidence),
        failed=summary.by_group(),
        prompts=summary.total if summary.count else 0,
    )


def check_failures(settings: AuditSettings, test_id: str, sent: Sent) -> failures.FailureSummary:
    """The prompts that got no valid response; a ProviderError listing them per value
    (with the first errors) when their share is above ``max_failed``."""
    summary = sent.summary()
    if not summary.within(settings.max_failed):
        raise ProviderError(summary.message(test_id, settings.max_failed))
    return summary


def meta_of(
    request: AuditRequest, kind: AuditKind, grid: Grid, entities: Sequence[Entity], models: set[str]
) -> AuditMeta:
    """The audit's metadata: the common header and the fields of its kind's meta type
    (settings of the same name, or worked out here); the model as the replies name it."""
    settings, recommender = request.settings, request.recommender
    model = sorted(models)[0] if len(models) == 1 else _model_name(recommender, models)
    worked_out: dict[str, Callable[[], Any]] = {
        "test_id": lambda: request.test_id,
        "provider": lambda: _provider_name(recommender),
        "model": lambda: model,
        "plugin_version": lambda: PLUGIN_VERSION,
        "grid": lambda: grid.name,
        "grid_hash": lambda: grid.digest,
        "templates_hash": lambda: templates_digest(
            settings.templates, settings.domain, settings.language
        ),
        "seeds_hash": lambda: seeds_digest(list(entities)),
        "n_entities": lambda: len(entities),
        "parse": lambda: settings.parse_style,
    }
    cls = META_TYPES.get(kind.name, AuditMeta)
    return cls(
        kind=kind.name,
        **{
            f.name: worked_out[f.name]() if f.name in worked_out else getattr(settings, f.name)
            for f in fields(cls)
            if f.name != "kind"
        },
    )


def _provider_name(recommender: object) -> str:
    name = getattr(recommender, "name", None)
    if isinstance(name, str) and name:
        return name
    return "callable"


def _model_name(recommender: object, seen: set[str]) -> str:
    model = getattr(recommender, "model", None)
    if isinstance(model, str) and model:
        return model
    if seen:
        return ",".join(sorted(seen))
    qual = getattr(recommender, "__qualname__", None) or type(recommender).__qualname__
    return str(qual)
