"""``--fairness-shard=I/N`` and ``--fairness-merge``: one audit across several CI jobs.

A shard run scores its share of the entities (:func:`run_shard`) and writes the tally
with the whole audit's metadata; a merge run (:class:`MergeSource`) turns the shards of
each test back into the AuditResult of the unsharded run, without any recommender.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_recfair import shards
from pytest_recfair.audit import pipeline
from pytest_recfair.audit.base import AuditInputs
from pytest_recfair.cassettes import CassetteStore
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.prompts import Entity, Grid
from pytest_recfair.results import AuditMeta, AuditResult
from pytest_recfair.settings import AuditSettings
from pytest_recfair.shards import Shard, ShardResult

__all__ = ["MergeSource", "ShardWritten", "run_shard"]


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
    path = shards.shard_path(root, test_id, shard)
    shards.write_shard(path, test_id=test_id, shard=shard, meta=meta.to_dict(), tally=out.tally)
    return ShardWritten(path, int(out.tally.filled.sum()), len(out.tally.entities))


@dataclass
class MergeSource:
    """The shard results given to ``--fairness-merge``, read once on first use."""

    paths: tuple[Path, ...]
    found: dict[str, list[ShardResult]] | None = None
    used: set[str] = field(default_factory=set)

    def result(self, settings: AuditSettings, test_id: str) -> AuditResult:
        """The merged (ungated) AuditResult of ``test_id``."""
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
        meta_dict, tally = shards.merge_results(parts)
        meta = AuditMeta.from_dict(meta_dict)
        if meta.seed != settings.seed:
            raise ConfigError(
                f"--fairness-merge: the shards of {test_id} ran with --fairness-seed="
                f"{meta.seed}, this run has {settings.seed}; merge with the shards' seed "
                "(it also seeds the bootstrap)."
            )
        self.used.add(test_id)
        return pipeline.result_of(settings, meta, tally)

    def unused(self) -> list[str]:
        """Tests with shard results that this run did not merge (not collected, skipped)."""
        return sorted(set(self.found or {}) - self.used)
