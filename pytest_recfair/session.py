"""Run one fairness audit, judge it against its baseline, and collect a run's results.

grid -> prompts -> recommender (live or cassette) -> parse -> match -> score -> gate.

No pytest here: the plugin calls :func:`run_audit` from a fixture, :func:`judge` from the
call phase, and keeps one :class:`RunCollector` per pytest run for the summary and report.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from pytest_recfair import (
    __version__,
    baselines,
    gate,
    matching,
    metrics,
    parse,
    prompts,
    providers,
)
from pytest_recfair.cassettes import CassetteStore
from pytest_recfair.errors import DataError, ProviderError, RecfairError
from pytest_recfair.kinds import accept_command
from pytest_recfair.prompts import Entity, Grid, PromptCase
from pytest_recfair.results import (
    AttributeResult,
    AuditMeta,
    AuditResult,
    GateFailure,
    GateOutcome,
    Interval,
    Stat,
    ValueResult,
)
from pytest_recfair.settings import AuditSettings

__all__ = [
    "BaselineState",
    "RunCollector",
    "Verdict",
    "compared_baseline",
    "judge",
    "load_baseline",
    "payload",
    "property_items",
    "run_audit",
]

# reply statuses counted per attribute value
_REFUSED = parse.ReplyStatus.REFUSED.value
_SHORT = parse.ReplyStatus.SHORT.value


@dataclass(frozen=True, slots=True)
class _Reply:
    case: PromptCase
    items: list[str] | None  # None: no completion at all (provider error)
    status: str


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
    grid, templates, k ...) is not compared: the gate outcome carries a "baseline" failure
    saying why.
    """
    entities = prompts.subsample(list(seeds), settings.entities, seed=settings.seed)
    if not entities:
        raise DataError(
            f"{test_id}: the seed set is empty; give @fairness(seeds=...) a file or fixture "
            "with at least one entity."
        )
    grid, attr_names = _attributes(settings, grid)
    cases = prompts.build_cases(
        grid=grid,
        templates=settings.templates,
        entities=entities,
        domain=settings.domain,
        k=settings.k,
        language=settings.language,
        perturbation=settings.perturbation,
        seed=settings.seed,
        repeats=settings.repeats,
        attributes=attr_names,
    )
    outcome = providers.run_cases(
        recommender,
        cases,
        concurrency=settings.concurrency,
        cassettes=cassettes,
        test_id=test_id,
        progress=progress,
    )
    if outcome.errors and len(outcome.errors) == len(cases):
        first_id, first_err = next(iter(outcome.errors.items()))
        raise ProviderError(
            f"{test_id}: every one of {len(cases)} prompts failed; first ({first_id}): "
            f"{first_err}. Check the recommender (recfair_recommender fixture) or the "
            "provider settings (recfair_provider, recfair_model, recfair_base_url)."
        )
    style: parse.Style = "fairllm" if settings.variant == "fairllm" else "default"
    replies = _parse_all(cases, outcome.completions, settings.k, style)
    merges = 0
    if settings.variant != "fairllm":
        replies, merges = _canonicalize(replies)

    attributes = _score(settings, replies)
    models = {c.model for c in outcome.completions.values() if c.model}
    meta = AuditMeta(
        test_id=test_id,
        provider=_provider_name(recommender),
        model=sorted(models)[0] if len(models) == 1 else _model_name(recommender, models),
        grid=grid.name,
        grid_hash=grid.digest,
        templates=settings.templates,
        templates_hash=prompts.templates_digest(
            settings.templates, settings.domain, settings.language
        ),
        seeds_hash=prompts.seeds_digest(entities),
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
    )
    result = AuditResult(
        meta=meta,
        attributes=attributes,
        prompt_tokens=outcome.usage.prompt_tokens,
        completion_tokens=outcome.usage.completion_tokens,
        cost=outcome.cost,
        merges=merges,
    )
    return replace(result, gate=_gate(settings, result, baseline))


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


