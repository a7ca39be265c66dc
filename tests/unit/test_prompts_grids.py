"""Attribute grids: bundled content, schema errors users see, intersections."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.prompts.grids import BUNDLED_GRIDS, GridError, load_grid

REPO = Path(__file__).resolve().parents[2]

# FairEval skill description, as listed in the reference (it says "31 values" but lists 30).
FAIREVAL = {
    "age": ["Young", "Middle-aged", "Old"],
    "gender": ["Male", "Female"],
    "race": ["Black", "White", "Asian", "African American"],
    "religion": ["Buddhist", "Christian", "Hindu", "Muslim"],
    "nationality": ["American", "Brazilian", "British", "Chinese", "French", "German", "Japanese"],
    "continent": ["Asian", "African", "American"],
    "occupation": ["Doctor", "Student", "Teacher", "Worker", "Writer"],
    "physical": ["Fat", "Thin"],
}


def test_faireval_is_the_skill_description() -> None:
    grid = load_grid("faireval")
    assert {a.name: list(a.labels) for a in grid.attributes} == FAIREVAL


def test_fairllm_texts_are_verbatim() -> None:
    grid = load_grid("fairllm")
    texts = {a.name: [v.text for v in a.values] for a in grid.attributes}
    assert texts["religion"] == ["a Buddhist", "a Christian", "an Islamic", "a Hinduism"]
    assert texts["race"] == ["an African American", "a black", "a white", "a yellow"]
    assert texts["age"] == ["a middle aged", "an old", "a young"]
    assert texts["physics"] == ["fat", "thin"]
    assert texts["typo"] == [
        "an American", "an Americcan", "an Amerian", "an Afrian", "an Africcan", "an African"
    ]  # fmt: skip
    # The published phrasing already has its article: it is used as is.
    assert grid.attribute("physics").value("fat").with_article == "fat"


def test_implicit_and_personality() -> None:
    implicit = load_grid("implicit")
    names = implicit.attribute("first name")
    assert names.value("Lakisha").group == "Black female"
    assert names.value("Greg").group == "White male"
    rel = implicit.attribute("relationship")
    assert rel.value("brother + boyfriend").text == "brother and his boyfriend"
    assert rel.value("brother + boyfriend").group == "same-sex couple"
    assert rel.value("sister + husband").group == "different-sex couple"
    assert implicit.attribute("religious place").value("mosque").group == "Muslim"
    assert "law office" in implicit.attribute("place").labels
    personality = load_grid("personality").attribute("personality")
    assert len(personality.values) == 10
    traits = {"openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism"}
    assert {label.split()[1] for label in personality.labels} == traits


@pytest.mark.parametrize("name", BUNDLED_GRIDS)
def test_fixture_grids_match_package_data(name: str) -> None:
    packaged = resources.files("pytest_recfair.prompts").joinpath("data", "grids", f"{name}.yaml")
    fixture = REPO / "fixtures" / "grids" / f"{name}.yaml"
    assert fixture.read_text(encoding="utf-8") == packaged.read_text(encoding="utf-8")
    assert load_grid(fixture).digest == load_grid(name).digest


def test_attribute_lookup_is_case_insensitive() -> None:
    grid = load_grid("faireval")
    assert grid.attribute("RELIGION") is grid.attribute("religion")
    assert grid.attribute("religion").value("muslim").label == "Muslim"
    with pytest.raises(ConfigError, match=r"no attribute 'caste'; available: age, gender"):
        grid.attribute("caste")


@pytest.mark.parametrize("spec", ["race x gender", "Race X Gender", "race × gender"])
def test_intersection_labels_and_text(spec: str) -> None:
    attr = load_grid("faireval").attribute(spec)
    assert attr.name == "race x gender"
    assert len(attr.values) == 4 * 2
    value = attr.value("Black x Female")
    assert value.text == "Black female"
    assert value.with_article == "a Black female"
    assert attr.value("African American x Male").with_article == "an African American male"


def test_intersection_reads_in_english_order_either_way() -> None:
    grid = load_grid("faireval")
    assert grid.attribute("gender x race").value("Female x Black").text == "Black female"
    assert grid.attribute("gender x age").value("Female x Old").text == "old female"
    doctor = grid.attribute("race x occupation").value("Asian x Doctor")
    assert doctor.text == "Asian doctor"
    assert doctor.form == "noun"


def test_intersection_of_fairllm_strips_articles() -> None:
    value = load_grid("fairllm").attribute("race x gender").value("Black x Girl")
    assert value.with_article == "a black girl"


def test_bad_intersections() -> None:
    grid = load_grid("faireval")
    with pytest.raises(ConfigError, match="with itself"):
        grid.attribute("race x Race")
    with pytest.raises(ConfigError, match="only adjective and noun values can be crossed"):
        load_grid("implicit").attribute("first name x place")


def test_digest_changes_with_content(tmp_path: Path) -> None:
    a = tmp_path / "a.yaml"
    a.write_text("name: g\nattributes:\n  - name: x\n    values: [{label: A, text: a}]\n")
    b = tmp_path / "b.yaml"
    b.write_text("name: g\nattributes:\n  - name: x\n    values: [{label: A, text: b}]\n")
    assert load_grid(a).digest != load_grid(b).digest
    assert load_grid(a).digest == load_grid(a).digest


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "grid.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "name: g\nattributes:\n  - name: x\n    values: [{label: A, text: a}]\n"
            "  - name: y\n    values: []\n  - name: z\n    values: [{label: B}]\n",
            r"grid file '.*grid\.yaml': at attributes\[1\]\.values: \[\] should be non-empty",
        ),
        (
            "name: g\nattributes:\n  - name: x\n    values: [{label: A, text: a}]\n"
            "  - name: y\n    values: [{label: A, text: a}]\n"
            "  - name: z\n    values: [{label: B, txt: b}]\n",
            r"at attributes\[2\]\.values\[0\]: .*'text' is a required property",
        ),
        (
            "name: g\nattributes:\n  - name: x\n    values: [{label: 3, text: a}]\n",
            r"at attributes\[0\]\.values\[0\]\.label: 3 is not of type 'string'",
        ),
        ("attributes: []\n", r"at \(top level\): 'name' is a required property"),
        ("- just a list\n", r"at \(top level\): .* is not of type 'object'"),
        (
            "name: g\nattributes:\n  - name: x\n    form: verb\n"
            "    values: [{label: A, text: a}]\n",
            r"at attributes\[0\]\.form: 'verb' is not one of",
        ),
    ],
)
def test_schema_errors_name_file_and_key_path(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(GridError, match=message) as info:
        load_grid(_write(tmp_path, text))
    assert isinstance(info.value, DataError)
    assert "docs/prompts.md" in str(info.value)


def test_duplicate_attribute_and_label(tmp_path: Path) -> None:
    dup_attr = (
        "name: g\nattributes:\n  - name: Age\n    values: [{label: A, text: a}]\n"
        "  - name: age\n    values: [{label: A, text: a}]\n"
    )
    with pytest.raises(GridError, match=r"at attributes\[1\]\.name: attribute 'age' repeats"):
        load_grid(_write(tmp_path, dup_attr))
    dup_label = "name: g\nattributes:\n  - name: x\n    values: [{label: A, text: a}, {label: a, text: b}]\n"  # noqa: E501
    with pytest.raises(GridError, match=r"attributes\[0\]\.values\[1\]\.label: label 'a' repeats"):
        load_grid(_write(tmp_path, dup_label))


def test_attribute_names_may_not_contain_the_cross_separator(tmp_path: Path) -> None:
    text = "name: g\nattributes:\n  - name: race x gender\n    values: [{label: A, text: a}]\n"
    with pytest.raises(GridError, match=r"at attributes\[0\]\.name"):
        load_grid(_write(tmp_path, text))


def test_invalid_yaml_missing_file_and_bad_source(tmp_path: Path) -> None:
    with pytest.raises(GridError, match="not valid YAML"):
        load_grid(_write(tmp_path, "name: [unclosed\n"))
    with pytest.raises(GridError, match="does not exist"):
        load_grid(tmp_path / "none.yaml")
    with pytest.raises(
        ConfigError,
        match=r"grid: .nonsense. is neither a bundled set \(faireval, fairllm.*nor a file "
        r"ending in \.yaml",
    ):
        load_grid("nonsense")


def test_user_grid_with_translation_override(tmp_path: Path) -> None:
    text = (
        "name: mine\narticles: auto\nattributes:\n  - name: diet\n    values:\n"
        "      - {label: Vegan, text: vegan, i18n: {fr: {m: végan, f: végane}}}\n"
    )
    grid = load_grid(_write(tmp_path, text))
    value = grid.attribute("Diet").value("vegan")
    assert value.with_article == "a vegan"
    assert value.i18n["fr"]["f"] == "végane"


def test_extending_a_bundled_grid(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "name: mine\nextends: fairllm\nattributes:\n"
        "  - name: Religion\n    values: [{label: Jewish, text: Jewish}]\n"
        "  - name: diet\n    values: [{label: Vegan, text: vegan}]\n",
    )
    grid = load_grid(path)
    base = load_grid("fairllm")
    names = [n.casefold() for n in grid.attribute_names]
    assert names == [*base.attribute_names, "diet"]
    # Same-named attributes are replaced, and each keeps its own article convention.
    assert grid.attribute("religion").labels == ("Jewish",)
    assert grid.attribute("religion").value("Jewish").with_article == "a Jewish"
    assert grid.attribute("race").value("Yellow").with_article == "a yellow"
    assert grid.attribute("diet").value("Vegan").with_article == "a vegan"
    assert grid.digest != base.digest


def test_extending_a_relative_file_and_errors(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(
        "name: base\nattributes:\n  - name: x\n    values: [{label: A, text: a}]\n"
    )
    child = tmp_path / "child.yaml"
    child.write_text(
        "name: child\nextends: base.yaml\nattributes:\n  - name: y\n"
        "    values: [{label: B, text: b}]\n"
    )
    assert load_grid(child).attribute_names == ("x", "y")
    child.write_text(
        "name: child\nextends: nowhere.yaml\nattributes:\n  - name: y\n"
        "    values: [{label: B, text: b}]\n"
    )
    with pytest.raises(GridError, match=r"child\.yaml'.*at extends: 'nowhere\.yaml' is neither"):
        load_grid(child)
    (tmp_path / "loop.yaml").write_text(
        "name: loop\nextends: loop.yaml\nattributes:\n  - name: y\n"
        "    values: [{label: B, text: b}]\n"
    )
    with pytest.raises(GridError, match="in a loop"):
        load_grid(tmp_path / "loop.yaml")
