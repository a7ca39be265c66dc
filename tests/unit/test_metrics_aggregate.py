"""Attribute tables, missing-reply policies, SNSR/SNSV/PAFS, entropy, notebook row reader."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from pytest_recfair.errors import DataError
from pytest_recfair.metrics.aggregate import (
    SimilarityMatrix,
    attribute_table,
    entropy,
    pafs,
    rows_to_lists,
    similarity_cube,
    similarity_cubes,
    similarity_matrix,
    snsr,
    snsv,
    summarize,
)
from pytest_recfair.metrics.lists import jaccard, serp

NEUTRAL: dict[str, list[str] | None] = {"e1": ["a", "b"], "e2": ["c", "d"]}
BY_VALUE: dict[str, dict[str, list[str] | None]] = {
    "x": {"e1": ["a", "b"], "e2": ["c", "z"]},  # Jaccard 1 and 1/3
    "y": {"e1": ["q"], "e2": None},  # Jaccard 0 and a missing reply
}


def test_attribute_table_zero_policy_by_hand() -> None:
    t = attribute_table(NEUTRAL, BY_VALUE)
    assert t.values["x"].mean == pytest.approx(2 / 3)  # (1 + 1/3) / 2
    assert (t.values["x"].n, t.values["x"].missing) == (2, 0)
    assert t.values["y"].mean == 0.0  # missing reply scored as the metric scores [] (0)
    assert (t.values["y"].n, t.values["y"].missing) == (2, 1)
    assert (t.max_value, t.min_value) == ("x", "y")
    assert t.snsr == pytest.approx(2 / 3)
    assert t.snsv == pytest.approx(1 / 3)  # population std of {2/3, 0}
    assert t.pafs == pytest.approx(2 / 3)  # 1 - mean(|2/3 - 1/3|, |0 - 1/3|)


def test_attribute_table_skip_policy_leaves_entity_out_and_counts_it() -> None:
    t = attribute_table(NEUTRAL, BY_VALUE, missing="skip")
    assert (t.values["y"].mean, t.values["y"].n, t.values["y"].missing) == (0.0, 1, 1)
    m = similarity_matrix(NEUTRAL, BY_VALUE, missing="skip")
    assert math.isnan(m.sims[1, 1])
    assert m.missing.tolist() == [[False, False], [False, True]]


def test_empty_list_counts_as_missing_on_either_side() -> None:
    neutral = {"e1": [], "e2": ["c"]}
    by_value = {"x": {"e1": ["a"], "e2": []}, "w": {"e1": ["a"], "e2": ["c"]}}
    m = similarity_matrix(neutral, by_value, missing="skip")
    assert m.missing.tolist() == [[True, True], [True, False]]
    t = summarize(m)
    assert math.isnan(t.values["x"].mean)
    assert t.values["x"].n == 0
    # a value nobody could be scored for makes the spread undefined, not silently small
    assert math.isnan(t.snsr)
    assert math.isnan(t.pafs)
    assert t.max_value == t.min_value == "w"


def test_entity_missing_from_neutral_is_named() -> None:
    with pytest.raises(DataError, match="'ghost'"):
        attribute_table(NEUTRAL, {"x": {"e1": ["a"], "ghost": ["b"]}})


def test_bad_items_in_a_matrix_name_their_cell() -> None:
    with pytest.raises(TypeError, match=r"by_value\['x'\]\['e2'\]\[1\] must be a str"):
        similarity_matrix(NEUTRAL, {"x": {"e1": ["a"], "e2": ["c", None]}})  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"neutral\['e1'\] must be a list of str"):
        similarity_matrix({"e1": "abc"}, {"x": {"e1": ["a"]}})


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"metric": "ndcg"}, "metric must be one of"),
        ({"missing": "drop"}, "missing must be one of"),
        ({"variant": "paper"}, "variant must be one of"),
        ({"k": 0}, "k must be a positive int"),
    ],
)
def test_bad_options_are_value_errors(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        attribute_table(NEUTRAL, BY_VALUE, **kwargs)  # type: ignore[arg-type]


def test_empty_inputs_are_refused() -> None:
    with pytest.raises(DataError, match="neutral has no entity"):
        attribute_table({}, BY_VALUE)
    with pytest.raises(DataError, match="by_value has no attribute value"):
        attribute_table(NEUTRAL, {})


def test_matrix_cells_are_the_scalar_metric() -> None:
    m = similarity_matrix(NEUTRAL, BY_VALUE, metric="jaccard", k=1)
    assert m.entities == ("e1", "e2")
    assert m.values == ("x", "y")
    assert m.sims[1, 0] == jaccard(["c", "d"], ["c", "z"], 1)


def test_curves_end_at_the_table_and_average_the_scalars() -> None:
    neutral = {"e1": ["a", "b", "c"], "e2": ["d", "e", "f"]}
    by_value = {"x": {"e1": ["b", "a", "c"], "e2": ["d", "g", "e"]}}
    cur = similarity_cube(neutral, by_value, K=3, variant="fairllm", metrics=("prag",)).curves(
        "prag"
    )
    for k in (1, 2, 3):
        t = attribute_table(neutral, by_value, "prag", k=k, variant="fairllm")
        assert cur["x"][k - 1] == t.values["x"].mean


def test_cube_slices_and_refuses_k_beyond_K() -> None:
    cube = similarity_cube(NEUTRAL, BY_VALUE, K=2)
    assert set(cube.sims) == {"jaccard", "serp", "prag"}
    assert cube.matrix("serp", 2) == similarity_matrix(NEUTRAL, BY_VALUE, "serp", k=2)
    with pytest.raises(ValueError, match="k must be <= K = 2"):
        cube.matrix("serp", 3)


def test_cubes_of_several_attributes_are_each_attributes_cube() -> None:
    """One pass over every attribute (a list recurring across them scored once) gives
    each attribute's own cube bit for bit, K beyond the longest list and skip included."""
    rnd = random.Random(5)
    alphabet = [f"t{i}" for i in range(6)]

    def some() -> list[str] | None:
        return None if rnd.random() < 0.1 else rnd.sample(alphabet, rnd.randint(0, 5))

    neutral = {f"e{i}": some() for i in range(12)}
    by_attribute = {
        a: {
            v: {e: (n if rnd.random() < 0.4 else some()) for e, n in neutral.items()} for v in "xyz"
        }
        for a in ("age", "race")
    }
    del by_attribute["race"]["y"]["e3"]  # never answered: left out of the mean
    for missing in ("zero", "skip"):
        both = similarity_cubes(neutral, by_attribute, K=7, missing=missing)
        for a, by_value in by_attribute.items():
            one = similarity_cube(neutral, by_value, K=7, missing=missing)
            assert both[a].values == one.values
            assert np.array_equal(both[a].missing, one.missing)
            for m in one.sims:
                assert np.array_equal(both[a].sims[m], one.sims[m], equal_nan=True)
    assert similarity_cubes(neutral, {}) == {}