def _parse_all(
    cases: Sequence[PromptCase], completions: Mapping[str, Any], k: int, style: parse.Style
) -> list[_Reply]:
    """Parse every reply; identical texts (common: fair values repeat the neutral list)
    are parsed once."""
    seen: dict[str, tuple[tuple[str, ...], str]] = {}
    out = []
    for case in cases:
        completion = completions.get(case.id)
        if completion is None:  # no reply at all: counted as missing, status "empty"
            parsed = parse.reply(None, k, style=style)
            out.append(_Reply(case, None, str(parsed.status.value)))
            continue
        hit = seen.get(completion.text)
        if hit is None:
            parsed = parse.reply(completion.text, k, style=style)
            hit = seen[completion.text] = (tuple(parsed.items), str(parsed.status.value))
        out.append(_Reply(case, list(hit[0]), hit[1]))
    return out


def _canonicalize(replies: list[_Reply]) -> tuple[list[_Reply], int]:
    """Map every title of one entity (all its lists) to one canonical key."""
    by_entity: dict[str, list[int]] = {}
    for i, r in enumerate(replies):
        if r.items is not None:
            by_entity.setdefault(r.case.entity_id, []).append(i)
    out = list(replies)
    merges = 0
    for entity_id, idx in by_entity.items():
        lists = [replies[i].items or [] for i in idx]
        canon, merged = matching.canonicalize(lists, entity=entity_id)
        merges += len(merged)
        for i, keys in zip(idx, canon, strict=True):
            out[i] = replace(replies[i], items=list(keys))
    return out, merges


Lists = dict[str, list[str] | None]  # entity id -> parsed list (None: no completion)


def _score(settings: AuditSettings, replies: Sequence[_Reply]) -> tuple[AttributeResult, ...]:
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
        boot = metrics.bootstrap(matrix, n_resamples=settings.n_resamples, seed=settings.seed)
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
        seed=settings.seed,
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


def _gate(
    settings: AuditSettings, result: AuditResult, baseline: AuditResult | None
) -> GateOutcome:
    thresholds = _thresholds(settings)
    problem = None if baseline is None else baselines.incompatibility(baseline.meta, result.meta)
    outcome = gate.evaluate(
        result,
        None if problem else baseline,
        thresholds,
        tolerance=settings.tolerance,
        alpha=settings.alpha,
        seed=settings.seed,
        n_resamples=settings.n_resamples,
    )
    if problem:
        failure = GateFailure("incompatible", detail=problem)
        outcome = replace(outcome, passed=False, failures=(*outcome.failures, failure))
    return outcome


# --- baselines and verdicts -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BaselineState:
    """What is on disk for one test: a loaded baseline, nothing, or an unusable file."""

    path: Path
    result: AuditResult | None = None
    problem: str | None = None  # unreadable / schema-invalid / truncated, with the reason


def load_baseline(root: Path, test_id: str) -> BaselineState:
    path = baselines.baseline_path(root, test_id)
    if not path.exists():
        return BaselineState(path)
    try:
        return BaselineState(path, result=baselines.load(path))
    except RecfairError as exc:
        return BaselineState(path, problem=str(exc))


@dataclass(frozen=True, slots=True)
class Verdict:
    """Pass/fail of one audited test; ``result`` carries the gate outcome as judged."""

    passed: bool
    result: AuditResult
    message: str = ""
    wrote: Path | None = None  # baseline written by --fairness-update


def judge(
    settings: AuditSettings, result: AuditResult, state: BaselineState, test_id: str
) -> Verdict:
    """Decide pass/fail for one audited test, writing the baseline under --fairness-update.

    With --fairness-update the caller gated without a baseline, so only absolute thresholds
    can fail and the new numbers become the baseline. Otherwise a missing, unusable or
    incompatible baseline fails and says how to (re)create it.
    """
    outcome = result.gate or GateOutcome(passed=True)
    accept = accept_command(test_id)
    if settings.update:
        if not outcome.passed:
            return Verdict(False, result, _failure_message(settings, result, outcome, None))
        baselines.write(state.path, replace(result, gate=None))
        return Verdict(True, result, wrote=state.path)
    problem: str | None = None
    if state.problem is not None:
        problem = (
            f"fairness baseline {state.path} is unusable: {state.problem}\n"
            f"Re-create it from this run with: {accept}"
        )
    elif state.result is None:
        problem = (
            f"no fairness baseline for {test_id} (expected {state.path}).\n"
            f"Create it from this run with: {accept}\nthen commit the baseline file."
        )
    if problem is not None:
        failure = GateFailure("baseline", detail=problem)
        judged = replace(
            result, gate=replace(outcome, passed=False, failures=(*outcome.failures, failure))
        )
        return Verdict(False, judged, problem)
    if outcome.passed:
        return Verdict(True, result)
    return Verdict(False, result, _failure_message(settings, result, outcome, state.result))


