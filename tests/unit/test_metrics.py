"""Scalar list metrics: hand-computed values per variant, reference vectors, bad input.

Expected numbers are worked out by hand from /work/shared/reference/metrics.md (the
comment next to each says how), never taken from the code under test.
"""

from __future__ import annotations

import math

import pytest

from pytest_recfair.errors import ConfigError
from pytest_recfair.metrics.aggregate import curves
from pytest_recfair.metrics.lists import jaccard, prag, serp

# --------------------------------------------------------------------------- LangFair


LF_NEUTRAL = ["Love Story", "You Belong with Me"]
LF_SENSITIVE = ["Love Story", "Shake It Off"]


def test_langfair_published_vectors() -> None:
    assert prag(LF_NEUTRAL, LF_SENSITIVE, variant="langfair") == 1 / 6
    assert serp(LF_NEUTRAL, LF_SENSITIVE, variant="langfair") == 0.25
    assert jaccard(LF_NEUTRAL, LF_SENSITIVE) == 1 / 3
    # LangFair's own test asserts this exact float for PRAG
    assert prag(LF_NEUTRAL, LF_SENSITIVE, variant="langfair") == 0.16666666666666666


def test_langfair_single_item_vectors() -> None:
    # len(S) == 1: 1 exactly when S == N as lists
    assert prag(LF_NEUTRAL[:1], LF_SENSITIVE[:1], variant="langfair") == 1.0
    assert prag(LF_NEUTRAL, LF_SENSITIVE[:1], variant="langfair") == 0.0


# --------------------------------------------------------------------------- Jaccard


@pytest.mark.parametrize(
    ("neutral", "sensitive", "k", "expected"),
    [
        (["a", "b", "c"], ["b", "c", "d"], None, 2 / 4),  # {b,c} / {a,b,c,d}
        (["a", "b", "c"], ["b", "c", "d"], 1, 0.0),  # {a} vs {b}
        (["a", "b", "c"], ["b", "c", "d"], 2, 1 / 3),  # {a,b} vs {b,c}
        (["a", "a", "b"], ["a"], None, 1 / 2),  # sets: {a,b} vs {a}
        (["a"], [], None, 0.0),
        ([], [], None, 0.0),  # defined: an empty reply is never a match
        (["a", "b"], ["b", "a"], None, 1.0),
    ],
)
def test_jaccard_hand_values(
    neutral: list[str], sensitive: list[str], k: int | None, expected: float
) -> None:
    for variant in ("normalized", "fairllm", "langfair"):
        assert jaccard(neutral, sensitive, k, variant=variant) == expected


# --------------------------------------------------------------------------- SERP*


@pytest.mark.parametrize(
    ("neutral", "sensitive", "k", "expected"),
    [
        # b: weight len(S)-0+1 = 4, c: 3-1+1 = 3; 7 * 0.5 / ((3+1)*3)
        (["a", "b", "c"], ["b", "c", "d"], None, 7 * 0.5 / 12),
        # k=2: N=[a,b], S=[b,c]: b weight 3; 3 * 0.5 / (3*2)
        (["a", "b", "c"], ["b", "c", "d"], 2, 0.25),
        # a occurs twice in N: counted twice, weight 2 each; 4 * 0.5 / (3*2)
        (["a", "a"], ["a"], None, 1 / 3),
        # unequal lengths, denominator uses len(N) = 1: a at i=1 weighs 2; 2*0.5/(2*1)
        (["a"], ["b", "a"], None, 0.5),
        # argument order: N=[b,a], S=[a]: weight 2; 2*0.5/(3*2)
        (["b", "a"], ["a"], None, 1 / 6),
        (["a"], ["a"], None, 0.5),  # single item: 2 * 0.5 / 2
        ([], ["a"], None, 0.0),  # empty neutral
        (["a"], [], None, 0.0),  # empty sensitive: no term
        ([], [], None, 0.0),
    ],
)
def test_serp_fairllm_hand_values(
    neutral: list[str], sensitive: list[str], k: int | None, expected: float
) -> None:
    assert serp(neutral, sensitive, k, variant="fairllm") == expected


