"""Typo perturbation: deterministic, seeded, and confined to the attribute words."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_recfair.errors import ConfigError
from pytest_recfair.prompts.cases import build_cases
from pytest_recfair.prompts.languages import NEIGHBOURS, Typo, apply_typos, parse_perturbation


def test_parse_specs() -> None:
    assert parse_perturbation(None) is None
    assert parse_perturbation("none") is None
    assert parse_perturbation("typo") == Typo()
    assert parse_perturbation("typo:3") == Typo(edits=3)
    assert parse_perturbation("typo:swap+drop") == Typo(kinds=("swap", "drop"))
    assert parse_perturbation("typo:2:neighbour").spec == "typo:2:neighbour"
    assert Typo().spec == "typo"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("synonym", "not understood"),
        ("typo:0", "must be >= 1"),
        ("typo:swap+flip", r"unknown typo kind\(s\) \['flip'\]"),
        ("typo:1:2:3", "not understood"),
    ],
)
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_perturbation(spec)


def test_neighbours_follow_the_keyboard() -> None:
    assert set(NEIGHBOURS["g"]) == set("fhtyvb")
    assert set(NEIGHBOURS["a"]) == set("qwsz")


def _strip(prompt: str, phrase: str) -> str:
    return prompt.replace(phrase, "<V>", 1)


def test_typos_only_touch_attribute_words() -> None:
    clean = build_cases(grid="fairllm", templates="faireval", entities=["Adele"], domain="music")
    noisy = build_cases(
        grid="fairllm", templates="faireval", entities=["Adele"], domain="music",
        perturbation="typo:2",
    )  # fmt: skip
    for c, n in zip(clean, noisy, strict=True):
        if c.neutral:
            assert n.prompt == c.prompt
            continue
        assert n.prompt != c.prompt
        head = "I am "
        tail = " fan of Adele. Please provide me"
        assert n.prompt.startswith(head)
        assert tail in n.prompt
        assert n.prompt.split(tail)[1] == c.prompt.split(tail)[1]
        # The article stays: only value words are edited.
        clean_value = c.prompt[len(head) : c.prompt.index(tail)]
        noisy_value = n.prompt[len(head) : n.prompt.index(tail)]
        if clean_value.startswith(("a ", "an ")):
            assert noisy_value.split(" ", 1)[0] == clean_value.split(" ", 1)[0]


def test_typos_are_deterministic_and_seeded() -> None:
    kwargs = {"entities": ["Adele", "Björk"], "domain": "music", "perturbation": "typo"}
    a = build_cases(**kwargs, seed=1)
    b = build_cases(**kwargs, seed=1)
    c = build_cases(**kwargs, seed=2)
    assert [x.prompt for x in a] == [x.prompt for x in b]
    assert [x.prompt for x in a] != [x.prompt for x in c]
    assert all(x.perturbation == "typo" for x in a)


def test_multilingual_typos_spare_helper_nouns() -> None:
    cases = build_cases(
        entities=["Adele"], domain="music", language="fr", perturbation="typo:3",
        attributes=["religion"],
    )  # fmt: skip
    for case in cases[1:]:
        assert case.prompt.startswith("En tant que personne ")
        assert "je suis fan d'Adele." in case.prompt


def test_each_kind_edits_as_named() -> None:
    word = "Buddhist"
    swap = apply_typos(word, [word], Typo(kinds=("swap",)), random.Random(0))
    assert sorted(swap) == sorted(word)
    assert swap != word
    drop = apply_typos(word, [word], Typo(kinds=("drop",)), random.Random(0))
    assert len(drop) == len(word) - 1
    insert = apply_typos(word, [word], Typo(kinds=("insert",)), random.Random(0))
    assert len(insert) == len(word) + 1
    near = apply_typos(word, [word], Typo(kinds=("neighbour",)), random.Random(0))
    diff = [(x, y) for x, y in zip(word, near, strict=True) if x != y]
    assert len(diff) == 1
    assert diff[0][1].lower() in NEIGHBOURS[diff[0][0].lower()]


@given(
    word=st.text(alphabet="abcdefghijklmnopqrstuvwxyzAEIOU", min_size=3, max_size=12),
    seed=st.integers(0, 2**32),
    edits=st.integers(1, 3),
)
def test_typos_change_only_the_target(word: str, seed: int, edits: int) -> None:
    text = f"<< {word} >>"
    out = apply_typos(text, [word], Typo(edits=edits), random.Random(seed))
    assert out.startswith("<< ")
    assert out.endswith(" >>")
    assert out != text or len(set(word)) == 1
    assert out == apply_typos(text, [word], Typo(edits=edits), random.Random(seed))
