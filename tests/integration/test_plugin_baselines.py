"""Baselines: update writes them; missing, incompatible or broken ones fail and say why."""

from __future__ import annotations

import json
import math
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.support.plugin import RELIGION_TEST, make_project, plugin_args

pytest_plugins = ["pytester"]

TESTS = RELIGION_TEST


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*plugin_args(), "--fairness", *args)


def _baseline(pytester: pytest.Pytester) -> Path:
    files = list((pytester.path / "baselines").rglob("*.json"))
    assert len(files) == 1, files
    return files[0]


def test_missing_baseline_fails_and_says_how_to_create(pytester: pytest.Pytester) -> None:
    make_project(pytester, TESTS)
    result = _run(pytester)
    result.assert_outcomes(failed=1, errors=0)
    result.stdout.fnmatch_lines(
        [
            "*no fairness baseline for test_audit.py::test_religion (expected *baselines*)*",
            "*Create it from this run with: pytest --fairness --fairness-update "
            "'test_audit.py::test_religion'",
        ]
    )
    assert not (pytester.path / "baselines").exists() or not _files(pytester)


def _files(pytester: pytest.Pytester) -> list[Path]:
    return list((pytester.path / "baselines").rglob("*"))


def test_update_writes_then_compare_passes(pytester: pytest.Pytester) -> None:
    make_project(pytester, TESTS)
    result = _run(pytester, "--fairness-update")
    result.assert_outcomes(passed=1)
    path = _baseline(pytester)
    data = json.loads(path.read_text())
    assert data["meta"]["test_id"] == "test_audit.py::test_religion"
    assert data["meta"]["n_entities"] == 12
    result.stdout.fnmatch_lines([f"*fairness baseline written: {path}*"])
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    _run(pytester).assert_outcomes(passed=1)
    # refreshing rewrites the same file
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
    assert _baseline(pytester) == path


def test_incompatible_baseline_refuses_to_compare(pytester: pytest.Pytester) -> None:
    make_project(pytester, TESTS)
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
    result = _run(pytester, "--fairness-entities=10", "--fairness-seed=3")  # another seed set
    result.assert_outcomes(failed=1, errors=0)
    result.stdout.fnmatch_lines(["*baseline not compared:*"])
    result.stdout.fnmatch_lines(["*--fairness-update 'test_audit.py::test_religion'*"])


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda text: text[: len(text) // 2], id="truncated"),
        pytest.param(lambda text: json.dumps({"meta": {"k": "many"}}), id="schema-invalid"),
        pytest.param(lambda text: "", id="empty"),
    ],
)
def test_broken_baseline_fails_with_reason(pytester: pytest.Pytester, damage: object) -> None:
    make_project(pytester, TESTS)
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
    path = _baseline(pytester)
    path.write_text(damage(path.read_text()))  # type: ignore[operator]
    result = _run(pytester)
    result.assert_outcomes(failed=1, errors=0)
    result.stdout.fnmatch_lines(
        [f"*fairness baseline {path} is unusable:*", "*Re-create it from this run with:*"]
    )


def test_changed_model_is_shown(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    make_project(pytester, TESTS)
    pytester.makeconftest(
        """
        import os
        import pytest
        from pytest_recfair.providers import CallableProvider
        from pytest_recfair.sim.recommender import SimulatedRecommender

        @pytest.fixture(scope="session")
        def recfair_recommender():
            sim = SimulatedRecommender(
                bias={"religion": {"Muslim": float(os.environ.get("RECFAIR_TEST_BIAS", "0"))}}
            )
            return CallableProvider(sim, model=os.environ["RECFAIR_TEST_MODEL"])
        """
    )
    monkeypatch.setenv("RECFAIR_TEST_MODEL", "sim-v1")
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
    monkeypatch.setenv("RECFAIR_TEST_MODEL", "sim-v2")
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.5")
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*sim-v1*sim-v2*"])


def test_the_baseline_floor_is_stored_and_shown_in_every_channel(
    pytester: pytest.Pytester,
) -> None:
    """The per-baseline floor (gate/floor.py): the file written by --fairness-update holds
    the baseline's own standard errors; a compare run says its effective tolerance in the
    terminal and the JSON / Markdown reports, and warns when the baseline is too noisy."""
    make_project(pytester, TESTS, ini="recfair_baseline_noise_limit = 0.0001\n")
    pytester.makeconftest(
        """
        import pytest
        from pytest_recfair.providers import CallableProvider
        from pytest_recfair.sim.recommender import SimulatedRecommender

        @pytest.fixture(scope="session")
        def recfair_recommender():
            sim = SimulatedRecommender({"bias": {"religion": {"Muslim": 0.3}}}, noise=0.08)
            return CallableProvider(sim, model="sim")
        """
    )
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
    data = json.loads(_baseline(pytester).read_text())
    se = data["attributes"][0]["standard_error"]
    assert set(se) == {"snsr", "snsv", "pafs", "unusable"}
    assert se["snsr"] > 0
    result = _run(pytester, "-v", "--fairness-report=r.json", "--fairness-report=r.md")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*note: baseline noise floor: 1 gated comparison(s) need a worsening beyond*"]
    )
    result.stdout.fnmatch_lines(["*warning: the baseline is too noisy to gate on*"])
    notes = json.loads((pytester.path / "r.json").read_text())["results"][0]["gate"]["notes"]
    (line,) = [n for n in notes if n.startswith("baseline noise floor")]
    assert f"1.645 x the baseline's own standard error = {1.645 * se['snsr']:.3f}" in line
    assert "baseline noise floor" in (pytester.path / "r.md").read_text()