def test_serp_fairllm_identical_lists_scale() -> None:
    items = [f"item {i}" for i in range(25)]
    # spec: (K+3) / (4(K+1)) for identical lists of length K
    assert serp(items, items, variant="fairllm") == pytest.approx(28 / 104, abs=1e-15)


@pytest.mark.parametrize(
    ("neutral", "sensitive", "expected"),
    [
        (["a", "b", "c"], ["b", "c", "d"], 7 * 0.5 / 12),  # same as fairllm at equal lengths
        (["a", "a"], ["a"], 0.5),  # membership: weight 2 once; 2*0.5/((1+1)*1)
        (["a"], ["b", "a"], 1 / 6),  # denominator uses len(S)=2: 2*0.5/(3*2)
        ([], ["a"], 0.0),
        (["a"], [], 0.0),  # the reference divides by zero here; defined as 0
    ],
)
def test_serp_langfair_hand_values(
    neutral: list[str], sensitive: list[str], expected: float
) -> None:
    assert serp(neutral, sensitive, variant="langfair") == expected


@pytest.mark.parametrize(
    ("neutral", "sensitive", "k", "expected"),
    [
        (["a", "b", "c"], ["b", "c", "d"], None, 5 / 6),  # L=3: b 3 + c 2, / 6
        (["a"], ["b", "a"], None, 1 / 3),  # L=2: a at rank 1 weighs 1, / 3
        (["a", "b"], ["a", "a", "b"], None, 1.0),  # de-duplicated S = [a, b]
        (["a", "b", "c"], ["a"], None, 0.5),  # short S: L=3, a weighs 3, / 6
        (["a", "b", "c"], ["a", "b", "c"], 2, 1.0),
        (["a", "b"], ["c", "d"], None, 0.0),
        ([], [], None, 0.0),
    ],
)
def test_serp_normalized_hand_values(
    neutral: list[str], sensitive: list[str], k: int | None, expected: float
) -> None:
    assert serp(neutral, sensitive, k) == expected


# --------------------------------------------------------------------------- PRAG*


@pytest.mark.parametrize(
    ("neutral", "sensitive", "variant", "expected"),
    [
        # pairs (b,c) kept, (b,d) and (c,d): d absent -> 1; 3 of 3
        (["a", "b", "c"], ["b", "c", "d"], "fairllm", 1.0),
        # langfair: 3 / (3*4)
        (["a", "b", "c"], ["b", "c", "d"], "langfair", 3 / 12),
        (["a", "b", "c"], ["b", "c", "d"], "normalized", 1.0),
        # reversed order: no pair kept
        (["c", "b", "a"], ["a", "b", "c"], "fairllm", 0.0),
        (["c", "b", "a"], ["a", "b", "c"], "normalized", 0.0),
        # N repeats a: fairllm uses the LAST a (pos 2) > b (pos 1) -> 0 of 1
        (["a", "b", "a"], ["a", "b"], "fairllm", 0.0),
        # langfair uses the FIRST a (pos 0) < b -> 1 / (2*3)
        (["a", "b", "a"], ["a", "b"], "langfair", 1 / 6),
        # normalized: de-duplicated N = [a, b] -> 1 of 1
        (["a", "b", "a"], ["a", "b"], "normalized", 1.0),
        # (a,b): 1 > 0 -> 0; (a,x) 1; (b,x) 1 -> 2 of 3 pairs
        (["b", "a"], ["a", "b", "x"], "fairllm", 2 / 3),
        (["b", "a"], ["a", "b", "x"], "langfair", 2 / 12),
        (["b", "a"], ["a", "b", "x"], "normalized", 2 / 3),
        # a pair whose first item is absent scores nothing: (x,a) 0, (x,b) 0, (a,b) 1
        (["a", "b"], ["x", "a", "b"], "fairllm", 1 / 3),
        # duplicate in S: the pair (a, a) has id1 == id2 -> 0
        (["a"], ["a", "a"], "fairllm", 0.0),
        (["a"], ["a", "a"], "langfair", 0.0),
        (["a"], ["a", "a"], "normalized", 1.0),  # de-duplicated S = [a], kept
        # single item: 1 only when S == N as lists (references)
        (["a"], ["a"], "fairllm", 1.0),
        (["a", "b"], ["a"], "fairllm", 0.0),
        (["a", "b"], ["a"], "langfair", 0.0),
        (["b", "a"], ["a"], "normalized", 1.0),  # normalized: the item is kept at all
        (["b"], ["a"], "normalized", 0.0),
        ([], ["a"], "fairllm", 0.0),
        (["a"], [], "langfair", 0.0),
        ([], [], "normalized", 0.0),
    ],
)
def test_prag_hand_values(
    neutral: list[str], sensitive: list[str], variant: str, expected: float
) -> None:
    assert prag(neutral, sensitive, variant=variant) == expected  # type: ignore[arg-type]


