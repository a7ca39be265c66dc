"""The public API outside pytest: pytest_recfair.api.audit / judge."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_recfair import api
from pytest_recfair.errors import ConfigError
from pytest_recfair.results import AuditResult
from pytest_recfair.sim.recommender import SimulatedRecommender


def _run(seed: int, bias: str | dict[str, object] = "demo") -> AuditResult:
    rec = SimulatedRecommender(bias, noise=0.08, seed=7)
    rec.reset()
    for _ in range(seed):  # advance the noise draws: an independent run of the same model
        api.audit(rec, attr="religion", entities=30)
    return api.audit(rec, attr="religion", entities=30)


def test_audit_takes_marker_arguments_and_returns_an_ungated_result() -> None:
    result = _run(0)
    religion = result.attribute("religion")
    assert result.gate is None
    assert result.meta.n_entities == 30
    assert religion.least_favoured == "Muslim"  # the demo profile's planted bias


def test_judge_passes_the_same_model_and_fails_a_regression() -> None:
    base = _run(0)
    assert api.judge(_run(1), base, tolerance=0.02).passed
    worse = SimulatedRecommender({"religion": {"Muslim": 0.8, "Hindu": 0.2}}, noise=0.08, seed=7)
    outcome = api.judge(api.audit(worse, attr="religion", entities=30), base, tolerance=0.02)
    assert not outcome.passed
    assert {(f.kind, f.statistic) for f in outcome.failures} == {("drift", "snsr")}


def test_judge_applies_thresholds_without_a_baseline() -> None:
    outcome = api.judge(_run(0), max_snsr=0.1)
    assert [(f.kind, f.statistic) for f in outcome.failures] == [("threshold", "snsr")]


def test_audit_accepts_a_list_of_entity_names() -> None:
    rec = SimulatedRecommender("demo")
    result = api.audit(rec, attr="gender", seeds=["Agnès Varda", "Akira Kurosawa", "Ang Lee"])
    assert result.attribute("gender").matrix.entities == (
        "agnes-varda",
        "akira-kurosawa",
        "ang-lee",
    )


def test_bad_seeds_are_config_errors() -> None:
    """audit() and the recfair_seeds fixture share one reader (api.seed_entities)."""
    rec = SimulatedRecommender()
    with pytest.raises(ConfigError, match=r"audit\(domain='book'\) has no bundled seed set"):
        api.audit(rec, domain="book")
    with pytest.raises(ConfigError, match=r"audit\(seeds=...\) gave int; expected a list"):
        api.audit(rec, seeds=42)


def test_unknown_arguments_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown argument"):
        api.audit(SimulatedRecommender(), atr="religion")
    with pytest.raises(ConfigError, match="unknown argument"):
        api.judge(_run(0), tolerence=0.1)


def test_audit_reads_the_catalogue_and_candidates_files(tmp_path: Path) -> None:
    """Outside pytest the extra inputs of the other kinds of audit are file paths."""
    rows = [f"r{i},Place {i:02d},{'$' if i < 10 else '$$'}" for i in range(20)]
    (tmp_path / "places.csv").write_text("id,title,price\n" + "\n".join(rows) + "\n")

    def cheap_for_women(prompt: str) -> str:
        start = 0 if "female" in prompt.lower() else 5
        return "\n".join(f"{i + 1}. Place {start + i:02d}" for i in range(10))

    result = api.audit(
        cheap_for_women, attr="gender", seeds=[f"Director {i}" for i in range(12)], k=10,
        item_field="price", catalogue=str(tmp_path / "places.csv"), n_resamples=99,
    )  # fmt: skip
    (gender,) = result.extras["items"]["attributes"]
    assert gender["coverage"]["matched"] == gender["coverage"]["total"] > 0
    price = gender["fields"][0]
    cheap = price["categories"].index("$")
    female = price["groups"].index("Female")
    assert price["shares"][female][cheap] == 1.0  # places 00-09 are all "$"
    assert price["shares"][0][cheap] == 0.5  # neutral: places 05-14

    (tmp_path / "cands.yaml").write_text(
        "".join(f"Director {i}: [Film A, Film B, Film C]\n" for i in range(12))
    )
    picked = api.audit(
        lambda prompt: "Film A", attr="gender", seeds=[f"Director {i}" for i in range(12)],
        candidates=str(tmp_path / "cands.yaml"), orders=3, n_resamples=99,
    )  # fmt: skip
    (positions,) = picked.extras["positions"]["attributes"]
    assert positions["measures"]["consistency"][0] == 1.0  # the same film in every order


def test_audit_and_judge_are_exported_at_the_package_top() -> None:
    import pytest_recfair

    assert pytest_recfair.audit is api.audit
    assert pytest_recfair.judge is api.judge
    assert {"audit", "judge", "fairness"} <= set(pytest_recfair.__all__)
    result = pytest_recfair.audit(SimulatedRecommender("demo", seed=7), attr="religion", entities=8)
    assert pytest_recfair.judge(result, result).passed
