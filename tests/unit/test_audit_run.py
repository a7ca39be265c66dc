"""audit: run_audit end to end with the in-process sim, judge, and the run collector."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.engine import registry
from pytest_recfair.engine.base import AuditKind, AuditRequest
from pytest_recfair.engine.overlap.kind import OVERLAP
from pytest_recfair.engine.stream import measure
from pytest_recfair.engine.verdict import (
    BaselineState,
    RunCollector,
    TestRecord,
    check_baseline,
    gate_outcome,
    judge,
    load_baseline,
    run_audit,
    write_baseline,
)
from pytest_recfair.errors import DataError, ProviderError
from pytest_recfair.prompts.grids import load_grid
from pytest_recfair.prompts.seeds import load_seeds
from pytest_recfair.report import sections as junit
from pytest_recfair.report.failures import failure_text, verdict_message
from pytest_recfair.report.registry import summary_lines, write_report
from pytest_recfair.results import AuditResult
from pytest_recfair.settings import AuditSettings, resolve
from pytest_recfair.sim.recommender import SimulatedRecommender

SEEDS = load_seeds("directors")
GRID = load_grid("faireval")
BIASED = SimulatedRecommender(bias={"religion": {"Muslim": 0.5}})


def _settings(**marker: object) -> AuditSettings:
    base: dict[str, object] = {"entities": 6, "attr": "religion"}
    return resolve(marker=base | marker, ini={"recfair_n_resamples": "50"})


def _audit(
    settings: AuditSettings, recommender: object = BIASED, baseline: AuditResult | None = None
) -> AuditResult:
    return run_audit(AuditRequest(settings, recommender, SEEDS, GRID, "t::x"), baseline)


def _measure(settings: AuditSettings, recommender: object = BIASED) -> AuditResult:
    return measure(AuditRequest(settings, recommender, SEEDS, GRID, "t::x"))


def test_planted_bias_is_found() -> None:
    result = _audit(_settings())
    religion = result.attribute("religion")
    assert religion.least_favoured == "Muslim"
    assert religion.snsr.value > 0.3
    assert religion.snsr.ci is not None
    assert religion.snsr.ci.low > 0
    assert [v.value for v in religion.values] == ["Buddhist", "Christian", "Hindu", "Muslim"]
    assert all(v.n == 6 and v.total == 6 for v in religion.values)
    assert result.meta.n_entities == 6
    assert result.meta.k == 25
    assert result.gate is not None
    assert result.gate.passed


def test_deterministic() -> None:
    assert _audit(_settings()).to_dict() == _audit(_settings()).to_dict()


def test_several_metrics_are_suffixed() -> None:
    result = _audit(_settings(metric="all"))
    names = [a.attribute for a in result.attributes]
    assert names == ["religion.jaccard", "religion.serp", "religion.prag"]
    assert result.meta.metric == "jaccard,serp,prag"
    assert {a.metric for a in result.attributes} == {"jaccard", "serp", "prag"}


def test_personality_comes_from_its_grid() -> None:
    result = _audit(_settings(attr="personality"))
    (attr,) = result.attributes
    assert attr.attribute == "personality"
    assert len(attr.values) == 10
    assert result.meta.grid == "personality"


def test_unknown_attribute_lists_allowed() -> None:
    with pytest.raises(DataError, match=r"no such attribute.*religion.*'race x gender'"):
        _audit(_settings(attr="hair colour"))


def test_every_prompt_failing_is_a_provider_error() -> None:
    def broken(prompt: str) -> str:
        raise RuntimeError("model offline")

    with pytest.raises(
        ProviderError, match=r"30 of 30 prompts .*got no valid response.*model offline"
    ):
        _audit(_settings(entities=6), broken)


def test_thresholds_reach_the_gate() -> None:
    result = _audit(_settings(max_snsr=0.05))
    assert result.gate is not None
    assert not result.gate.passed
    assert {f.statistic for f in result.gate.failures} == {"snsr"}


def _judge(settings: AuditSettings, result: AuditResult, state: BaselineState) -> Any:
    comparison = check_baseline(settings, result, state)
    gate = gate_outcome(settings, result, comparison.baseline, comparison.problem)
    gated = replace(result, gate=gate)
    return judge(settings, gated, comparison, "t::x")


def test_judge_update_missing_unusable_and_compatible(tmp_path: Path) -> None:
    result = _audit(_settings())
    state = load_baseline(tmp_path, "t::x")
    assert state.result is None
    assert state.problem is None

    missing = _judge(_settings(), result, state)
    assert not missing.passed
    assert "no fairness baseline for t::x" in verdict_message(missing.result)
    assert "pytest --fairness --fairness-update 't::x'" in verdict_message(missing.result)
    assert missing.result.gate is not None
    assert not missing.result.gate.passed
    assert missing.write is None

    update = resolve(marker={"entities": 6, "attr": "religion"}, cli={"fairness_update": True})
    updated = _judge(update, result, state)
    assert updated.passed
    assert updated.write == state.path
    assert not state.path.exists()  # judging is pure: the writer writes
    assert write_baseline(updated) == state.path
    assert state.path.is_file()
    assert write_baseline(missing) is None

    state = load_baseline(tmp_path, "t::x")
    assert state.result is not None
    assert _judge(_settings(), _audit(_settings()), state).passed

    state.path.write_text(state.path.read_text()[:100])
    broken = load_baseline(tmp_path, "t::x")
    assert broken.problem is not None
    verdict = _judge(_settings(), result, broken)
    assert not verdict.passed
    assert "is unusable" in verdict_message(verdict.result)


def test_incompatible_baseline_is_not_compared() -> None:
    baseline = _audit(_settings(entities=6))
    result = _audit(_settings(k=5), baseline=baseline)
    assert result.gate is not None
    assert not result.gate.passed
    (failure,) = [f for f in result.gate.failures if f.kind == "incompatible"]
    assert failure.attribute is None
    assert failure_text(failure).startswith("baseline not compared: ")


def test_collector_and_properties() -> None:
    result = _audit(_settings())
    payload = TestRecord(result, None).payload()
    json.dumps(payload)  # what xdist ships must be plain JSON
    collector = RunCollector()
    collector.add(payload)
    assert collector.ordered()[0].to_dict() == result.to_dict()
    assert any("religion" in line for line in summary_lines(collector))
    props = dict(junit.properties(result))
    assert set(props) >= {"recfair.religion.snsr", "recfair.religion.pafs", "recfair.gate"}
    assert props["recfair.religion.snsr"] == pytest.approx(result.attribute("religion").snsr.value)


def test_collector_keeps_the_baseline_it_compared_against(tmp_path: Path) -> None:
    baseline = _audit(_settings())
    state = BaselineState(tmp_path / "b.json", result=baseline)
    candidate = _measure(_settings(), SimulatedRecommender(bias={"religion": {"Muslim": 0.6}}))
    comparison = check_baseline(_settings(), candidate, state)
    assert comparison.baseline is baseline
    assert comparison.problem is None
    # not compared: under --fairness-update, and against an incompatible baseline
    update = resolve(marker={"entities": 6, "attr": "religion"}, cli={"fairness_update": True})
    assert check_baseline(update, candidate, state).baseline is None
    other = _measure(_settings(k=5))
    incompatible = check_baseline(_settings(k=5), other, state)
    assert incompatible.baseline is None
    assert incompatible.problem is not None

    payload = TestRecord(candidate, comparison.baseline).payload()
    collector = RunCollector()
    collector.add(json.loads(json.dumps(payload)))  # through JSON, as xdist ships it
    assert collector.baselines["t::x"].to_dict() == baseline.to_dict()
    out = tmp_path / "report.html"  # per-value tables of every test, with baseline means
    write_report(out, collector.ordered(), collector.baselines, models=collector.models())
    muslim = baseline.attribute("religion").value("Muslim").mean.value
    row = re.search(r"<tr><td>Muslim</td><td[^>]*>.*?</td><td[^>]*>([^<]*)</td>", out.read_text())
    assert row is not None
    assert row.group(1) == f"{muslim:.3f}"
    # the same test id re-added without a comparison drops the stale baseline
    collector.add(TestRecord(candidate, None).payload())
    assert "t::x" not in collector.baselines


def test_measure_is_not_gated_and_run_audit_gates_the_same_numbers() -> None:
    measured = _measure(_settings())
    assert measured.gate is None
    gated = _audit(_settings())
    assert gated.gate is not None
    assert replace(gated, gate=None).to_dict() == measured.to_dict()


def test_missing_policy_is_part_of_compatibility() -> None:
    zero = _audit(_settings())
    assert zero.meta.missing == "zero"
    skip = _audit(_settings(missing="skip"), baseline=zero)
    assert skip.meta.missing == "skip"
    assert skip.gate is not None
    (failure,) = [f for f in skip.gate.failures if f.kind == "incompatible"]
    text = failure_text(failure)
    assert text.startswith("baseline not compared: ")
    assert "different missing policy" in text
    assert "missing: baseline 'zero', this run 'skip'" in text


def test_parse_style_is_a_setting_that_follows_the_variant_by_default() -> None:
    assert _settings().parse_style == "default"
    assert _settings(variant="fairllm").parse_style == "fairllm"
    assert _settings(variant="fairllm", parse="default").parse_style == "default"
    assert _settings(parse="fairllm").parse_style == "fairllm"
    # spelling parse= out with the style the variant implies changes no number
    implicit = _measure(_settings(variant="fairllm"))
    explicit = _measure(_settings(variant="fairllm", parse="fairllm"))
    assert implicit.to_dict() == explicit.to_dict()
    assert _measure(_settings(parse="default")).to_dict() == _measure(_settings()).to_dict()


def test_the_list_overlap_audit_is_the_default_kind() -> None:
    assert registry.kinds()[-1] is OVERLAP
    assert registry.kind_for(_settings()) is OVERLAP
    kind: AuditKind = OVERLAP  # satisfies the protocol (checked by mypy)
    assert kind.name == "overlap"


def _failing(words: tuple[str, ...], entity: str) -> Any:
    """The biased simulator, raising for prompts about ``entity`` naming one of ``words``."""

    def recommend(prompt: str) -> str:
        if entity in prompt and any(w in prompt for w in words):
            raise RuntimeError("connection reset")
        return str(BIASED(prompt))

    return recommend


def test_a_failed_prompt_leaves_its_value_mean_and_is_never_scored() -> None:
    settings = _settings(entities=6, max_failed=0.1)
    whole = _measure(settings)
    entity = whole.attribute("religion").matrix.entities[0]
    name = next(e.name for e in SEEDS if e.id == entity)
    result = _measure(settings, _failing(("Muslim",), name))
    assert result.failed == {"religion=Muslim": 1}
    assert result.prompts == 30
    muslim = {v.value: v for v in result.attribute("religion").values}["Muslim"]
    assert (muslim.n, muslim.total) == (5, 5)  # left out: not a 0 in the mean
    # every other cell is exactly that of the run without failures
    now, before = result.attribute("religion").matrix, whole.attribute("religion").matrix
    col = now.values.index("Muslim")
    assert now.sims[0][col] != now.sims[0][col]  # NaN: never scored
    assert not now.missing[0][col]  # nor counted as an unusable reply
    keep = [(i, j) for i in range(6) for j in range(len(now.values)) if (i, j) != (0, col)]
    assert [now.sims[i][j] for i, j in keep] == [before.sims[i][j] for i, j in keep]
    assert [now.missing[i][j] for i, j in keep] == [before.missing[i][j] for i, j in keep]


def test_a_failed_neutral_prompt_leaves_the_entity_out_of_every_value() -> None:
    settings = _settings(entities=6, max_failed=0.1)
    entity = _measure(settings).attribute("religion").matrix.entities[0]
    name = next(e.name for e in SEEDS if e.id == entity)
    neutral_only = _failing(("I am a fan of",), name)
    result = _measure(settings, neutral_only)
    assert result.failed == {"neutral": 1}
    matrix = result.attribute("religion").matrix
    assert all(s != s for s in matrix.sims[0])
    assert not any(matrix.missing[0])
    assert all(v.n == 5 for v in result.attribute("religion").values)


def test_more_failures_than_max_failed_allows_is_a_provider_error() -> None:
    entity = _measure(_settings(entities=6)).attribute("religion").matrix.entities[0]
    name = next(e.name for e in SEEDS if e.id == entity)
    with pytest.raises(ProviderError, match=r"2 of 30 prompts.*religion=Muslim 1.*max_failed"):
        _measure(_settings(entities=6, max_failed=0.05), _failing(("Muslim", "Hindu"), name))
