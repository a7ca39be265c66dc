"""``--fairness-shard=I/N`` and ``--fairness-merge``: one audit across several CI jobs.

A shard run scores its share of the entities (:func:`run_shard`) and writes the tally
with the whole audit's metadata; a merge run (:class:`MergeSource`) turns the shards of
each test back into the AuditResult of the unsharded run, without any recommender. Kinds
that score across entities (item side, candidate position) write their share's replies
instead, and the merge run scores the united replies as the unsharded run would.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_recfair import secrets
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.engine import overlap, pipeline, registry, stream
from pytest_recfair.engine import shardfile as shards
from pytest_recfair.engine.base import AuditInputs
from pytest_recfair.engine.shardfile import Shard, ShardResult
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.gate import unanswered as failures
from pytest_recfair.prompts import Entity, Grid
from pytest_recfair.providers import Completion, RunOutcome, Usage
from pytest_recfair.results import AuditMeta, AuditResult
from pytest_recfair.settings import AuditSettings

__all__ = ["KindInputs", "MergeSource", "ShardWritten", "run_shard"]

#: What a merge needs to rebuild a kind's prompts: seeds, grid and the kind's inputs.
KindInputs = Callable[[], tuple[Sequence[Entity], Grid, AuditInputs]]


@dataclass(frozen=True)
class ShardWritten:
    path: Path
    scored: int  # entities this shard scored
    total: int  # entities of the whole audit


def run_shard(
    settings: AuditSettings,
    recommender: Any,
    *,
    seeds: Sequence[Entity],
    grid: Grid,
    cassettes: CassetteStore | None,
    test_id: str,
    shard: Shard,
    root: Path,
    failed: Mapping[str, str] | None = None,
    inputs: AuditInputs | None = None,
) -> ShardWritten:
    """Score shard I/N of ``test_id``'s entities and write its result under ``root``."""
    kind = registry.select(settings)
    if kind is not overlap.OVERLAP:
        asked = pipeline.kind_cases(
            settings, kind, seeds=seeds, grid=grid, test_id=test_id, inputs=inputs or AuditInputs()
        )
        return _kind_shard(settings, recommender, asked, cassettes, test_id, shard, root, failed)
    meta, out = pipeline.stream_audit(
        settings,
        recommender,
        seeds=seeds,
        grid=grid,
        cassettes=cassettes,
        test_id=test_id,
        shard=shard,
        failed=failed,
        inputs=inputs,
    )
    lost = failures.summarize(out.failed, out.errors).failed
    counted = {"cases": out.cases, "failed": [dataclasses.asdict(f) for f in lost]}
    path = shards.shard_path(root, test_id, shard)
    shards.write_shard(
        path, test_id=test_id, shard=shard, meta=meta.to_dict(), tally=out.tally, failures=counted
    )
    return ShardWritten(path, int(out.tally.filled.sum()), len(out.tally.entities))


@dataclass
class MergeSource:
    """The shard results given to ``--fairness-merge``, read once on first use."""

    paths: tuple[Path, ...]
    found: dict[str, list[ShardResult]] | None = None
    used: set[str] = field(default_factory=set)

    def result(self, settings: AuditSettings, test_id: str, kind_inputs: KindInputs) -> AuditResult:
        """The merged (ungated) AuditResult of ``test_id``; ``kind_inputs`` is called
        for kinds whose prompts the merge rebuilds (never for list overlap)."""
        if self.found is None:
            self.found = shards.collect(self.paths)
        parts = self.found.get(test_id)
        where = ", ".join(str(p) for p in self.paths)
        if not parts:
            raise DataError(
                f"--fairness-merge: no shard result for {test_id} in {where}; run "
                f"`pytest --fairness --fairness-shard=I/N` for I = 1..N first and give "
                "the files (or their directories) they wrote."
            )
        kind = registry.select(settings)
        if kind is not overlap.OVERLAP:
            meta_dict, replies = shards.merge_replies(parts)
        else:
            meta_dict, tally = shards.merge_results(parts)
        meta = AuditMeta.from_dict(meta_dict)
        if meta.seed != settings.seed:
            raise ConfigError(
                f"--fairness-merge: the shards of {test_id} ran with --fairness-seed="
                f"{meta.seed}, this run has {settings.seed}; merge with the shards' seed "
                "(it also seeds the bootstrap)."
            )
        self.used.add(test_id)
        if kind is not overlap.OVERLAP:
            return _merged_kind(settings, kind, meta, replies, kind_inputs, where)
        return pipeline.with_failures(pipeline.result_of(settings, meta, tally), _failed(parts))

    def unused(self) -> list[str]:
        """Tests with shard results that this run did not merge (not collected, skipped)."""
        return sorted(set(self.found or {}) - self.used)


