"""The item-side audit scored from prompt cases and parsed replies."""

from __future__ import annotations

import json
import random

import pytest

from pytest_recfair.engine.items import ItemSideResult, item_failures, score_items
from pytest_recfair.errors import DataError
from pytest_recfair.prompts.cases import build_cases
from pytest_recfair.replies.catalogue import catalogue_from_records

CITIES = [f"City {i}" for i in range(60)]
CHEAP = [f"Diner {i}" for i in range(40)]
DEAR = [f"Bistro {i}" for i in range(40)]
CATALOGUE = catalogue_from_records(
    [{"title": t, "price": "$"} for t in CHEAP] + [{"title": t, "price": "$$$"} for t in DEAR]
)


def _replies(cases, planted: float, seed: int = 0):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    share = {c: rng.uniform(0.3, 0.7) for c in CITIES}  # each city its own price mix
    out = []
    for case in cases:
        p = share[case.entity] + (planted if case.group == "Black female" else 0.0)
        titles = [rng.choice(CHEAP) if rng.random() < p else rng.choice(DEAR) for _ in range(8)]
        titles[0] = "Somewhere Unknown"  # not in the catalogue: coverage < 1
        out.append(titles)
    return out


def _cases():  # type: ignore[no-untyped-def]
    return build_cases(
        "implicit", "lmrec", CITIES, domain="restaurant", k=8, attributes=["first name"]
    )


def test_values_pool_into_groups_and_a_planted_shift_fails_the_limit() -> None:
    cases = _cases()
    result = score_items(
        cases, _replies(cases, 0.3), CATALOGUE, ["price"], attribute="first name",
        n_permutations=199, n_resamples=100,
    )  # fmt: skip
    price = result.field("price")
    assert price.groups == ("(neutral)", "White female", "White male", "Black female", "Black male")
    assert price.most_shifted == "Black female"
    assert result.coverage.share == pytest.approx(7 / 8)
    assert result.coverage.unmatched_examples == ("Somewhere Unknown",)
    fails = item_failures(result, None, max_shift=0.1, tolerance=0.02, alpha=0.05)
    assert [(f.group, f.limit, f.baseline) for f in fails] == [("Black female", 0.1, None)]
    assert fails[0].detail is not None
    assert "Black female shifts" in fails[0].detail
    assert "> max_shift 0.1" in fails[0].detail


def test_no_planted_shift_passes_and_baseline_round_trips() -> None:
    cases = _cases()
    fair = score_items(
        cases, _replies(cases, 0.0), CATALOGUE, ["price"], attribute="first name",
        n_permutations=199, n_resamples=100,
    )  # fmt: skip
    assert item_failures(fair, None, max_shift=0.1, tolerance=0.02, alpha=0.05) == []
    again = ItemSideResult.from_dict(json.loads(json.dumps(fair.to_dict())))
    assert again.to_dict() == fair.to_dict()
    shifted = score_items(
        cases, _replies(cases, 0.3, seed=1), CATALOGUE, ["price"], attribute="first name",
        n_permutations=99, n_resamples=100,
    )  # fmt: skip
    drift = item_failures(shifted, again, max_shift=None, tolerance=0.02, alpha=0.05)
    assert [(f.limit, f.baseline is not None) for f in drift] == [(0.02, True)]
    assert "rose by more than the tolerance" in str(drift[0].detail)
    assert item_failures(again, again, max_shift=None, tolerance=0.02, alpha=0.05) == []


def test_a_catalogue_of_another_domain_is_a_clear_error() -> None:
    cases = _cases()[:5]
    with pytest.raises(DataError, match="none of 40 recommended titles matched"):
        score_items(cases, [["Alien"] * 8] * 5, CATALOGUE, ["price"], attribute="first name")
