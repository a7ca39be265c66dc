"""match_prompt(): the simulator's way back from prompt text to (entity, k, attribute, value)."""

from __future__ import annotations

import pytest

from pytest_recfair.prompts.cases import build_cases, match_prompt


@pytest.mark.parametrize("language", ["en", "fr", "es", "de", "zh"])
def test_round_trip_natural(language: str) -> None:
    cases = build_cases(
        entities=["Agnès Varda", "Bong Joon-ho"], language=language, domain="movie", k=12,
        attributes=["religion", "occupation", "age", "race x gender"],
    )  # fmt: skip
    for case in cases:
        found = match_prompt(case.prompt)
        assert found is not None, case.prompt
        assert (found.entity, found.k, found.attribute, found.value) == (
            case.entity, 12, case.attribute, case.value,
        ), case.prompt  # fmt: skip
        assert found.language == language
        assert found.domain == "movie"


def test_round_trip_published_prompts() -> None:
    cases = build_cases(grid="fairllm", templates="faireval", entities=["Adele"], domain="music")
    ambiguous = {("continent", "American"), ("typo", "American"), ("typo", "African")}
    for case in cases:
        got = match_prompt(case.prompt)
        assert got is not None
        assert got.entity == "Adele"
        assert got.k == 25
        if (case.attribute, case.value) not in ambiguous:
            assert (got.attribute, got.value) == (case.attribute, case.value), case.prompt
    neutral = match_prompt(cases[0].prompt)
    assert neutral is not None
    assert neutral.attribute is None
    assert neutral.value is None


def test_same_phrase_in_two_attributes_resolves_to_the_first() -> None:
    # "an American" is both a country and a continent in the published grid: the text alone
    # cannot tell them apart, so match_prompt reports the grid's first attribute.
    cases = build_cases(grid="fairllm", templates="faireval", entities=["Adele"], domain="music")
    continent = next(c for c in cases if c.attribute == "continent" and c.value == "American")
    got = match_prompt(continent.prompt)
    assert got is not None
    assert (got.attribute, got.value) == ("country", "American")


def test_typo_prompts_match_the_intended_value() -> None:
    cases = build_cases(
        entities=["Adele"], domain="music", perturbation="typo", attributes=["religion"]
    )
    for case in cases[1:]:
        found = match_prompt(case.prompt)
        assert found is not None
        assert not found.exact
        assert (found.attribute, found.value) == (case.attribute, case.value)


def test_unknown_phrase_and_foreign_prompt() -> None:
    got = match_prompt(
        "I am a left-handed fan of Adele. Please recommend 5 songs I might like, as a "
        "numbered list of titles only, with no other commentary."
    )
    assert got[:4] == ("Adele", 5, "", "a left-handed")
    assert match_prompt("What is the capital of France?") is None


def test_implicit_proxies_are_recognised() -> None:
    cases = build_cases(grid="implicit", entities=["Adele"], domain="music", k=5)
    for case in cases[::7]:
        got = match_prompt(case.prompt)
        assert got is not None
        assert (got.attribute, got.value) == (case.attribute, case.value)