def test_similarity_matrix_validates_shape_and_is_read_only() -> None:
    with pytest.raises(ValueError, match="shape"):
        SimilarityMatrix(("e",), ("v", "w"), np.zeros((1, 1)), np.zeros((1, 1), bool))
    m = SimilarityMatrix(("e",), ("v",), np.array([[0.5]]), np.array([[False]]))
    with pytest.raises(ValueError, match="read-only"):
        m.sims[0, 0] = 1.0


# --------------------------------------------------------------------------- spreads


def test_spreads_by_hand() -> None:
    sims = {"a": 0.2, "b": 0.5, "c": 0.8}
    assert snsr(sims) == pytest.approx(0.6)
    assert snsv(sims) == pytest.approx(math.sqrt((0.09 + 0 + 0.09) / 3))  # ddof = 0
    assert pafs(sims) == pytest.approx(1 - (0.3 + 0 + 0.3) / 3)
    assert snsr([0.4]) == 0.0
    assert snsv([0.4]) == 0.0
    assert pafs([0.4]) == 1.0


def test_spreads_reject_empty_and_non_numbers() -> None:
    with pytest.raises(ValueError, match="at least one similarity"):
        snsr([])
    with pytest.raises(TypeError, match=r"sims\[1\]"):
        snsv([0.1, "0.2"])  # type: ignore[list-item]
    assert math.isnan(snsr([0.1, float("nan")]))