TOLERANCE_TEST = """
from pytest_recfair import fairness

@fairness(attr="religion", tolerance=0.01)
def test_religion(fairness_result):
    pass
"""


def test_a_tolerance_raised_by_the_floor_is_said_in_every_channel(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """12 entities cannot resolve a tolerance of 0.01: the failure's words say the
    tolerance applied, the floor's, and the one set, in the terminal, JSON, HTML and JUnit."""
    make_project(pytester, TOLERANCE_TEST)
    monkeypatch.setenv("RECFAIR_TEST_NOISE", "0.08")
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
    se = json.loads(_baseline(pytester).read_text())["attributes"][0]["standard_error"]["snsr"]
    assert 1.645 * se > 0.01  # the floor raises the tolerance
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.6")
    out = ("r.json", "r.html")
    result = _run(pytester, *(f"--fairness-report={p}" for p in out), "--junitxml=j.xml")
    result.assert_outcomes(failed=1)
    words = f"tolerance {1.645 * se:.3g} (noise floor of the baseline; 0.01 set)"
    words_out = result.stdout.str()
    # the headline says the tolerance applied and why; -v and the reports the full words
    headline = f"tolerance {1.645 * se:.3g} (noise floor; 0.01 set)"
    assert headline in words_out
    (failure,) = json.loads((pytester.path / "r.json").read_text())["results"][0]["gate"][
        "failures"
    ]
    assert failure["tolerance"] == 0.01
    assert failure["limit"] == pytest.approx(1.645 * se)
    assert words in failure["message"]
    assert words in (pytester.path / "r.html").read_text()
    needed = math.ceil(12 * (1.645 * se / 0.01) ** 2)
    # the floor's note (left to -v in the terminal) says from how many entities it would
    assert (
        f"(the tolerance applies from ~{needed:,} entities in baseline and run)"
        in (pytester.path / "r.html").read_text()
    )
    junit = ElementTree.parse(pytester.path / "j.xml")
    assert any(headline in (f.text or "") for f in junit.iter("failure"))


def test_a_noise_free_model_gets_intervals_as_tight_as_its_noise(
    pytester: pytest.Pytester,
) -> None:
    """The noise-free simulator: most entities score the same in every value and a few
    differ. No interval of the report or the stored baseline is [0, 1] while its standard
    error is small, and each holds its estimate."""
    make_project(pytester, TESTS.replace('attr="religion"', 'attr="religion", entities=20'))
    pytester.makeconftest(
        """
        import pytest
        from pytest_recfair.sim.recommender import SimulatedRecommender

        @pytest.fixture(scope="session")
        def recfair_recommender():
            return SimulatedRecommender("demo", noise=0.0)
        """
    )
    result = _run(pytester, "--fairness-update", "--fairness-report=r.json")
    result.assert_outcomes(passed=1)
    stored = json.loads(_baseline(pytester).read_text())["attributes"][0]
    (reported,) = json.loads((pytester.path / "r.json").read_text())["results"][0]["attributes"]
    for attribute in (stored, reported):
        for stat in ("snsr", "snsv", "pafs"):
            value, (lo, hi) = attribute[stat]["value"], attribute[stat]["ci"]
            assert lo - 1e-9 <= value <= hi + 1e-9, (stat, value, lo, hi)
            assert stored["standard_error"][stat] < 0.1, stat
            assert hi - lo < 0.5, (stat, lo, hi)


def test_the_plan_says_the_entities_a_tolerance_needs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--fairness-plan: before a baseline the entities needed are unknown; after it, those
    at which the baseline's noise floor (1.645 x its SE, falling as 1/sqrt(n)) reaches the
    tolerance asked, from the SE stored in the file."""
    make_project(pytester, TOLERANCE_TEST)
    monkeypatch.setenv("RECFAIR_TEST_NOISE", "0.08")
    before = _run(pytester, "--fairness-plan")
    before.assert_outcomes(skipped=1)
    before.stdout.fnmatch_lines(
        ["recfair plan: tolerance 0.01: the entities needed to resolve it are unknown until*"]
    )
    _run(pytester, "--fairness-update").assert_outcomes(passed=1)
    se = json.loads(_baseline(pytester).read_text())["attributes"][0]["standard_error"]["snsr"]
    needed = math.ceil(12 * (1.645 * se / 0.01) ** 2)
    after = _run(pytester, "--fairness-plan")
    after.stdout.fnmatch_lines(
        [
            f"recfair plan: religion (jaccard) SNSR: tolerance 0.01 needs ~{needed:,} entities "
            f"in baseline and run (at 12: raised to the noise floor {1.645 * se:.3g} = 1.645 x "
            f"SE {se:.3g}); at 12 entities a run cannot reliably detect an SNSR rise below ~*"
        ]
    )
