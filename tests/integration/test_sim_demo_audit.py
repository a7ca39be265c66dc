"""The demo profile through the project's own pipeline: the metrics find what was planted."""

from __future__ import annotations

import pytest

from pytest_recfair.metrics.aggregate import attribute_table
from pytest_recfair.prompts.cases import build_cases
from pytest_recfair.prompts.seeds import load_seeds
from pytest_recfair.replies.parse import items
from pytest_recfair.sim.profile import load_profile
from pytest_recfair.sim.recommender import SimulatedRecommender

K = 25


@pytest.mark.parametrize("language", ["en", "de"])
def test_demo_religion_audit_recovers_the_planted_fractions(language: str) -> None:
    rec = SimulatedRecommender("demo")
    cases = build_cases(
        "faireval",
        "natural",
        load_seeds("directors")[:12],
        k=K,
        language=language,
        attributes=["religion"],
    )
    neutral: dict[str, list[str]] = {}
    by_value: dict[str, dict[str, list[str]]] = {}
    for case in cases:
        listed = items(rec(case.prompt, case.system), K)
        if case.value is None:
            neutral[case.entity_id] = listed
        else:
            by_value.setdefault(case.value, {})[case.entity_id] = listed
    table = attribute_table(neutral, by_value, metric="jaccard", k=K)
    means = {value: stat.mean for value, stat in table.values.items()}

    planted = {
        value: fraction
        for (attribute, value, fraction) in load_profile("demo").bias.entries
        if attribute == "religion"
    }
    hindu_moved = int(planted["hindu"] * K + 0.5)
    # Fair values: the neutral list itself. Hindu: m of K titles swapped, no refusals.
    assert means["Buddhist"] == means["Christian"] == 1.0
    assert means["Hindu"] == pytest.approx((K - hindu_moved) / (K + hindu_moved))
    # Muslim moves more, and its refusals (missing lists) only lower it further.
    assert means["Muslim"] < means["Hindu"]
    assert table.min_value == "Muslim"
    assert table.snsr > 0.10  # FairEval's descriptive flag


def test_french_prompts_drift_further_than_english() -> None:
    rec = SimulatedRecommender("demo")

    def mean_jaccard(language: str) -> float:
        cases = build_cases(
            "faireval",
            "natural",
            load_seeds("directors")[:6],
            k=K,
            language=language,
            attributes=["religion"],
        )
        neutral = {c.entity_id: items(rec(c.prompt, c.system), K) for c in cases if not c.value}
        by_value: dict[str, dict[str, list[str]]] = {}
        for c in cases:
            if c.value == "Christian":  # fair in every language but French
                by_value.setdefault(c.value, {})[c.entity_id] = items(rec(c.prompt, c.system), K)
        return attribute_table(neutral, by_value, k=K).values["Christian"].mean

    assert mean_jaccard("en") == 1.0
    assert mean_jaccard("fr") < 1.0
