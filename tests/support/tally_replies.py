"""Synthetic parsed replies for the tally and shard tests (tests/unit/test_tally.py,
tests/unit/test_shards.py): plausible lists, some short, empty, refused or missing."""

from __future__ import annotations

import random
from dataclasses import dataclass

from pytest_recfair.engine.overlap.tally import Tally, TallyConfig

LAYOUT = {"religion": ["Muslim", "Jewish", "Christian"], "gender": ["a woman", "a man"]}


@dataclass(frozen=True)
class Case:
    entity_id: str
    attribute: str | None
    value: str | None
    repeat: int


@dataclass(frozen=True)
class Reply:
    case: Case
    items: list[str] | None
    status: str


def replies(n_entities: int, repeats: int, seed: int = 0) -> list[Reply]:
    """Plausible replies: lists drawn from a per-entity pool, some short, empty or missing."""
    rng = random.Random(seed)
    out: list[Reply] = []
    for e in range(n_entities):
        ent = f"ent-{e:03d}"
        pool = [f"t{e}-{i}" for i in range(12)]

        def draw(pool: list[str] = pool) -> tuple[list[str] | None, str]:
            u = rng.random()
            if u < 0.04:
                return None, "empty"
            if u < 0.08:
                return [], "refused"
            n = 5 if u < 0.2 else 8
            return rng.sample(pool, n), "short" if n < 8 else "ok"

        for rep in range(repeats):
            items, status = draw()
            out.append(Reply(Case(ent, None, None, rep), items, status))
            for attr, values in LAYOUT.items():
                for v in values:
                    items, status = draw()
                    out.append(Reply(Case(ent, attr, v, rep), items, status))
    return out


def config(repeats: int = 1, missing: str = "zero") -> TallyConfig:
    return TallyConfig(("jaccard", "serp", "prag"), 8, repeats, "normalized", missing)  # type: ignore[arg-type]


def entities(n: int) -> list[str]:
    return [f"ent-{e:03d}" for e in range(n)]


def tally_of(rs: list[Reply], n: int, cfg: TallyConfig, chunk: int) -> Tally:
    t = Tally.start(entities(n), LAYOUT, cfg)
    by_entity: dict[str, list[Reply]] = {}
    for r in rs:
        by_entity.setdefault(r.case.entity_id, []).append(r)
    ents = list(by_entity)
    for a in range(0, n, chunk):
        t.add([r for e in ents[a : a + chunk] for r in by_entity[e]])
    return t