def _failure_message(
    settings: AuditSettings,
    result: AuditResult,
    outcome: GateOutcome,
    baseline: AuditResult | None,
) -> str:
    from pytest_recfair import report  # the words are the report's, the decision the gate's

    return report.failure_message(outcome, result)


def _thresholds(settings: AuditSettings) -> gate.Thresholds:
    return gate.Thresholds(**settings.thresholds())


# --- one pytest run ---------------------------------------------------------------------


def property_items(result: AuditResult) -> list[tuple[str, float | int | str]]:
    """JUnit XML properties: recfair.<attribute>.<statistic> = value."""
    props: list[tuple[str, float | int | str]] = [("recfair.model", result.meta.model)]
    for a in result.attributes:
        key = "recfair." + a.attribute.casefold().replace(" ", "_")
        for stat in ("snsr", "snsv", "pafs"):
            props.append((f"{key}.{stat}", _round(getattr(a, stat).value)))
        props.append((f"{key}.refusal_gap", _round(a.refusal_gap)))
        if a.entropy is not None:
            props.append((f"{key}.entropy", _round(a.entropy)))
    if result.gate is not None:
        props.append(("recfair.gate", "pass" if result.gate.passed else "fail"))
    return props


def _round(x: float) -> float:
    return x if math.isnan(x) else round(float(x), 6)


@dataclass
class RunCollector:
    """The results of one pytest run, gathered on the controller (or the only process)."""

    results: dict[str, AuditResult] = field(default_factory=dict)
    # the baseline each test was compared against, by test id (for the report's markers)
    baselines: dict[str, AuditResult] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. "fairness report written: PATH"

    def add(self, payload: Mapping[str, Any]) -> None:
        result = AuditResult.from_dict(dict(payload["result"]))
        test_id = result.meta.test_id
        self.results[test_id] = result
        base = payload.get("baseline")
        if base:
            self.baselines[test_id] = AuditResult.from_dict(dict(base))
        else:  # a re-run of the same test id without a comparison drops the stale one
            self.baselines.pop(test_id, None)
        if payload.get("baseline_written"):
            self.written.append(Path(str(payload["baseline_written"])))

    def ordered(self) -> list[AuditResult]:
        return [self.results[k] for k in sorted(self.results)]

    def summary_lines(self) -> list[str]:
        from pytest_recfair import report  # used once, at the end of a run

        lines = list(report.terminal_summary(self.ordered()))
        lines.extend(f"fairness baseline written: {p}" for p in sorted(self.written))
        lines.extend(self.notes)
        return lines

    def write_report(self, path: Path) -> None:
        from pytest_recfair import report

        report.write_report(path, self.ordered(), self.baselines)


def compared_baseline(
    settings: AuditSettings, result: AuditResult, state: BaselineState
) -> AuditResult | None:
    """The baseline ``result`` was gated against: none under --fairness-update, none when
    there is no usable file, none when it is incompatible (other seeds, grid, k ...)."""
    base = state.result
    if settings.update or base is None:
        return None
    if baselines.incompatibility(base.meta, result.meta) is not None:
        return None
    return base


def payload(verdict: Verdict, baseline: AuditResult | None = None) -> dict[str, Any]:
    """What a worker ships to the controller with the call-phase report (JSON-able).

    ``baseline`` (the one the result was compared against) travels as its dict, so the
    controller's report shows baseline figures without reading the baselines directory.
    """
    return {
        "result": verdict.result.to_dict(),
        "baseline": None if baseline is None else baseline.to_dict(),
        "baseline_written": str(verdict.wrote) if verdict.wrote else None,
    }
