"""The simulator's planted item-side and candidate-position biases."""

from __future__ import annotations

from collections import Counter

import pytest

from pytest_recfair.errors import DataError
from pytest_recfair.prompts.candidates import build_candidate_cases, read_pick
from pytest_recfair.prompts.cases import build_cases
from pytest_recfair.replies.parse import items
from pytest_recfair.sim.planted import _bundled
from pytest_recfair.sim.recommender import SimulatedRecommender

PROFILE = {
    "items": {"catalogue": "restaurants", "field": "price", "shift": {"Black female": {"$": 0.5}}},
    "positions": {"first": 0.4, "missed": 0.0},
}


def _cheap_share(sim: SimulatedRecommender, group: str | None) -> float:
    cat = _bundled("restaurants")
    price = {it.title: it.fields["price"] for it in cat.items}
    cases = build_cases(
        "implicit", "lmrec", [f"City {i}" for i in range(30)], domain="restaurant", k=10,
        attributes=["first name"],
    )  # fmt: skip
    chosen = [c for c in cases if c.group == group] if group else [c for c in cases if c.neutral]
    titles = [t for c in chosen for t in items(sim(c.prompt, c.system))]
    assert all(t in price for t in titles)  # every title is a catalogue item
    return Counter(price[t] for t in titles)["$"] / len(titles)


def test_planted_group_gets_cheaper_restaurants() -> None:
    sim = SimulatedRecommender(bias=PROFILE, seed=3)
    neutral = _cheap_share(sim, None)
    assert 0.15 < neutral < 0.35  # four price levels, entity-specific mixes
    assert _cheap_share(sim, "Black female") > neutral + 0.3
    assert abs(_cheap_share(sim, "White male") - neutral) < 0.06


def test_planted_position_bias_prefers_the_first_candidate() -> None:
    sim = SimulatedRecommender(bias=PROFILE, seed=3)
    films = {f"D{i}": [f"Film {i}-{j}" for j in range(6)] for i in range(40)}
    cases = build_candidate_cases(
        "faireval", list(films), films, orders=5, attributes=["religion"], seed=1
    )
    picks = [read_pick(sim(c.prompt, c.system), c.shown) for c in cases]
    first = sum(1 for p in picks if p == 0) / len(picks)
    assert first == pytest.approx(0.4 + 0.6 / 6, abs=0.05)  # planted + the favourite's share
    fair = SimulatedRecommender(seed=3)
    fair_picks = [read_pick(fair(c.prompt, c.system), c.shown) for c in cases]
    assert sum(1 for p in fair_picks if p == 0) / len(fair_picks) == pytest.approx(1 / 6, abs=0.05)


def test_bad_item_sections() -> None:
    with pytest.raises(DataError, match="'items' must have 'catalogue' and 'field'"):
        SimulatedRecommender(bias={"items": {"field": "price"}})
    with pytest.raises(DataError, match="is not a price"):
        SimulatedRecommender(
            bias={
                "items": {"catalogue": "restaurants", "field": "price", "shift": {"x": {"€": 0.2}}}
            }
        )


def test_bundled_catalogue() -> None:
    cat = _bundled("restaurants")
    assert len(cat.items) == 400
    assert cat.categories("price") == ("$", "$$", "$$$", "$$$$")
    assert "cuisine" in cat.categorical
