"""Shared helpers of the tests/integration/test_plugin_*.py files (not a test module)."""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def plugin_args() -> tuple[str, ...]:
    """``-p pytest_recfair.plugin`` unless the installed entry point loads it already.

    Loading it both ways would register the module twice, which pluggy refuses. The
    hypothesis plugin is switched off: pytester drops modules imported during an
    in-process run, so every run would import (and assertion-rewrite) hypothesis again.
    So is langsmith's (installed with langchain-openai, a test extra): it costs a
    pytester subprocess over a second of start-up and no test uses it.
    """
    quiet = ("-p", "no:hypothesispytest", "-p", "no:langsmith_plugin")
    for ep in importlib.metadata.entry_points(group="pytest11"):
        if ep.value == "pytest_recfair.plugin":
            return quiet
    return ("-p", "pytest_recfair.plugin", *quiet)


def before_summary(out: str) -> str:
    """A run's output up to pytest's short test summary.

    pytest repeats each error's message there, cut to the terminal width, except where the
    ``CI`` variable is set (as on the CI machine): a message counted in the whole output
    would count twice there only.
    """
    return out.split("short test summary info", 1)[0]


def subprocess_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let a pytester subprocess import the package from this checkout."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))


# A conftest for pytester projects: the in-process simulated recommender, its planted bias
# on religion = Muslim, noise and seed read from the environment so one project can be
# re-run as "the old model" and "the new model".
CONFTEST = """
import os

import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender


@pytest.fixture(scope="session")
def recfair_recommender():
    return SimulatedRecommender(
        bias={"religion": {"Muslim": float(os.environ.get("RECFAIR_TEST_BIAS", "0"))}},
        noise=float(os.environ.get("RECFAIR_TEST_NOISE", "0")),
        seed=int(os.environ.get("RECFAIR_TEST_SIM_SEED", "0")),
    )
"""

# Small audits keep the suite fast: 12 entities, 200 bootstrap resamples.
INI = "[pytest]\nrecfair_entities = 12\nrecfair_n_resamples = 200\n"


def make_project(pytester: pytest.Pytester, tests: str, *, ini: str = "") -> None:
    """A pytester project with the simulated recommender and ``tests`` as its test file."""
    pytester.makeconftest(CONFTEST)
    pytester.makeini(INI + ini)
    pytester.makepyfile(test_audit=tests)


# Test modules for pytester projects: one audited test, and two.
RELIGION_TEST = """
from pytest_recfair import fairness

@fairness(attr="religion")
def test_religion():
    pass
"""
RELIGION_AND_GENDER_TESTS = """
from pytest_recfair import fairness

@fairness(attr="religion")
def test_religion():
    pass

@fairness(attr="gender")
def test_gender():
    pass
"""


def assert_shards_merge_to_the_full_audit(pytester: pytest.Pytester, shards: int = 3) -> None:
    """Shard runs 1..N, then a merge run: its JSON report equals the unsharded run's
    (against the same baseline), and the merge never asks the recommender."""
    args = (*plugin_args(), "-p", "no:cacheprovider")
    pytester.runpytest(*args, "--fairness", "--fairness-update").assert_outcomes(passed=1)
    full = pytester.runpytest(*args, "--fairness", "--fairness-report=full.json")
    full.assert_outcomes(passed=1)
    for i in range(1, shards + 1):
        part = pytester.runpytest(*args, "--fairness", f"--fairness-shard={i}/{shards}", "-rs")
        part.assert_outcomes(skipped=1)
    conftest = pytester.path / "conftest.py"
    conftest.write_text(
        conftest.read_text()
        + "\n\n@pytest.fixture(scope='session')\ndef recfair_recommender():\n"
        + "    raise RuntimeError('the merge asked the recommender')\n"
    )
    merged = pytester.runpytest(
        *args, "--fairness", "--fairness-merge=fairness-shards", "--fairness-report=merged.json"
    )
    merged.assert_outcomes(passed=1)
    a = json.loads((pytester.path / "full.json").read_text())["results"]
    b = json.loads((pytester.path / "merged.json").read_text())["results"]
    for audit in (*a, *b):
        audit["meta"].pop("record_mode", None)
    assert b == a


#: What only a list-overlap result holds: its settings (in meta) and its tables (beside it).
LIST_OVERLAP_ONLY = frozenset(
    {"grid", "grid_hash", "templates", "templates_hash", "domain", "k", "metric", "variant"}
    | {"language", "perturbation", "missing", "parse", "attributes", "merges", "extras"}
)


def assert_fields_absent(doc: dict[str, object], absent: frozenset[str], where: str) -> None:
    """A JSON result (report entry, baseline, history entry, shard) holds none of ``absent``
    in its meta or beside it: a kind's result says only what applies to it."""
    meta = doc["meta"]
    assert isinstance(meta, dict), where
    found = sorted((set(meta) | set(doc)) & absent)
    assert not found, f"{where} ({meta.get('kind')}) carries {found}"


def run_demo_counted(
    pytester: pytest.Pytester, report: Path, *args: str, **env: str
) -> pytest.RunResult:
    """``pytest --fairness`` of the demo copied into ``pytester.path``, in a subprocess, with
    its ``recfair_counter`` plugin module and ``env`` set (this suite's xdist variables
    unset: the inner run is no worker); its ten audits passed."""
    with pytest.MonkeyPatch.context() as mp:
        for name in [k for k in os.environ if k.startswith("PYTEST_XDIST_")]:
            mp.delenv(name)
        for name, value in env.items():
            mp.setenv(name, value)
        mp.setenv("PYTHONPATH", str(pytester.path), prepend=os.pathsep)
        result = pytester.runpytest_subprocess(
            "--fairness", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "recfair_counter",
            f"--fairness-report={report}", *args,
        )  # fmt: skip
    result.assert_outcomes(passed=10)
    return result
