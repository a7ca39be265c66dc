"""Catalogue loading (CSV, JSON, YAML), title matching and coverage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_recfair.errors import DataError
from pytest_recfair.replies.catalogue import catalogue_from_records, load_catalogue

CSV = """title,id,price,cuisine,rating
The Golden Spoon,r1,$$,Italian,4.5
Amélie's Bistro,r2,$$$,French,4.0
Taco Town,r3,$,Mexican,3.5
Toy Story Diner 2,r4,$,American,
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_fields_and_kinds(tmp_path: Path) -> None:
    cat = load_catalogue(_write(tmp_path, "c.csv", CSV))
    assert cat.categorical == ("price", "cuisine")
    assert cat.numeric == ("rating",)  # every non-empty cell is a number
    assert cat.categories("price") == ("$", "$$", "$$$")
    assert [it.id for it in cat.items] == ["r1", "r2", "r3", "r4"]
    assert cat.items[0].fields["rating"] == 4.5
    assert "rating" not in cat.items[3].fields  # an empty cell is no value


def test_json_and_yaml_give_the_same_catalogue(tmp_path: Path) -> None:
    records = [
        {"title": "A Film", "genre": "drama", "decade": 1990},
        {"title": "B Film", "genre": "comedy", "decade": 2000},
    ]
    from_json = load_catalogue(_write(tmp_path, "c.json", json.dumps({"items": records})))
    yaml_text = "".join(
        f"- title: {r['title']}\n  genre: {r['genre']}\n  decade: {r['decade']}\n" for r in records
    )
    from_yaml = load_catalogue(_write(tmp_path, "c.yaml", yaml_text))
    assert from_json.items == from_yaml.items
    assert from_json.numeric == ("decade",)
    assert from_json.items[0].id == "A Film"  # no id: the title is the id


def test_matching_uses_the_project_title_key(tmp_path: Path) -> None:
    cat = load_catalogue(_write(tmp_path, "c.csv", CSV))
    titles = ["Golden Spoon", "Amelies Bistro", "TACO TOWN", "Toy Story Diner 3", "Nowhere"]
    assert cat.match(titles) == [0, 1, 2, None, None]  # a sequel number never merges


def test_fuzzy_match_tolerates_one_typo_only_on_long_titles() -> None:
    cat = catalogue_from_records(
        [{"title": "The Golden Spoon", "p": "$"}, {"title": "Heat", "p": "$"}]
    )
    assert cat.match(["Golden Spon", "Beat"]) == [0, None]
    assert cat.match(["Golden Spon"], fuzzy=False) == [None]


def test_coverage_counts_occurrences_and_quotes_unmatched(tmp_path: Path) -> None:
    cat = load_catalogue(_write(tmp_path, "c.csv", CSV))
    titles = ["Taco Town", "Nowhere", "Nowhere", "Elsewhere"]
    cov = cat.coverage(titles, cat.match(titles))
    assert (cov.matched, cov.total, cov.share) == (1, 4, 0.25)
    assert cov.unmatched_examples == ("Nowhere", "Elsewhere")


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("c.csv", "name,price\nX,$\n", "header must have a 'title' column"),
        ("c.csv", "title,id\nA,1\nB,1\n", "repeats the id '1'"),
        ("c.json", "{not json", "is not valid JSON"),
        ("c.yaml", "- price: $\n", "has no 'title'"),
        ("c.yaml", "title: A\n", "expected a list of items"),
        ("c.txt", "A\n", "expected a .csv/.json/.yaml/.yml file"),
        ("c.json", "[]", "no items"),
    ],
)
def test_bad_files_give_one_line_errors(tmp_path: Path, name: str, text: str, needle: str) -> None:
    with pytest.raises(DataError) as info:
        load_catalogue(_write(tmp_path, name, text))
    msg = str(info.value)
    assert needle in msg
    assert name in msg
    assert "\n" not in msg


def test_missing_file_and_unknown_field(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        load_catalogue(tmp_path / "nope.csv")
    cat = load_catalogue(_write(tmp_path, "c.csv", CSV))
    with pytest.raises(DataError, match=r"no field .genre.*price, cuisine, rating"):
        cat.categories("genre")
    with pytest.raises(DataError, match="is numeric"):
        cat.categories("rating")
