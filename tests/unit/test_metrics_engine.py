"""The vectorised path against the scalar functions and against a literal, slow
re-implementation of the reference code written from the spec's prose; and the laws the
metrics must obey (hypothesis)."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_recfair.metrics import lists as engine
from pytest_recfair.metrics.aggregate import curves, similarity_cube, similarity_matrix
from pytest_recfair.metrics.lists import jaccard, prag, serp
from pytest_recfair.vocab import METRICS, VARIANTS, Variant

SCALAR: dict[str, Callable[..., float]] = {"jaccard": jaccard, "serp": serp, "prag": prag}


# ------------------------------------------------------- the notebooks, literally (slow)
# Written from /work/shared/reference/metrics.md, reference argument order (x = sensitive,
# y = neutral), loops exactly as described: every position of y scanned for each pair.


def notebook_iou(x: list[str], y: list[str]) -> float:
    a, b = set(x), set(y)
    if not a | b:
        return 0.0  # the notebook divides by zero; the project defines 0
    return len(a & b) / len(a | b)


def notebook_serp(x: list[str], y: list[str]) -> float:
    temp = 0
    if len(y) == 0:
        return 0
    for i, item_x in enumerate(x):
        for item_y in y:
            if item_x == item_y:
                temp = temp + len(x) - i + 1
    return temp * 0.5 / ((len(y) + 1) * len(y))


def notebook_prag(x: list[str], y: list[str]) -> float:
    temp = 0
    pairs = 0
    if len(y) == 0 or len(x) == 0:
        return 0
    if len(x) == 1:
        return 1 if x == y else 0
    for i, item_x1 in enumerate(x):
        for j, item_x2 in enumerate(x):
            if j <= i:
                continue
            id1 = -1
            id2 = -1
            for p, item_y in enumerate(y):
                if item_y == item_x1:
                    id1 = p  # keeps overwriting: the LAST occurrence wins
                if item_y == item_x2:
                    id2 = p
            pairs = pairs + 1
            if id1 == -1:
                continue
            if id2 == -1:
                temp = temp + 1
            if id1 < id2:
                temp = temp + 1
    return temp / pairs


def langfair_serp(list1: list[str], list2: list[str]) -> float:
    K = len(list1)
    if not list2:
        return 0
    if K == 0:
        return 0.0  # the reference divides by zero; the project defines 0
    score = sum(len(list1) - i + 1 for i, item in enumerate(list1) if item in list2)
    return score * 0.5 / ((K + 1) * K)


def langfair_prag(list1: list[str], list2: list[str]) -> float:
    K = len(list1)
    if not list1 or not list2:
        return 0
    if len(list1) == 1:
        return int(list1 == list2)
    matches = 0
    for i, item1 in enumerate(list1):
        for item2 in list1[i + 1 :]:
            id1 = list2.index(item1) if item1 in list2 else -1
            id2 = list2.index(item2) if item2 in list2 else -1
            if id1 != -1 and (id1 < id2 or id2 == -1):
                matches += 1
    return matches / (K * (K + 1))


REFERENCE: dict[Variant, dict[str, Callable[[list[str], list[str]], float]]] = {
    "fairllm": {"jaccard": notebook_iou, "serp": notebook_serp, "prag": notebook_prag},
    "langfair": {"jaccard": notebook_iou, "serp": langfair_serp, "prag": langfair_prag},
}


def random_pair(rnd: random.Random) -> tuple[list[str], list[str]]:
    """Short lists over a tiny alphabet, so duplicates and overlaps are frequent."""
    alphabet = [f"t{i}" for i in range(rnd.randint(1, 7))]
    n = [rnd.choice(alphabet) for _ in range(rnd.randint(0, 9))]
    s = [rnd.choice(alphabet) for _ in range(rnd.randint(0, 9))]
    return n, s


def test_fast_path_matches_literal_reference_code_bit_for_bit() -> None:
    rnd = random.Random(20260411)
    checked = 0
    for _ in range(400):
        n, s = random_pair(rnd)
        K = rnd.randint(1, 10)
        for variant, funcs in REFERENCE.items():
            c = curves(n, s, K=K, variant=variant)
            for k in range(1, K + 1):
                for metric, ref in funcs.items():
                    expected = float(ref(s[:k], n[:k]))  # reference order: (S, N)
                    assert c[metric][k - 1] == expected, (variant, metric, k, n, s)
                    assert SCALAR[metric](n, s, k, variant=variant) == expected
                    checked += 1
    assert checked > 5000


def test_matrix_path_matches_scalar_functions_with_duplicates_and_gaps() -> None:
    rnd = random.Random(7)
    entities = [f"e{i}" for i in range(40)]
    neutral: dict[str, list[str] | None] = {}
    by_value: dict[str, dict[str, list[str] | None]] = {"x": {}, "y": {}, "z": {}}
    for e in entities:
        n, _ = random_pair(rnd)
        neutral[e] = n if rnd.random() > 0.05 else None
        for col in by_value.values():
            _, s = random_pair(rnd)
            if rnd.random() > 0.1:  # else: absent from the mapping = never answered
                col[e] = s if rnd.random() > 0.05 else None
    for variant in VARIANTS:
        cube = similarity_cube(neutral, by_value, K=9, variant=variant)
        for metric in METRICS:
            for k in (1, 4, 9):
                m = cube.matrix(metric, k)
                single = similarity_matrix(neutral, by_value, metric, k, variant)
                assert single == m
                for i, e in enumerate(entities):
                    for j, v in enumerate(by_value):
                        if e not in by_value[v]:  # never answered: left out of the mean
                            assert np.isnan(m.sims[i, j])
                            continue
                        expected = SCALAR[metric](
                            neutral[e] or [], by_value[v].get(e) or [], k, variant=variant
                        )
                        assert m.sims[i, j] == expected, (variant, metric, k, e, v)


# ------------------------------------------------------- laws (hypothesis)

item = st.sampled_from([f"m{i}" for i in range(12)])
lists = st.lists(item, max_size=12)
variants = st.sampled_from(VARIANTS)


@given(n=lists, s=lists, K=st.integers(1, 14), variant=variants)
@settings(max_examples=150, deadline=None)
def test_vectorised_equals_scalar(n: list[str], s: list[str], K: int, variant: Variant) -> None:
    c = curves(n, s, K=K, variant=variant)
    for metric in METRICS:
        for k in range(1, K + 1):
            assert c[metric][k - 1] == SCALAR[metric](n, s, k, variant=variant)


@given(n=lists, s=lists, k=st.integers(1, 14))
@settings(max_examples=150, deadline=None)
def test_normalized_range(n: list[str], s: list[str], k: int) -> None:
    for metric in METRICS:
        assert 0.0 <= SCALAR[metric](n, s, k) <= 1.0


@given(n=lists, s=lists, k=st.integers(1, 14), variant=variants)
@settings(max_examples=100, deadline=None)
def test_reference_variants_are_non_negative(
    n: list[str], s: list[str], k: int, variant: Variant
) -> None:
    for metric in METRICS:
        assert SCALAR[metric](n, s, k, variant=variant) >= 0.0


@given(n=st.lists(item, min_size=1, max_size=12), K=st.integers(1, 14))
@settings(max_examples=100, deadline=None)
def test_normalized_identical_is_one_at_every_k(n: list[str], K: int) -> None:
    c = curves(n, list(n), K=K)
    for metric in METRICS:
        assert np.all(c[metric] == 1.0), metric


@given(
    n=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=8),
    s=st.lists(st.sampled_from(["w", "x", "y", "z"]), min_size=1, max_size=8),
    K=st.integers(1, 10),
)
@settings(max_examples=100, deadline=None)
def test_normalized_disjoint_is_zero_at_every_k(n: list[str], s: list[str], K: int) -> None:
    c = curves(n, s, K=K)
    for metric in METRICS:
        assert np.all(c[metric] == 0.0), metric


@given(n=lists, s=lists, k=st.integers(1, 14), variant=variants, seed=st.integers(0, 999))
@settings(max_examples=100, deadline=None)
def test_invariant_to_renaming_items(
    n: list[str], s: list[str], k: int, variant: Variant, seed: int
) -> None:
    names = sorted(set(n) | set(s))
    new = [f"renamed {i}" for i in range(len(names))]
    random.Random(seed).shuffle(new)
    rename = dict(zip(names, new, strict=True))
    n2, s2 = [rename[x] for x in n], [rename[x] for x in s]
    for metric in METRICS:
        f = SCALAR[metric]
        assert f(n, s, k, variant=variant) == f(n2, s2, k, variant=variant)


def test_k_beyond_every_list_and_small_blocks_change_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rnd = random.Random(11)
    neutral = {f"e{i}": random_pair(rnd)[0] for i in range(30)}
    by_value = {v: {e: random_pair(rnd)[1] for e in neutral} for v in ("x", "y")}
    for variant in VARIANTS:
        wide = similarity_cube(neutral, by_value, K=40, variant=variant)
        monkeypatch.setattr(engine, "BLOCK_ELEMENTS", 50)  # a few pairs per block
        small = similarity_cube(neutral, by_value, K=40, variant=variant)
        monkeypatch.undo()
        for metric in METRICS:
            assert np.array_equal(wide.sims[metric], small.sims[metric])
            for i, e in enumerate(neutral):
                expected = SCALAR[metric](neutral[e], by_value["y"][e], 40, variant=variant)
                assert wide.sims[metric][i, 1, 39] == expected


def test_long_lists_stay_exact() -> None:
    """Lists longer than 200 switch the engine's float32 products to float64."""
    rnd = random.Random(5)
    alphabet = [f"t{i}" for i in range(150)]
    n = [rnd.choice(alphabet) for _ in range(230)]
    s = [rnd.choice(alphabet) for _ in range(220)]
    for variant in VARIANTS:
        c = curves(n, s, K=230, variant=variant)
        for k in (1, 57, 201, 230):
            for metric in METRICS:
                assert c[metric][k - 1] == SCALAR[metric](n, s, k, variant=variant)
