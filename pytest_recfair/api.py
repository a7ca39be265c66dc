"""The audit outside pytest::

    result = pytest_recfair.audit(SimulatedRecommender("demo"), attr="religion", entities=40)
    outcome = pytest_recfair.judge(result, baseline, tolerance=0.02)

with the plugin's argument names and checks: a notebook and a test mean the same thing."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_recfair import settings
from pytest_recfair.errors import ConfigError
from pytest_recfair.prompts.grids import load_grid
from pytest_recfair.prompts.seeds import Entity, load_seeds
from pytest_recfair.results import AuditResult, GateOutcome


def _settings(kwargs: Mapping[str, Any], where: str) -> settings.AuditSettings:
    marker = {k: v for k, v in kwargs.items() if k in settings.MARKER_KEYS}
    run = {k: v for k, v in kwargs.items() if k not in settings.MARKER_KEYS}
    unknown = sorted(k for k in run if k not in settings.DEFAULTS)
    if unknown:
        raise ConfigError(
            f"{where}: unknown argument(s) {', '.join(unknown)}. Allowed: the @fairness "
            f"marker's ({', '.join(settings.MARKER_KEYS)}) and the run settings "
            f"({', '.join(k for k in settings.DEFAULTS if k not in settings.MARKER_KEYS)})."
        )
    return settings.resolve(cli=run, marker=marker)


def bundled_seeds(domain: str, where: str) -> str:
    """The bundled seed set of ``domain`` (directors for movie, artists for music)."""
    from pytest_recfair.prompts.seeds import BUNDLED_SEEDS

    for name, its_domain in BUNDLED_SEEDS.items():
        if its_domain == domain.casefold():
            return name
    raise ConfigError(
        f"{where}(domain={domain!r}) has no bundled seed set (bundled: "
        f"{', '.join(f'{n} ({d})' for n, d in BUNDLED_SEEDS.items())}); pass seeds= a file, "
        "a list of names or (in a test) a fixture name."
    )


def seed_entities(value: Any, domain: str, where: str) -> list[Entity]:
    """A seeds file or set name, or a list of entities or names (audit's seeds=, a seeds
    fixture's value), as entities."""
    from pytest_recfair.prompts.seeds import as_entity

    if isinstance(value, str | Path):
        return load_seeds(value, domain=domain)
    if isinstance(value, list | tuple) and all(isinstance(x, Entity | str) for x in value):
        return [as_entity(x, domain) for x in value]
    raise ConfigError(
        f"{where} gave {type(value).__name__}; expected a list of prompts.seeds.Entity, a "
        "list of names, or a seeds file path."
    )


def audit(
    recommender: Any,
    *,
    seeds: str | Path | Sequence[Any] | None = None,
    test_id: str = "pytest_recfair.engine",
    cassettes: Any = None,
    progress: bool = False,
    **marker_arguments: Any,
) -> AuditResult:
    """The ungated result of ``recommender`` (a callable ``prompt -> reply``, a provider
    or a ``SimulatedRecommender``); ``cassettes``: a ``CassetteStore``, else all is sent."""
    from pytest_recfair.engine import stream
    from pytest_recfair.engine.base import AuditInputs, AuditRequest
    from pytest_recfair.replies import catalogue as read

    s = _settings(marker_arguments, "audit")
    # the files other kinds read, as paths (outside pytest there are no fixtures)
    inputs = AuditInputs(
        catalogue=None if s.catalogue is None else read.as_catalogue(s.catalogue, "audit"),
        candidates=None if s.candidates is None else read.read_candidates(s.candidates, "audit"),
        absent=frozenset() if s.absent is None else read.read_absent(Path(s.absent)),
    )
    named = s.seeds or bundled_seeds(s.domain, "audit") if seeds is None else seeds
    entities = seed_entities(named, s.domain, "audit(seeds=...)")
    job = AuditRequest(s, recommender, entities, load_grid(s.grid), test_id, cassettes, inputs)
    return stream.measure(dataclasses.replace(job, progress=progress))


def judge(
    result: AuditResult, baseline: AuditResult | None = None, **gate_arguments: Any
) -> GateOutcome:
    """Gate ``result`` (against ``baseline`` when given; an incompatible one fails)."""
    from pytest_recfair.engine import verdict

    if not isinstance(result, AuditResult):
        raise TypeError(f"judge: result must be an AuditResult; got {type(result).__name__}.")
    if baseline is not None and not isinstance(baseline, AuditResult):
        raise TypeError(
            f"judge: baseline must be an AuditResult (e.g. baselines.load(path)) or None; "
            f"got {type(baseline).__name__}."
        )
    return verdict.gate_outcome(_settings(gate_arguments, "judge"), result, baseline)
