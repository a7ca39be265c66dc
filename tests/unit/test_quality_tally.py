"""Quality counts of the list-overlap kind (issue 23.6): catalogue per entity, shards, gate."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_recfair.engine.overlap import quality as qg
from pytest_recfair.engine.overlap.kind import OverlapSections
from pytest_recfair.engine.overlap.quality import (
    QualityTally,
    merged_quality,
    quality_results,
)
from pytest_recfair.errors import ConfigError
from pytest_recfair.replies.catalogue import catalogue_from_records
from pytest_recfair.report.html_report import table_html
from pytest_recfair.settings import AuditSettings, validate_marker

LAYOUT = {"religion": ["Muslim", "Jewish"]}
K = 4


@dataclass(frozen=True)
class Case:
    entity_id: str
    entity: str
    attribute: str | None
    value: str | None


@dataclass(frozen=True)
class Reply:
    case: Case
    items: list[str] | None
    status: str = "ok"


# Two directors; "Hamlet" is a title both made (one title, two owners).
CATALOGUE = catalogue_from_records(
    [
        {"id": "a1", "title": "Amélie", "entity": "Ann Lee"},
        {"id": "a2", "title": "Harbor Lights", "entity": "Ann Lee"},
        {"id": "a3", "title": "Hamlet", "entity": "Ann Lee"},
        {"id": "b1", "title": "Blue Tide", "entity": "bob-ray"},
        {"id": "b2", "title": "Hamlet", "entity": "Bob Ray"},
    ],
    "films.csv",
)


def _replies(entity: str, name: str, lists: dict[str | None, list[str] | None]) -> list[Reply]:
    out = []
    for value, items in lists.items():
        attr = None if value is None else "religion"
        status = "failed" if items is None else ("ok" if items else "empty")
        out.append(Reply(Case(entity, name, attr, value), items, status))
    return out


def _chunk_a() -> list[Reply]:
    # neutral: 3 of Ann Lee's films (accents and case do not matter) + 1 of Bob's
    return _replies(
        "ann-lee",
        "Ann Lee",
        {
            None: ["Amelie", "harbor lights", "Hamlet", "Blue Tide"],
            "Muslim": ["Invented One", "Hamlet"],
            "Jewish": [],  # empty reply: quality 0
        },
    )


def _chunk_b() -> list[Reply]:
    return _replies(
        "bob-ray",
        "Bob Ray",
        {None: ["Hamlet", "Blue Tide"], "Muslim": None, "Jewish": ["Blue Tide"]},
    )


def _tally(catalogue: Any = CATALOGUE) -> QualityTally:
    return QualityTally.start(["ann-lee", "bob-ray"], LAYOUT, K, catalogue)


def test_counts_titles_of_the_entitys_own_catalogue() -> None:
    t = _tally()
    t.add(_chunk_a())
    t.add(_chunk_b())
    q = quality_results(t, n_resamples=50, seed=0)
    assert q["basis"] == "catalogue"
    assert q["catalogue"] == "films.csv"
    scores = q["scores"]
    assert scores["neutral"] == [3 / K, 2 / K]  # "Blue Tide" is Bob's, "Hamlet" both's
    assert scores["religion=Muslim"] == [1 / K, None]  # Bob's Muslim prompt failed: left out
    assert scores["religion=Jewish"] == [0.0, 1 / K]
    by = {g["group"]: g for g in q["groups"]}
    assert by["neutral"]["quality"] == pytest.approx(5 / 8)
    assert by["neutral"]["length"] == pytest.approx(3.0)
    assert by["religion=Muslim"]["n"] == 1
    (gap,) = q["attributes"]
    assert gap["gap"] == pytest.approx(abs(1 / K - 1 / 8))
    assert q["overall"] == pytest.approx(((3 / K + 1 / K + 0) / 3 + (2 / K + 1 / K) / 2) / 2)


def test_reply_quality_is_the_share_of_the_k_slots() -> None:
    t = QualityTally.start(["e"], LAYOUT, 25)
    t.add(_replies("e", "E", {None: ["x"] * 20, "Muslim": [], "Jewish": ["y"] * 30}))
    # 20 of 25; an empty reply 0; a long list fills at most K slots
    assert t.scores()[0].tolist() == [[pytest.approx(0.8), 0.0, 1.0]]
    with pytest.raises(ConfigError, match=r"k=0 .*expected an integer >= 1"):
        validate_marker((), {"k": 0})


def test_without_catalogue_quality_is_the_valid_item_share() -> None:
    t = _tally(None)
    t.add(_chunk_a())
    t.add(_chunk_b())
    q = quality_results(t, n_resamples=20, seed=0)
    assert q["basis"] == "list"
    assert q["catalogue"] is None
    assert q["scores"]["neutral"] == [1.0, 0.5]


def test_a_catalogue_without_the_entity_column_counts_any_known_title() -> None:
    t = _tally(catalogue_from_records([{"title": "Hamlet"}, {"title": "Blue Tide"}]))
    t.add(_chunk_a())
    t.add(_chunk_b())
    assert quality_results(t, n_resamples=20, seed=0)["scores"]["neutral"] == [0.5, 0.5]


def test_entities_without_catalogue_items_are_left_out() -> None:
    t = QualityTally.start(["ann-lee", "zed"], LAYOUT, K, CATALOGUE)
    t.add(_chunk_a())
    t.add(_replies("zed", "Zed", {None: ["Hamlet"], "Muslim": ["x"], "Jewish": ["y"]}))
    q = quality_results(t, n_resamples=20, seed=0)
    assert q["without_items"] == 1
    assert q["scores"]["neutral"] == [3 / K, None]


def test_shards_merge_to_the_whole_exactly() -> None:
    whole = _tally()
    whole.add(_chunk_a())
    whole.add(_chunk_b())
    parts = []
    for chunk in (_chunk_b(), _chunk_a()):  # order of shards does not matter
        p = _tally()
        p.add(chunk)
        parts.append(QualityTally.from_dict(p.to_dict()))  # through the shard file's JSON form
    merged = None
    for p in parts:
        merged = merged_quality(merged, p)
    assert merged is not None
    assert quality_results(merged, n_resamples=50, seed=0) == quality_results(
        whole, n_resamples=50, seed=0
    )


def _quality(neutral: list[float], muslim: list[float], jewish: list[float]) -> dict[str, Any]:
    t = QualityTally.start([f"e{i}" for i in range(len(neutral))], LAYOUT, 10)
    for i, (n, m, j) in enumerate(zip(neutral, muslim, jewish, strict=True)):
        lists = {None: ["t"] * int(n * 10), "Muslim": ["t"] * int(m * 10)}
        t.add(_replies(f"e{i}", f"E{i}", {**lists, "Jewish": ["t"] * int(j * 10) or []}))
    return quality_results(t, n_resamples=100, seed=0)


def _settings(**kw: Any) -> AuditSettings:
    return dataclasses.replace(AuditSettings(), **kw)


GOOD = _quality([0.9, 0.8, 1.0, 0.9, 0.8, 0.9], [0.9, 0.8, 0.9, 0.9, 0.8, 1.0], [0.8] * 6)
USELESS = _quality([0.1, 0.0, 0.1, 0.0, 0.1, 0.0], [0.0, 0.1, 0.0, 0.1, 0.0, 0.1], [0.1] * 6)


def test_a_good_model_passes_every_quality_check() -> None:
    s = _settings(min_quality=0.5, max_quality_gap=0.2)
    assert qg.quality_failures(s, GOOD, GOOD) == ()


def test_equally_bad_for_everyone_fails_the_minimum_with_one_message() -> None:
    (f,) = qg.quality_failures(_settings(min_quality=0.5), USELESS, None)
    assert f.kind == "min_quality"
    assert f.baseline is None
    assert "every group alike" in (f.detail or "")
    assert "fair but useless" in (f.detail or "")


def test_equally_bad_for_everyone_fails_against_the_baseline() -> None:
    (f,) = qg.quality_failures(_settings(), USELESS, GOOD)
    assert f.kind == "quality_drift"
    assert f.attribute is None
    assert f.baseline is not None
    assert f.value is not None
    assert f.value < f.baseline
    assert f.p_value is not None
    assert f.p_value < 0.05
    assert f.n_paired == 6
    assert "fell for every group alike" in (f.detail or "")
    assert "fair but useless" in (f.detail or "")


def test_one_group_worse_fails_the_gap_and_the_drift_for_that_group() -> None:
    worse = _quality([0.9, 0.8, 1.0, 0.9, 0.8, 0.9], [0.2, 0.3, 0.2, 0.1, 0.2, 0.3], [0.8] * 6)
    fails = qg.quality_failures(_settings(max_quality_gap=0.2, min_quality=0.5), worse, GOOD)
    kinds = sorted(f.kind for f in fails)
    assert kinds == ["max_quality_gap", "min_quality", "quality_drift"]
    drift = next(f for f in fails if f.kind == "quality_drift")
    assert drift.group == "religion=Muslim"
    assert drift.attribute == "religion"
    gap = next(f for f in fails if f.kind == "max_quality_gap")
    assert gap.attribute == "religion"
    assert gap.limit == 0.2
    assert "religion=Jewish" in (gap.detail or "")
    assert "religion=Muslim" in (gap.detail or "")


def test_sections_show_quality_in_every_channel() -> None:
    lines = qg.quality_lines(GOOD)
    assert lines[0].startswith("quality (share of the 10 slots holding a valid list item")
    assert any("Muslim" in ln and "gap" in ln for ln in lines)
    html = table_html(OverlapSections().tables({"quality": GOOD})[0])
    assert "Recommendation quality" in html
    assert "religion=Muslim" in html
    props = dict(qg.quality_properties(GOOD))
    assert props["recfair.quality.basis"] == "list"
    assert props["recfair.quality.neutral"] == pytest.approx(GOOD["groups"][0]["quality"])
    assert "recfair.religion.quality_gap" in props
    assert qg.quality_lines(None) == []
    assert OverlapSections().tables({"quality": None}) == []
