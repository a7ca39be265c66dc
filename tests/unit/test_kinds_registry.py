"""One path for every kind of audit (issue 19): the run modes and the report formats reach
a kind through the registry only, a kind scores a chunk of entities at a time, and a new
kind is one module plus one registry line, shown in every format and merged from shards."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair import api
from pytest_recfair.engine import base, registry, stream
from pytest_recfair.engine.base import (
    AuditInputs,
    AuditKind,
    AuditRequest,
    PooledScorer,
    Scored,
)
from pytest_recfair.engine.items import ItemResults
from pytest_recfair.engine.sharding import MergeSource, run_shard
from pytest_recfair.engine.stream import measure
from pytest_recfair.prompts.cases import PromptCase
from pytest_recfair.prompts.grids import Grid, load_grid
from pytest_recfair.prompts.seeds import Entity, load_seeds
from pytest_recfair.report import sections as junit
from pytest_recfair.report.fmt import Table
from pytest_recfair.report.registry import render
from pytest_recfair.report.status import describe
from pytest_recfair.report.terminal import terminal_summary
from pytest_recfair.results import AuditResult, GateFailure
from pytest_recfair.settings import AuditSettings, resolve
from pytest_recfair.settings.values import Shard
from pytest_recfair.sim.recommender import SimulatedRecommender

PACKAGE = Path(registry.__file__).parent.parent
#: Modules that must work for every kind without naming one.
SHARED = [
    *(PACKAGE / "engine" / f"{m}.py" for m in ("stream", "sharding", "replaymemo")),
    *(PACKAGE / "engine" / f"{m}.py" for m in ("plan", "verdict", "base")),
    *sorted((PACKAGE / "report").glob("*.py")),
]


@pytest.mark.parametrize("path", SHARED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_run_mode_or_report_names_a_kind(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for kind in registry.kinds():
        assert not re.search(rf"""["']{kind.name}["']""", text), (path, kind.name)
    assert not re.search(r"\b(OVERLAP|ITEMS|POSITIONS)\b", text), path
    # the shard file format knows a tally payload (engine.overlap.tally), never a kind
    kind_module = r"engine\.(overlap(\.kind)?|items(\.\w+)?|positions) import"
    assert not re.search(kind_module + r"|engine import (overlap|items|positions)\b", text), path


# --- a new kind: this module plus one registry line ------------------------------------


class LengthSections:
    def measure(self, result: AuditResult) -> str:
        return "reply length"

    def tables(self, data: Any) -> list[Table]:
        return [Table("Reply length", lead=f"mean reply length {data['mean']:.2f}")]

    def brief(self, data: Any) -> str:
        return f"mean reply length {data['mean']:.2f}"

    def properties(self, data: Any) -> list[tuple[str, float | int | str]]:
        return [("recfair.length.mean", data["mean"])]


class LengthAudit(base.PooledKind):
    """A toy kind: the mean length of the replies, over the whole audit (its merge: the
    pooled kinds' replay of the shards' replies)."""

    name = "length"
    sections = LengthSections()

    def build_cases(
        self, settings: AuditSettings, grid: Grid, entities: Sequence[Entity], inputs: AuditInputs
    ) -> list[PromptCase]:
        return registry.kinds()[-1].build_cases(settings, grid, entities, inputs)  # type: ignore[return-value]

    def scorer(
        self,
        settings: AuditSettings,
        entities: Sequence[str],
        first: Sequence[Any],
        inputs: AuditInputs,
    ) -> PooledScorer:
        return PooledScorer(_length)

    def failures(
        self, settings: AuditSettings, result: AuditResult, baseline: AuditResult | None
    ) -> tuple[GateFailure, ...]:
        return ()


def _length(cases: Sequence[Any], completions: Mapping[str, Any]) -> Scored:
    sizes = [len(completions[c.id].text) for c in cases if c.id in completions]
    return Scored((), 0, {"length": {"mean": sum(sizes) / len(sizes), "n": len(sizes)}})


@pytest.fixture
def length_kind(monkeypatch: pytest.MonkeyPatch) -> LengthAudit:
    kind = LengthAudit()
    monkeypatch.setitem(globals(), "LENGTH", kind)  # the module's NAME, as the registry finds it
    # the one registry line, first: it wants every settings object
    monkeypatch.setattr(registry, "HOMES", {"length": (__name__, lambda s: True), **registry.HOMES})
    return kind


def _request(**marker: object) -> AuditRequest:
    s = resolve(marker={"entities": 6, "attr": "religion", **marker})
    return AuditRequest(
        s, SimulatedRecommender("demo"), load_seeds("directors"),
        load_grid("faireval"), "t::length",
    )  # fmt: skip


def test_a_new_kind_runs_and_shows_in_every_format(length_kind: LengthAudit) -> None:
    kind: AuditKind = length_kind  # satisfies the protocol (checked by mypy)
    assert registry.kind_for(_request().settings) is kind
    result = measure(_request())
    mean = result.extras["length"]["mean"]
    assert result.attributes == ()
    assert mean > 0
    shown = f"mean reply length {mean:.2f}"
    assert shown in render(".html", [result])
    assert shown in render(".md", [result])
    assert any(shown in line for line in terminal_summary([result]))
    assert '"length": {"mean"' in render(".json", [result])
    assert ("recfair.length.mean", mean) in junit.properties(result)
    assert "reply length" in describe(result)


def test_a_new_kind_merges_from_shards(length_kind: LengthAudit, tmp_path: Path) -> None:
    whole = measure(_request())
    for i in (1, 2):
        request = _request()
        run_shard(AuditRequest(**{**request.__dict__, "shard": Shard(i, 2)}), tmp_path)
    request = _request()
    merged = MergeSource((tmp_path,)).result(
        request.settings, request.test_id, lambda: (request.seeds, request.grid, AuditInputs())
    )
    assert merged.extras == whole.extras


def test_an_unknown_kind_of_results_is_an_error_not_an_empty_section() -> None:
    from tests.support import synth_results

    odd = synth_results.audit()
    odd = AuditResult(**{**{f: getattr(odd, f) for f in odd.__slots__}, "extras": {"x": {}}})
    with pytest.raises(LookupError, match="unknown kind of audit 'x'"):
        render(".html", [odd])


# --- every kind scores a chunk of entities at a time -----------------------------------


def _kinds_audit(tmp_path: Path, kind: str) -> AuditResult:
    seeds = [f"Director {i}" for i in range(12)]
    if kind == "items":
        rows = [f"r{i},Place {i:02d},{'$' if i < 10 else '$$'}" for i in range(20)]
        (tmp_path / "places.csv").write_text("id,title,price\n" + "\n".join(rows) + "\n")

        def cheap_for_women(prompt: str) -> str:
            start = 0 if "female" in prompt.lower() else 5 + len(prompt) % 5
            return "\n".join(f"{i + 1}. Place {start + i:02d}" for i in range(10))

        return api.audit(
            cheap_for_women, attr="gender", seeds=seeds, k=10, item_field="price",
            catalogue=str(tmp_path / "places.csv"), n_resamples=99,
        )  # fmt: skip
    if kind == "positions":
        (tmp_path / "c.yaml").write_text("".join(f"{s}: [A, B, C, D]\n" for s in seeds))
        return api.audit(
            lambda prompt: "B" if "woman" in prompt else "A", attr="gender", seeds=seeds,
            candidates=str(tmp_path / "c.yaml"), orders=3, n_resamples=99,
        )  # fmt: skip
    return api.audit(SimulatedRecommender("demo"), attr="gender", seeds=seeds, n_resamples=99)


@pytest.mark.parametrize("kind", ["overlap", "items", "positions"])
def test_one_entity_per_chunk_scores_as_one_chunk(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _kinds_audit(tmp_path, kind)
    monkeypatch.setattr(stream, "chunk_entities", lambda settings, per_entity: 1)
    assert _kinds_audit(tmp_path, kind).to_dict() == whole.to_dict()


def test_item_side_results_stay_typed_and_read_as_their_json(tmp_path: Path) -> None:
    result = _kinds_audit(tmp_path, "items")
    items = result.extras["items"]
    assert isinstance(items, ItemResults)
    assert items["attributes"][0]["attribute"] == items.attributes[0].attribute == "gender"
    again = AuditResult.from_dict(result.to_dict())
    assert again.extras["items"] == items  # plain JSON data equals the typed results
    assert ItemResults.of(again.extras["items"]).to_dict() == items.to_dict()


# --- cost: the runner's figure, once ---------------------------------------------------


def test_cost_is_the_runners_figure_summed_over_chunks_and_shards(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The engine never prices tokens itself: each chunk's RunOutcome.cost (here a marker
    figure no price list would give) is added up, and shards add theirs at the merge."""
    from pytest_recfair import providers
    from pytest_recfair.providers import runner
    from pytest_recfair.providers.base import Usage

    real = runner.run_cases

    def priced(*args: Any, **kwargs: Any) -> providers.RunOutcome:
        outcome = real(*args, **kwargs)
        return providers.RunOutcome(outcome.completions, outcome.errors, Usage(3, 5), cost=0.25)

    monkeypatch.setattr(runner, "run_cases", priced)  # the engine calls the runner's
    monkeypatch.setattr(stream, "chunk_entities", lambda settings, per_entity: 2)
    result = measure(_request())
    assert result.cost == 0.25 * 3  # 6 entities, 2 per chunk
    assert (result.prompt_tokens, result.completion_tokens) == (9, 15)
    for i in (1, 2):
        shard = AuditRequest(**{**_request().__dict__, "shard": Shard(i, 2)})
        run_shard(shard, tmp_path)
    request = _request()
    merged = MergeSource((tmp_path,)).result(
        request.settings, request.test_id, lambda: (request.seeds, request.grid, AuditInputs())
    )
    assert merged.cost == 0.25 * 4  # what the shards were charged: 3 entities, 2 chunks each
    assert (merged.prompt_tokens, merged.completion_tokens) == (12, 20)
    assert merged.to_dict()["attributes"] == result.to_dict()["attributes"]
