"""Bias profiles, fault plans and the vocabulary loader of the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_recfair.errors import DataError
from pytest_recfair.sim import BiasProfile, Faults, Recogniser, SimulatedRecommender, load_profile
from pytest_recfair.sim.vocab import Vocabulary, project_entries

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


def test_project_entries_read_grids_and_language_tables(tmp_path: Path) -> None:
    (tmp_path / "grids").mkdir()
    (tmp_path / "languages").mkdir()
    (tmp_path / "grids" / "g.yaml").write_text(
        "attributes:\n"
        "  - name: diet\n    values: [{label: Vegan, text: a vegan}]\n"
        "  - name: typo\n    values: [{label: Vegann, text: a Vegann}]\n",
        encoding="utf-8",
    )
    (tmp_path / "languages" / "fr.yaml").write_text(
        "values:\n  diet:\n    Vegan: {m: végétalien, f: végétalienne, gender: m}\n",
        encoding="utf-8",
    )
    (tmp_path / "languages" / "broken.yaml").write_text("values: [", encoding="utf-8")
    entries = project_entries(tmp_path)
    assert ("vegan", "Vegan", "diet") in entries
    assert ("végétalienne", "Vegan", "diet") in entries
    assert all(label != "Vegann" for _, label, _ in entries)  # typos stay fuzzy
    vocab = Vocabulary.builtin(project=False).extended(entries)
    rec = Recogniser(vocab, use_templates=False)("En tant que végétalienne, je suis fan de X.")
    assert rec.labels == ("Vegan",)
    assert rec.values[0].attributes == ("diet",)
