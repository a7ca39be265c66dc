"""Seed entities: bundled sets, user file formats, subsampling and digests."""

from __future__ import annotations

import csv
import json
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.prompts.seeds import Entity, load_seeds, seeds_digest, slugify, subsample

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("name", "domain"), [("directors", "movie"), ("artists", "music")])
def test_bundled_sets_are_large_unique_and_typed(name: str, domain: str) -> None:
    ents = load_seeds(name)
    assert len(ents) >= 300
    assert len({e.id for e in ents}) == len(ents)
    assert len({e.name.casefold() for e in ents}) == len(ents)
    assert {e.domain for e in ents} == {domain}
    assert all(e.id == e.id.lower() and " " not in e.id for e in ents)


@pytest.mark.parametrize("name", ["directors", "artists"])
def test_bundled_sets_are_diverse(name: str) -> None:
    path = REPO / "fixtures" / "seeds" / f"{name}.csv"
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    genders = Counter(r["gender"] for r in rows)
    countries = {r["country"] for r in rows}
    decades = {int(r["decade"]) for r in rows}
    # Not only men from one country and one era.
    assert genders["f"] / len(rows) >= 0.25
    assert len(countries) >= 30
    assert max(decades) - min(decades) >= 80
    assert Counter(r["country"] for r in rows).most_common(1)[0][1] / len(rows) < 0.5


@pytest.mark.parametrize("name", ["directors", "artists"])
def test_fixtures_copy_matches_package_data(name: str) -> None:
    packaged = resources.files("pytest_recfair.prompts").joinpath("data", "seeds", f"{name}.csv")
    assert (REPO / "fixtures" / "seeds" / f"{name}.csv").read_text(encoding="utf-8") == (
        packaged.read_text(encoding="utf-8")
    )


def test_well_known_names_are_present() -> None:
    directors = {e.name for e in load_seeds("directors")}
    artists = {e.name for e in load_seeds("artists")}
    assert {"Agnès Varda", "Akira Kurosawa", "Ousmane Sembène", "Alfred Hitchcock"} <= directors
    assert {"Adele", "Fela Kuti", "Umm Kulthum", "Bob Dylan"} <= artists


def test_slugify_is_ascii_and_stable() -> None:
    assert slugify("Agnès Varda") == "agnes-varda"
    assert slugify("Tyler, the Creator") == "tyler-the-creator"
    cjk = slugify("王家卫")
    assert cjk.startswith("e-")
    assert cjk == slugify("王家卫")


def test_csv_with_optional_columns(tmp_path: Path) -> None:
    path = tmp_path / "books.csv"
    path.write_text(
        'name,id,domain,notes\nToni Morrison,tm,book,x\n"Le Guin, Ursula",,,\n', encoding="utf-8"
    )
    ents = load_seeds(path, domain="book")
    assert ents == [
        Entity(id="tm", name="Toni Morrison", domain="book"),
        Entity(id="le-guin-ursula", name="Le Guin, Ursula", domain="book"),
    ]


def test_json_yaml_and_text(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(["Adele", {"name": "Björk", "id": "bjork"}]))
    (tmp_path / "b.yaml").write_text("entities:\n  - Adele\n  - {name: Björk, domain: music}\n")
    (tmp_path / "c.txt").write_text("# my list\nAdele\n\n  Björk  \n", encoding="utf-8")
    a = load_seeds(tmp_path / "a.json", domain="music")
    b = load_seeds(tmp_path / "b.yaml")
    c = load_seeds(tmp_path / "c.txt", domain="music")
    assert [e.name for e in a] == [e.name for e in b] == [e.name for e in c] == ["Adele", "Björk"]
    assert a[1].id == "bjork"
    assert c[1].id == "bjork"
    assert b[0].domain == ""
    assert b[1].domain == "music"


def test_csv_without_name_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("title,id\nX,1\n")
    with pytest.raises(
        DataError,
        match=r"bad\.csv.*line 1: the header lacks column\(s\) \['name'\]; expected a header "
        r"such as 'id,name,domain'.*found \['title', 'id'\]",
    ):
        load_seeds(path)


