"""Chunked scoring (pytest_recfair.engine.overlap.tally): same numbers as scoring at once,
whatever the chunk size, and shards that merge into exactly the unsharded result."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pytest_recfair.engine.overlap import quality
from pytest_recfair.engine.overlap.kind import OverlapScorer
from pytest_recfair.engine.overlap.tally import Tally, merge
from pytest_recfair.errors import DataError
from pytest_recfair.metrics import aggregate, stats
from pytest_recfair.settings import AuditSettings
from tests.support.tally_replies import LAYOUT, config, entities, replies, tally_of


def dumps(t: Tally) -> str:
    return json.dumps([a.to_dict() for a in t.results(n_resamples=200, seed=3)], sort_keys=True)


@pytest.mark.parametrize(("repeats", "missing"), [(1, "zero"), (2, "skip"), (3, "zero")])
def test_chunk_size_changes_no_number(repeats: int, missing: str) -> None:
    rs = replies(23, repeats)
    cfg = config(repeats, missing)
    whole = dumps(tally_of(rs, 23, cfg, 23))
    assert dumps(tally_of(rs, 23, cfg, 1)) == whole
    assert dumps(tally_of(rs, 23, cfg, 5)) == whole


@pytest.mark.parametrize("n_shards", [2, 3, 7])
def test_shards_merge_to_the_unsharded_numbers(n_shards: int) -> None:
    rs = replies(20, 2)
    cfg = config(2, "skip")
    whole = tally_of(rs, 20, cfg, 6)
    parts = []
    for i in range(n_shards):
        mine = set(entities(20)[i::n_shards])
        t = tally_of([r for r in rs if r.case.entity_id in mine], 20, cfg, 4)
        # through JSON, as shard files travel between CI jobs
        parts.append(Tally.from_dict(json.loads(json.dumps(t.to_dict()))))
    merged = merge(list(reversed(parts)))
    assert dumps(merged) == dumps(whole)
    assert merged.to_dict() == whole.to_dict()


def test_results_match_the_metrics_package() -> None:
    """Matrices, intervals and noise floor equal scoring the whole audit in one call;
    curves and entropy equal it to 1e-11 (fixed-point sums)."""
    rs = replies(15, 2)
    t = tally_of(rs, 15, config(2), 4)
    results = {a.attribute: a for a in t.results(n_resamples=300, seed=1)}
    neutral = [
        {r.case.entity_id: r.items for r in rs if r.case.attribute is None and r.case.repeat == i}
        for i in range(2)
    ]
    by_value = [
        {
            v: {r.case.entity_id: r.items for r in rs if r.case.value == v and r.case.repeat == i}
            for v in LAYOUT["religion"]
        }
        for i in range(2)
    ]
    cubes = [
        aggregate.similarity_cube(neutral[i], by_value[i], K=8, metrics=("serp",)) for i in range(2)
    ]
    got = results["religion.serp"]
    sims = np.nanmean(np.stack([c.matrix("serp").sims for c in cubes]), axis=0)
    np.testing.assert_array_equal(got.matrix.sims, sims)
    boot = stats.intervals(got.matrix, n_resamples=300, seed=1)
    assert got.snsr.ci is not None
    assert (got.snsr.ci.low, got.snsr.ci.high) == boot.snsr_ci
    for v, curve in cubes[0].curves("serp").items():
        np.testing.assert_allclose(got.curves[v], curve, rtol=0, atol=1e-11)
    ent = np.mean(
        [
            aggregate.entropy([by_value[i][v][e] or [] for i in range(2)])
            for v in LAYOUT["religion"]
            for e in entities(15)
        ]
    )
    assert got.entropy == pytest.approx(ent, abs=1e-11)
    floor = stats.noise_floor(
        {e: [neutral[0][e], neutral[1][e]] for e in entities(15)},
        metric="serp",
        k=8,
        n_resamples=300,
        seed=1,
    )
    assert floor is not None
    assert got.noise_floor is not None
    assert got.noise_floor.value == floor.mean
    assert got.noise_floor.ci is not None
    assert (got.noise_floor.ci.low, got.noise_floor.ci.high) == floor.ci
    counts = {v.value: (v.total, v.refusals, v.short) for v in got.values}
    for v in LAYOUT["religion"]:
        mine = [r.status for r in rs if r.case.value == v]
        assert counts[v] == (len(mine), mine.count("refused"), mine.count("short"))


def test_incomplete_or_overlapping_shards_are_refused() -> None:
    rs = replies(6, 1)
    cfg = config()
    half = tally_of([r for r in rs if r.case.entity_id < "ent-003"], 6, cfg, 3)
    with pytest.raises(DataError, match="3 of 6 entities have no scores"):
        half.results(n_resamples=10, seed=0)
    with pytest.raises(DataError, match="in two shard results"):
        merge([half, half])
    with pytest.raises(DataError, match="scored twice"):
        half.add([r for r in rs if r.case.entity_id == "ent-000"])
    other = Tally.start(entities(6), LAYOUT, config(repeats=2))
    with pytest.raises(DataError, match="not of the same audit"):
        merge([half, other])


def test_an_incomplete_tally_is_refused_before_the_bootstrap_draws_weights(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Peak memory: the quality bootstrap's ~8 MB of weights are never drawn for a tally
    that cannot be reported."""
    rs = replies(6, 1)
    half = tally_of([r for r in rs if r.case.entity_id < "ent-003"], 6, config(), 3)
    half.quality = quality.QualityTally.start(entities(6), LAYOUT, 8)
    drawn: list[int] = []
    monkeypatch.setattr(quality, "seeded_weights", lambda *a: drawn.append(1))
    with pytest.raises(DataError, match="3 of 6 entities have no scores"):
        OverlapScorer(AuditSettings(), half).scored()
    assert drawn == []
