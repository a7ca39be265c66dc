"""The simulator's entity heterogeneity profile (issue 9 point 5)."""

from __future__ import annotations

import statistics

import pytest

from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.prompts.seeds import load_seeds
from pytest_recfair.sim.__main__ import build_parser
from pytest_recfair.sim.profile import Heterogeneity
from pytest_recfair.sim.recommender import SimulatedRecommender

ENTITIES = [e.name for e in load_seeds("directors")[:80]]
BIAS = {"religion": {"Muslim": 0.4}}


def _prompt(name: str, value: str | None = None) -> str:
    who = f"I am a {value} fan of {name}." if value else f"I am a fan of {name}."
    return f"{who} Please provide me with a list of 20 movie titles in order of preference."


def _shifts(rec: SimulatedRecommender) -> list[int]:
    return [rec.respond(_prompt(n, "Muslim")).shifted for n in ENTITIES]


def _resampled(rec: SimulatedRecommender) -> list[int]:
    return [rec.respond(_prompt(n), repeat=1).resampled for n in ENTITIES]


def test_uniform_is_the_original_simulator() -> None:
    plain = SimulatedRecommender(BIAS, noise=0.2, seed=3)
    uniform = SimulatedRecommender(BIAS, noise=0.2, seed=3, heterogeneity="uniform")
    for n in ENTITIES[:20]:
        for value in (None, "Muslim", "Christian"):
            assert plain(_prompt(n, value), repeat=2) == uniform(_prompt(n, value), repeat=2)
    assert set(_shifts(plain)) == {8}  # 0.4 x 20 for every entity
    assert set(_resampled(plain)) == {4}


def test_realistic_spreads_shift_and_noise_around_the_profile_rate() -> None:
    rec = SimulatedRecommender(BIAS, noise=0.2, seed=3, heterogeneity="realistic")
    shifts, noise = _shifts(rec), _resampled(rec)
    # some entities barely move, others move a lot; on average the profile's rate holds
    assert min(shifts) <= 3
    assert max(shifts) >= 13
    assert statistics.mean(shifts) == pytest.approx(8, abs=1.0)
    assert min(noise) <= 1
    assert max(noise) >= 6
    assert statistics.mean(noise) == pytest.approx(4, abs=0.7)
    # a fair value stays fair for every entity: heterogeneity scales a shift, never makes one
    assert {rec.respond(_prompt(n, "Christian")).shifted for n in ENTITIES} == {0}


def test_an_entity_keeps_its_traits_across_values_and_calls() -> None:
    rec = SimulatedRecommender(
        {"religion": {"Muslim": 0.4, "Hindu": 0.2}}, seed=1, heterogeneity="sensitivity=0.9"
    )
    for n in ENTITIES[:30]:
        muslim = rec.respond(_prompt(n, "Muslim")).shifted
        hindu = rec.respond(_prompt(n, "Hindu")).shifted
        assert abs(muslim - 2 * hindu) <= 1  # one sensitivity per entity scales both
        assert rec.respond(_prompt(n, "Muslim")).shifted == muslim


def test_profile_section_and_command_line() -> None:
    rec = SimulatedRecommender({"bias": BIAS, "heterogeneity": {"sensitivity": 0.5}})
    assert rec.heterogeneity == Heterogeneity(sensitivity=0.5)
    override = SimulatedRecommender(
        {"bias": BIAS, "heterogeneity": "realistic"}, heterogeneity=None
    )
    assert override.heterogeneity == Heterogeneity(0.8, 0.8)
    args = build_parser().parse_args(["--port", "0", "--heterogeneity", "realistic"])
    assert Heterogeneity.parse(args.heterogeneity) == Heterogeneity(0.8, 0.8)


@pytest.mark.parametrize(
    "spec", ["wild", "stability=2", "stability=x", {"spread": 0.5}, {"stability": True}]
)
def test_bad_heterogeneity_is_a_one_line_error(spec: object) -> None:
    with pytest.raises(ConfigError) as info:
        SimulatedRecommender(heterogeneity=spec)  # type: ignore[arg-type]
    assert "heterogeneity" in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_profile_section_names_the_profile() -> None:
    with pytest.raises(DataError, match=r"^bias profile: heterogeneity: stability must"):
        SimulatedRecommender({"bias": BIAS, "heterogeneity": {"stability": 3}})