def test_csv_row_with_extra_fields(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("name\nLe Guin, Ursula\n")
    with pytest.raises(
        DataError, match=r"line 2 has more fields.*quote fields that contain commas"
    ):
        load_seeds(path)


def test_duplicate_names_and_ids_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "dup.txt"
    path.write_text("Adele\nadele\n")
    with pytest.raises(DataError, match=r"line 2 repeats id 'adele' \(first at line 1\)"):
        load_seeds(path)
    path = tmp_path / "dup.yaml"
    path.write_text("- {name: A, id: x}\n- {name: a, id: y}\n")
    with pytest.raises(DataError, match=r"entities\[1\] repeats name 'a'"):
        load_seeds(path)


def test_bad_structured_files(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(DataError, match=r"x\.json.*not valid JSON"):
        load_seeds(tmp_path / "x.json")
    (tmp_path / "y.yaml").write_text("name: Adele\n")
    no_list = r"y\.yaml.*at \(top level\): 'entities' is a required property; expected a list"
    with pytest.raises(DataError, match=no_list):
        load_seeds(tmp_path / "y.yaml")
    (tmp_path / "z.yaml").write_text("- Adele\n- 3\n")
    not_a_name = r"z\.yaml.*at entities\[1\]: 3 is not of type 'string', 'object'; expected a list"
    with pytest.raises(DataError, match=not_a_name):
        load_seeds(tmp_path / "z.yaml")
    (tmp_path / "w.yaml").write_text("- {id: x}\n")
    with pytest.raises(DataError, match=r"entities\[0\] has no 'name'"):
        load_seeds(tmp_path / "w.yaml")
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(DataError, match="contains no entities"):
        load_seeds(tmp_path / "empty.txt")


def test_missing_file_and_unknown_source(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"does not exist"):
        load_seeds(tmp_path / "nope.csv")
    with pytest.raises(ConfigError, match=r"neither a bundled set \(artists, directors\)"):
        load_seeds("painters")


def test_subsample_is_deterministic_and_prefix_consistent() -> None:
    ents = load_seeds("directors")
    small = subsample(ents, 20, seed=7)
    large = subsample(ents, 100, seed=7)
    assert small == subsample(ents, 20, seed=7)
    assert set(small) <= set(large)
    assert len(small) == 20
    assert len(large) == 100
    # Input order is kept, and another seed picks another subset.
    assert [ents.index(e) for e in large] == sorted(ents.index(e) for e in large)
    assert set(subsample(ents, 20, seed=8)) != set(small)


def test_subsample_edges() -> None:
    ents = load_seeds("artists")
    assert subsample(ents, None) == ents
    assert subsample(ents, 10_000) == ents
    assert subsample(ents, 0) == []
    assert [e.name for e in subsample(["Adele", "Björk"], 5)] == ["Adele", "Björk"]
    with pytest.raises(ConfigError, match="non-negative integer"):
        subsample(ents, -1)
    with pytest.raises(ConfigError, match="got '5'"):
        subsample(ents, "5")  # type: ignore[arg-type]


def test_subsample_does_not_depend_on_input_order() -> None:
    ents = load_seeds("artists")
    assert set(subsample(ents, 30, seed=1)) == set(subsample(list(reversed(ents)), 30, seed=1))


def test_seeds_digest() -> None:
    ents = load_seeds("directors")
    assert seeds_digest(ents) == seeds_digest(list(ents))
    assert len(seeds_digest(ents)) == 64
    assert seeds_digest(ents) != seeds_digest(ents[:-1])
    assert seeds_digest(["Adele"]) == seeds_digest([Entity("adele", "Adele", "")])


@given(
    small=st.integers(0, 60),
    extra=st.integers(0, 60),
    seed=st.integers(-(2**40), 2**40),
)
def test_subsample_law_smaller_n_is_a_subset(small: int, extra: int, seed: int) -> None:
    ents = [Entity(f"e{i}", f"Name {i}", "movie") for i in range(50)]
    a = subsample(ents, small, seed=seed)
    b = subsample(ents, small + extra, seed=seed)
    assert set(a) <= set(b)
    assert len(a) == min(small, len(ents))