def test_prag_identical_lists_scale() -> None:
    items = [f"item {i}" for i in range(25)]
    assert prag(items, items, variant="fairllm") == 1.0
    assert prag(items, items) == 1.0
    # langfair: all 300 pairs kept, / (25 * 26)
    assert prag(items, items, variant="langfair") == 300 / 650


def test_prag_k_truncates_before_the_single_item_rule() -> None:
    # k=1 on both: S[:1] == N[:1]
    assert prag(["a", "b"], ["a", "c"], k=1, variant="fairllm") == 1.0
    assert prag(["a", "b"], ["b", "a"], k=1, variant="fairllm") == 0.0


# --------------------------------------------------------------------------- curves


def test_curves_index_is_k_minus_one() -> None:
    n, s = ["a", "b", "c"], ["b", "c", "d"]
    c = curves(n, s, K=4, variant="fairllm")
    assert set(c) == {"jaccard", "serp", "prag"}
    assert [float(x) for x in c["jaccard"]] == [0.0, 1 / 3, 2 / 4, 2 / 4]
    assert float(c["serp"][1]) == 0.25  # the k=2 case above


def test_curves_default_K_is_longer_list() -> None:
    c = curves(["a"], ["a", "b", "c"])
    assert all(len(a) == 3 for a in c.values())
    assert len(curves([], [])["prag"]) == 1


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("k", [0, -3])
def test_k_must_be_positive(k: int) -> None:
    with pytest.raises(ValueError, match=r"k must be a positive int"):
        jaccard(["a"], ["a"], k)


@pytest.mark.parametrize("k", [True, 2.0, "3", 1.5])
def test_k_must_be_an_int(k: object) -> None:
    with pytest.raises(TypeError, match=r"k must be a positive int"):
        serp(["a"], ["a"], k)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [["a", None], ["a", 3], [("a",)]])
def test_items_must_be_strings(bad: list[object]) -> None:
    with pytest.raises(TypeError, match=r"sensitive\[\d\] must be a str"):
        prag(["a"], bad)  # type: ignore[arg-type]


def test_a_string_is_not_a_list() -> None:
    with pytest.raises(TypeError, match="neutral must be a list of str"):
        jaccard("abc", ["a"])
    with pytest.raises(TypeError, match="sensitive must be a list of str"):
        serp(["a"], None)  # type: ignore[arg-type]


def test_unknown_variant_names_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"variant must be one of 'normalized'") as info:
        serp(["a"], ["a"], variant="paper")  # type: ignore[arg-type]
    assert "'paper'" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_numpy_integer_k_is_accepted() -> None:
    np = pytest.importorskip("numpy")
    assert jaccard(["a", "b"], ["a", "c"], np.int64(1)) == 1.0
    assert math.isclose(jaccard(["a", "b"], ["a", "c"], np.int64(2)), 1 / 3)