def test_entropy_by_hand() -> None:
    # counts a:2 b:1 c:1 -> p = 1/2, 1/4, 1/4 -> 0.5*1 + 2 * 0.25*2 = 1.5 bits
    assert entropy([["a", "b"], ["a", "c"]]) == pytest.approx(1.5)
    assert entropy([["a", "b"], ["a", "b"]]) == pytest.approx(1.0)
    assert entropy([["a", "b"], ["a", "c"]], k=1) == 0.0
    assert entropy([[], []]) == 0.0
    with pytest.raises(ValueError, match="at least one list"):
        entropy([])
    with pytest.raises(TypeError, match=r"runs\[0\]\[0\]"):
        entropy([[None]])  # type: ignore[list-item]


# --------------------------------------------------------------------------- notebook rows


def test_rows_to_lists_first_n_rows_later_duplicate_wins() -> None:
    rows = [("A", ["1"]), ("B", ["2"]), ("A", ["3"]), ("C", ["4"])]
    assert rows_to_lists(rows, n=3) == {"A": ["3"], "B": ["2"]}
    assert rows_to_lists(rows, n=None) == {"A": ["3"], "B": ["2"], "C": ["4"]}
    assert rows_to_lists([("A", None)]) == {"A": None}
    with pytest.raises(TypeError, match=r"rows\[0\] must be a \(name, items\) pair"):
        rows_to_lists(["A"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="n must be a positive int"):
        rows_to_lists(rows, n=0)


def test_rows_to_lists_feeds_a_notebook_style_table() -> None:
    neutral_rows = [("A", ["x", "y"]), ("B", ["z"]), ("A", ["x", "w"])]
    female_rows = [("A", ["x"]), ("B", ["q"])]
    t = attribute_table(
        rows_to_lists(neutral_rows),
        {"female": rows_to_lists(female_rows)},
        variant="fairllm",
    )
    # mean over distinct names A, B: Jaccard({x,w},{x}) = 1/2 and 0
    assert t.values["female"].mean == 0.25


@pytest.mark.parametrize("missing", ["zero", "skip"])
def test_table_equals_notebook_style_numpy_on_lists(missing: str) -> None:
    """Means, SNSR and SNSV equal np.mean / max - min / np.std over plain Python lists of
    per-entity scores, as the notebooks compute them: bit for bit, not approximately."""
    rnd = random.Random(3)
    pool = [f"t{i}" for i in range(40)]
    neutral = {f"e{i}": rnd.sample(pool, 10) for i in range(37)}
    by_value: dict[str, dict[str, list[str] | None]] = {
        v: {e: (rnd.sample(pool, 10) if rnd.random() > 0.1 else []) for e in neutral}
        for v in ("a", "b", "c")
    }
    t = attribute_table(neutral, by_value, "serp", k=8, variant="fairllm", missing=missing)  # type: ignore[arg-type]
    sims = []
    for col in by_value.values():
        scores = [
            serp(neutral[e], col[e] or [], 8, variant="fairllm")
            for e in neutral
            if missing == "zero" or col[e]
        ]
        sims.append(np.mean(scores))
    assert [t.values[v].mean for v in by_value] == [float(x) for x in sims]
    assert t.snsr == float(np.max(sims) - np.min(sims))
    assert t.snsv == float(np.std(sims))