def _failed(parts: Sequence[ShardResult]) -> failures.FailureSummary:
    """The failed prompts the list-overlap shards counted, as one summary."""
    counted = [p.failures for p in parts if p.failures is not None]
    return failures.FailureSummary(
        total=sum(int(c["cases"]) for c in counted),
        failed=tuple(failures.FailedPrompt(**f) for c in counted for f in c["failed"]),
    )


def _kind_shard(
    settings: AuditSettings,
    recommender: Any,
    asked: pipeline.KindCases,
    cassettes: CassetteStore | None,
    test_id: str,
    shard: Shard,
    root: Path,
    failed: Mapping[str, str] | None,
) -> ShardWritten:
    """Send this shard's share of a kind's prompts and write their replies."""
    mine = {e.id for e in shards.select(asked.entities, shard)}
    cases = [c for c in asked.cases if c.entity_id in mine]
    outcome = pipeline.send_kind_cases(
        settings, recommender, cases, cassettes=cassettes, test_id=test_id, failed=failed
    )
    share = pipeline.KindCases(cases, asked.grid, asked.entities)
    # too many failed prompts stop the shard job here, as they would stop the whole run
    pipeline.check_failures(settings, test_id, cases, outcome.errors)
    meta = pipeline.kind_meta(settings, test_id, recommender, share, outcome.completions)
    # scrubbed like a cassette: a reply or an error may quote what was sent
    replies: dict[str, dict[str, Any]] = secrets.scrub_json(
        {
            "completions": {k: _reply_dict(c) for k, c in outcome.completions.items()},
            "errors": dict(outcome.errors),
        }
    )
    path = shards.shard_path(root, test_id, shard)
    shards.write_shard(path, test_id=test_id, shard=shard, meta=meta.to_dict(), replies=replies)
    answered = {c.entity_id for c in cases}
    return ShardWritten(path, len(answered), len(asked.entities))


def _merged_kind(
    settings: AuditSettings,
    kind: Any,
    meta: AuditMeta,
    replies: Mapping[str, Mapping[str, Any]],
    kind_inputs: KindInputs,
    where: str,
) -> AuditResult:
    """Score the shards' united replies over the whole audit's prompts."""
    seeds, grid, inputs = kind_inputs()
    asked = pipeline.kind_cases(
        settings, kind, seeds=seeds, grid=grid, test_id=meta.test_id, inputs=inputs
    )
    completions = {k: _completion(v) for k, v in replies["completions"].items()}
    errors = {k: str(v) for k, v in replies["errors"].items()}
    missing = [c.id for c in asked.cases if c.id not in completions and c.id not in errors]
    if missing:
        raise DataError(
            f"--fairness-merge: the shards of {meta.test_id} ({where}) hold no reply for "
            f"{len(missing)} of its {len(asked.cases)} prompts; the merge run must use the "
            "seeds, grid and inputs the shards used (re-run the shards after a change)."
        )
    usage = sum((c.usage for c in completions.values() if c.usage), Usage())
    prices = stream.prices_of(settings)
    cost = None if prices is None else usage.cost(prices)
    outcome = RunOutcome(completions=completions, errors=errors, usage=usage, cost=cost)
    return pipeline.score_kind(settings, kind, asked, outcome, meta=meta, inputs=inputs)


def _reply_dict(c: Completion) -> dict[str, Any]:
    usage = None if c.usage is None else [c.usage.prompt_tokens, c.usage.completion_tokens]
    return {"text": c.text, "finish_reason": c.finish_reason, "model": c.model, "usage": usage}


def _completion(d: Mapping[str, Any]) -> Completion:
    usage = d.get("usage")
    return Completion(
        text=str(d["text"]),
        finish_reason=d.get("finish_reason"),
        usage=None if usage is None else Usage(int(usage[0]), int(usage[1])),
        model=d.get("model"),
    )
