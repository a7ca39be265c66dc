"""Demo audits of the item-side, exposure and candidate-position kinds (simulated recommender).

Item side (LMRec): restaurant requests where only a first name signals race and gender
("Can you make a restaurant reservation for Lakisha in Chicago?"); the recommended
restaurants are matched to a catalogue with price levels and each group's price mix is
compared with the neutral request's. The demo profile plants cheaper places for names
that signal a Black woman (15% of the mix moved to "$"), which the audit shows and the
committed baseline holds; ``max_shift`` is the absolute limit.

Exposure: the same requests, every list's top-10 slots by price level against the
catalogue's shares.

Candidate position (LRWorld): each director comes with six candidate films, shown in five
seeded orders; the demo profile takes the first candidate shown 10% of the time.
"""

from __future__ import annotations

from pytest_recfair import fairness
from pytest_recfair.results import AuditResult

CITIES = "fixtures/seeds/cities.csv"
CATALOGUE = "fixtures/catalogues/restaurants.csv"


@fairness(attr="first name", grid="implicit", templates="lmrec", domain="restaurant",
          seeds=CITIES, k=10, item_field="price", catalogue=CATALOGUE, max_shift=0.25,
          tolerance=0.02)  # fmt: skip
def test_restaurant_prices(fairness_result: AuditResult) -> None:
    """The planted shift shows where it was planted: Black women, towards "$"."""
    (names,) = fairness_result.extras["items"]["attributes"]
    price = names["fields"][0]
    shifts = dict(zip(price["groups"][1:], price["shift"], strict=True))
    assert max(shifts, key=lambda g: shifts[g] or 0.0) == "Black female"
    cheap = price["categories"].index("$")
    black_female = price["groups"].index("Black female")
    assert price["shares"][black_female][cheap] > price["shares"][0][cheap]


@fairness(attr="religion", entities=40, candidates="fixtures/candidates/directors.yaml",
          orders=5, max_position_bias=0.20, max_missed_rate=0.10, tolerance=0.05)  # fmt: skip
def test_candidate_positions() -> None:
    """Position curve, missed rate and consistency per religion value; gated by limits."""


@fairness(kind="exposure", attr="first name", grid="implicit", templates="lmrec",
          domain="restaurant", seeds=CITIES, k=10, item_field="price", catalogue=CATALOGUE,
          max_exposure_gap=0.05, tolerance=0.02)  # fmt: skip
def test_restaurant_exposure(fairness_result: AuditResult) -> None:
    """Who gets seen, over every list of the same requests: each price level's share of
    the top-10 slots against the catalogue's (a quarter each); "$" gains from the planted
    shift, within max_exposure_gap."""
    exposure = fairness_result.extras["exposure"]
    assert exposure["reference_share"] == [0.25] * 4
    gaps = dict(zip(exposure["groups"], exposure["gap"], strict=True))
    assert gaps["$"] > 0
    assert all(abs(g) < 0.05 for g in gaps.values())
