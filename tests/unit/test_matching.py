"""Unit tests for pytest_recfair.replies.matching: normalisation, merge and do-not-merge pairs."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_recfair.errors import ConfigError
from pytest_recfair.replies.matching import (
    DEFAULT_THRESHOLD,
    MAX_FUZZY_LENGTH,
    Merge,
    canonicalize,
    normalize,
)

# --------------------------------------------------------------------------------------
# normalize


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Amelie", "Amélie"),
        ("AMÉLIE", "amélie"),
        ("Harry Potter and the Sorcerer's Stone", "Harry Potter & the Sorcerer’s Stone"),
        (
            "The Lord of the Rings: The Fellowship of the Ring",
            "Lord of the Rings - The Fellowship of the Ring",
        ),
        ("Rocky II", "Rocky 2"),
        ("The Godfather Part II", "The Godfather: Part 2"),
        ("Star Wars: Episode I", "Star Wars Episode 1"),
        ("Les Misérables", "Les Miserables"),
        ("Le Fabuleux Destin d'Amélie Poulain", "Fabuleux Destin d’Amelie Poulain"),
        ("L'Avventura", "Avventura"),
        ("El Laberinto del Fauno", "Laberinto del Fauno"),
        ("Das Boot", "Boot"),
        ("Spider‐Man – Homecoming", "Spider-Man - Homecoming"),
        ("Ｆｕｌｌ Ｗｉｄｔｈ", "Full Width"),
        ("Inception (2010)", "Inception"),
        ("STRASSE", "Straße"),
    ],
)
def test_normalize_equal(a: str, b: str) -> None:
    assert normalize(a) == normalize(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Toy Story 2", "Toy Story 3"),
        ("Rocky", "Rocky II"),
        ("Rocky II", "Rocky IV"),
        ("Halloween", "Halloween II"),
        ("Alien", "Aliens"),
        ("Ocean's Eleven", "Ocean's 11"),
        ("Die Hard", "Hard"),  # German "die" is not dropped: it is an English word
        ("I, Robot", "Robot"),  # nor Italian "i"
        ("Malcolm X", "Malcolm 10"),  # single-letter numerals stay letters
        ("1917", "1918"),
        ("千と千尋の神隠し", "千と千尋の神隠シ"),
        ("ガ", "カ"),  # combining marks outside Latin are kept
    ],
)
def test_normalize_distinct(a: str, b: str) -> None:
    assert normalize(a) != normalize(b)


def test_normalize_keeps_sequel_numbers_and_numerals() -> None:
    assert normalize("Rocky IV").split()[-1] == "4"
    assert normalize("Star Wars: Episode VI") == "star wars episode 6"
    assert normalize("Toy Story 3") == "toy story 3"
    assert normalize("A") == "a"  # a lone article is the title
    assert normalize("!!!") == "!!!"  # punctuation-only stays distinct from ""


def test_normalize_rejects_non_str() -> None:
    with pytest.raises(TypeError, match="title: expected str, got NoneType"):
        normalize(None)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_normalize_key_shape(title: str) -> None:
    key = normalize(title)
    assert key == " ".join(key.split())  # no stray or doubled whitespace
    assert bool(key) == bool(title.strip())  # only blank titles give an empty key
    assert normalize(title.upper()) == normalize(title.lower()) or not title.isascii()


# --------------------------------------------------------------------------------------
# canonicalize: must not merge


DO_NOT_MERGE = [
    ("Alien", "Aliens"),
    ("Toy Story 2", "Toy Story 3"),
    ("Halloween", "Halloween II"),
    ("Rocky", "Rocky II"),
    ("Rocky II", "Rocky IV"),
    ("Rocky", "Rocky IV"),
    ("Saw", "Saw II"),
    ("Se7en", "Seven"),
    ("Before Sunrise", "Before Sunset"),
    ("The Dark Knight", "The Dark Knight Rises"),
    ("Heat", "Beat"),
    ("Cars", "Car"),
    ("The Hangover", "The Hangover Part II"),
    ("Kill Bill: Vol. 1", "Kill Bill: Vol. 2"),
    ("Star Wars: Episode V", "Star Wars: Episode VI"),
    ("Yesterday", "Yesterdays"),
    ("Three Colors: Red", "Three Colors: Blue"),
]


@pytest.mark.parametrize(("a", "b"), DO_NOT_MERGE)
def test_do_not_merge(a: str, b: str) -> None:
    lists, merges = canonicalize([[a, "Heat"], [b, "Heat"]], entity="e1")
    assert lists[0][0] != lists[1][0]
    assert merges == []


def test_do_not_merge_all_together() -> None:
    titles = [t for pair in DO_NOT_MERGE for t in pair]
    lists, merges = canonicalize([titles, list(reversed(titles))])
    assert len(set(lists[0])) == len({normalize(t) for t in titles})
    assert merges == []


# --------------------------------------------------------------------------------------
# canonicalize: should merge


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "The Lord of the Rings: The Fellowship of the Ring",
            "Lord of the Rings - The Fellowship of the Ring",
        ),
        ("Amelie", "Amélie"),
        ("Harry Potter and the Sorcerer's Stone", "Harry Potter & the Sorcerer's Stone"),
    ],
)
def test_should_merge_by_normalisation(a: str, b: str) -> None:
    lists, merges = canonicalize([[a], [b]], fuzzy=False)
    assert lists[0] == lists[1]
    assert merges == []  # exact after normalize: nothing to review


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Spider-Man: No Way Home", "Spiderman: No Way Home"),
        ("The Shawshank Redemption", "The Shawshank Redemtion"),
        ("Eternal Sunshine of the Spotless Mind", "Eternal Sunshine of a Spotless Mind"),
    ],
)
def test_fuzzy_merge_is_reported(a: str, b: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="pytest_recfair.replies.matching"):
        lists, merges = canonicalize([[a, "Heat"], [a], [b]], entity="Nolan")
    assert lists[2][0] == lists[0][0] == normalize(a)
    assert len(merges) == 1
    merge = merges[0]
    assert (merge.entity, merge.kept, merge.merged) == ("Nolan", a, b)
    assert DEFAULT_THRESHOLD <= merge.score < 100
    assert b in caplog.text


def test_fuzzy_off_only_normalises() -> None:
    a, b = "Spider-Man: No Way Home", "Spiderman: No Way Home"
    lists, merges = canonicalize([[a], [b]], fuzzy=False)
    assert lists == [[normalize(a)], [normalize(b)]]
    assert merges == []


def test_most_frequent_spelling_is_kept() -> None:
    rare, common = "The Shawshank Redemtion", "The Shawshank Redemption"
    lists, merges = canonicalize([[rare], [common], [common]])
    assert lists == [[normalize(common)]] * 3
    assert merges == [Merge(None, common, rare, merges[0].score)]


def test_threshold_controls_merging() -> None:
    a, b = "Before Sunrise", "Before Sunset"
    strict, _ = canonicalize([[a], [b]])
    loose, merges = canonicalize([[a], [b]], threshold=80)
    assert strict[0] != strict[1]
    assert loose[0] == loose[1]
    assert len(merges) == 1
    none, _ = canonicalize([[a], [b]], threshold=100)
    assert none[0] != none[1]


def test_shapes_and_order_are_kept() -> None:
    lists = [["B Movie", "A Movie", "A Movie"], [], ["C Movie"]]
    out, _ = canonicalize(lists)
    assert [len(x) for x in out] == [3, 0, 1]
    assert out[0] == [normalize("B Movie"), normalize("A Movie"), normalize("A Movie")]


def test_aliases() -> None:
    lists, merges = canonicalize([["Se7en"], ["Seven"]], aliases={"Se7en": "Seven"})
    assert lists[0] == lists[1] == [normalize("Seven")]
    assert merges == []


def test_no_chained_merges() -> None:
    # every merged key points at a kept key, never at another merged one
    titles = ["Spider-Man: No Way Home", "Spiderman: No Way Home", "Spiderman No Way Hom"]
    lists, merges = canonicalize([titles, titles[:1]])
    kept = {m.kept for m in merges}
    merged = {m.merged for m in merges}
    assert not kept & merged
    assert len(set(lists[0])) == 1


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(["Alien", "Aliens", "Rocky", "Rocky II", "Toy Story 2"]))
        | st.lists(st.text(max_size=15), max_size=5),
        max_size=5,
    )
)
def test_canonicalize_properties(lists: list[list[str]]) -> None:
    out, merges = canonicalize(lists)
    assert [len(x) for x in out] == [len(x) for x in lists]
    plain, _ = canonicalize(lists, fuzzy=False)
    assert {m.merged for m in merges} <= {t for lst in lists for t in lst}
    # fuzzy merging only ever joins keys, so it never creates new distinct keys
    assert len({k for row in out for k in row}) <= len({k for row in plain for k in row})


# --------------------------------------------------------------------------------------
# argument errors


def test_bad_lists() -> None:
    with pytest.raises(TypeError, match="lists: expected a sequence of title lists"):
        canonicalize("Alien")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"lists\[1\]: expected a list of titles, got str"):
        canonicalize([["Alien"], "Aliens"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"lists\[0\]\[1\]: expected a title str, got int"):
        canonicalize([["Alien", 3]])  # type: ignore[list-item]


@pytest.mark.parametrize("threshold", [-1, 100.5, float("nan")])
def test_bad_threshold(threshold: float) -> None:
    with pytest.raises(ConfigError, match="threshold: expected a rapidfuzz ratio"):
        canonicalize([["Alien"]], threshold=threshold)


def test_very_long_keys_are_matched_exactly() -> None:
    long_a = "word " * (MAX_FUZZY_LENGTH // 5) + "alpha"
    long_b = "word " * (MAX_FUZZY_LENGTH // 5) + "alphb"
    lists, merges = canonicalize([[long_a], [long_b], [long_a]])
    assert lists[0] == lists[2] != lists[1]
    assert merges == []
    short_a, short_b = "The Shawshank Redemption", "The Shawshank Redemtion"
    _, merges = canonicalize([[short_a], [short_b]])
    assert len(merges) == 1  # the same edit on a title-length key does merge
