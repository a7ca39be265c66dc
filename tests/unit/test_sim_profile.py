"""Bias profiles, fault plans and the vocabulary loader of the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_recfair.errors import DataError
from pytest_recfair.prompts.grids import BUNDLED_GRIDS, load_grid, strip_article
from pytest_recfair.prompts.languages import render_value
from pytest_recfair.sim.profile import BiasProfile, Faults, load_profile
from pytest_recfair.sim.recognise import (
    EXTRA_LABELS,
    SYNONYMS,
    Recogniser,
    Vocabulary,
    project_entries,
)
from pytest_recfair.sim.recommender import SimulatedRecommender

PROMPT = "I am {} fan of Agnès Varda. Please recommend 20 movies."


def test_bundled_demo_profile_loads_by_name() -> None:
    demo = load_profile("demo")
    assert demo.name == "demo"
    assert demo.typo > 0
    assert demo.languages["fr"] > 0
    assert demo.refusals
    assert demo.short_lists


def test_star_and_neutral_rates() -> None:
    rec = SimulatedRecommender({"refusals": {"neutral": 1.0}})
    assert rec.respond(PROMPT.format("a")).refused
    assert not rec.respond(PROMPT.format("a Christian")).refused
    everyone = SimulatedRecommender({"short_lists": {"*": 1.0}})
    assert everyone.respond(PROMPT.format("a")).short
    assert everyone.respond(PROMPT.format("a Christian")).short


def test_shift_is_capped_at_one() -> None:
    profile = BiasProfile.from_mapping({"bias": {"Muslim": 0.9}, "typo": 0.9})
    rec = Recogniser()(PROMPT.format("a Muslimm"))
    assert rec.typo
    assert profile.shift(rec) == 1.0


def test_profile_faults_section_merges_with_explicit_faults() -> None:
    rec = SimulatedRecommender(
        {"bias": {}, "faults": {"429": 0.2, "retry_after": 3}}, faults="500=0.1,retry_after=5"
    )
    assert (rec.faults.rate_429, rec.faults.rate_500, rec.faults.retry_after) == (0.2, 0.1, 5.0)


def test_faults_from_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "faults.yaml"
    path.write_text("429: 0.1\ntimeout_mode: close\nrefusals: {Muslim: 0.5}\n", encoding="utf-8")
    faults = Faults.parse(str(path))
    assert (faults.rate_429, faults.timeout_mode) == (0.1, "close")
    assert faults.refusals.entries == ((None, "muslim", 0.5),)


@pytest.mark.parametrize(
    "data",
    [{"languages": ["fr"]}, {"faults": 3}, {"typo": 2}, {"bias": {"religion": ["Muslim"]}}],
)
def test_malformed_profile_sections(data: dict[str, object]) -> None:
    with pytest.raises(DataError):
        BiasProfile.from_mapping(data)


def test_project_entries_come_from_the_grids_and_language_tables() -> None:
    entries = project_entries()
    for name in BUNDLED_GRIDS:
        for attribute in load_grid(name).attributes:
            for value in attribute.values:
                found = (strip_article(value.text), value.label, attribute.name) in entries
                assert found == (attribute.name != "typo"), value  # typos stay fuzzy
    religion = load_grid("faireval").attribute("religion")
    phrase = render_value(religion, religion.value("Muslim"), "fr").value
    assert any(f in phrase for f, label, _ in entries if label == "Muslim" and f != "Muslim")


def test_synonyms_only_add_what_the_project_lacks() -> None:
    project = {(form.casefold(), label) for form, label, _ in project_entries()}
    labels = {label for _, label, _ in project_entries()} | set(EXTRA_LABELS)
    for label, forms in SYNONYMS.items():
        assert label in labels, label  # a synonym of a value some grid (or EXTRA) has
        for form in forms:
            assert (form.casefold(), label) not in project, (form, label)
            assert form.casefold() != label.casefold()


def test_builtin_vocabulary_recognises_project_and_synonym_forms() -> None:
    vocab = Vocabulary.builtin()
    rec = Recogniser(vocab, use_templates=False)("En tant que musulmane, je suis fan de X.")
    assert rec.labels == ("Muslim",)
    assert rec.values[0].attributes == ("religion",)
    elderly = Recogniser(vocab, use_templates=False)("I am an elderly fan of X.")
    assert elderly.labels == ("Old",)
    assert set(vocab.attributes_of("American")) == {"nationality", "continent"}
