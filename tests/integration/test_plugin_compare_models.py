"""Comparing models (issue 11 point 4): a parametrized recfair_recommender audits two models
served over real HTTP by two loopback simulators, each recorded to cassettes and gated
against its own baseline, shown side by side in the summary and every report."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.integration.test_html_report import _chromium
from tests.integration.test_html_report import _run as _run_chromium
from tests.support.plugin import plugin_args, subprocess_env

pytest_plugins = ["pytester"]

KEY = "sk-compare-test-0123456789"

# the fixture is parametrized; the test does not name it
CONFTEST = """
import os

import pytest

from pytest_recfair import providers


@pytest.fixture(scope="session", params=["sim-fair", "sim-biased"])
def recfair_recommender(request):
    return providers.from_config(
        "openai",
        model=request.param,
        base_url=os.environ["RECFAIR_URL_" + request.param.replace("-", "_").upper()],
        api_key_env="RECFAIR_COMPARE_KEY",
    )
"""

TESTS = """
import pytest

from pytest_recfair import fairness


@fairness(attr="religion")
def test_religion():
    pass


@pytest.mark.fairness(attr="gender")
def test_gender():
    pass
"""

INI = "[pytest]\nrecfair_entities = 12\nrecfair_n_resamples = 400\n"

Servers = dict[str, SimServer]
CELL = r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]"  # an SNSR with its interval


def _sim(bias: float, seed: int) -> SimulatedRecommender:
    return SimulatedRecommender(bias={"religion": {"Muslim": bias}}, noise=0.15, seed=seed)


def _serve(monkeypatch: pytest.MonkeyPatch, sims: dict[str, SimulatedRecommender]) -> Servers:
    servers = {}
    for name, sim in sims.items():
        server = SimServer(sim, model=name, api_key=KEY).__enter__()
        servers[name] = server
        monkeypatch.setenv("RECFAIR_URL_" + name.replace("-", "_").upper(), server.base_url)
    return servers


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    monkeypatch.setenv("RECFAIR_COMPARE_KEY", KEY)
    pytester.makeconftest(CONFTEST)
    pytester.makeini(INI)
    pytester.makepyfile(test_audit=TESTS)
    # the biased model moves 60% of the list away for religion = Muslim; both are noisy
    servers = _serve(monkeypatch, {"sim-fair": _sim(0.0, 1), "sim-biased": _sim(0.6, 2)})
    yield servers
    for server in servers.values():
        server.__exit__(None, None, None)


def _reports(pytester: pytest.Pytester) -> list[str]:
    return [f"--fairness-report={pytester.path / ('r.' + ext)}" for ext in ("json", "md", "html")]


def _record(pytester: pytest.Pytester, servers: Servers) -> None:
    """Record both models (each its own requests) and write their baselines; then stop
    the servers, so every later run replays."""
    args = (*plugin_args(), "--fairness", "--fairness-record=once", "--fairness-update")
    pytester.runpytest(*args).assert_outcomes(passed=4)
    for server in servers.values():
        server.__exit__(None, None, None)


def _json(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    return data


def _group(data: dict[str, Any], name: str) -> dict[str, Any]:
    found = [m for m in data["models"] if m["group"] == f"test_audit.py::{name}"]
    assert len(found) == 1, data.get("models")
    group: dict[str, Any] = found[0]
    return group


def test_two_models_side_by_side(pytester: pytest.Pytester, project: Servers) -> None:
    _record(pytester, project)
    # the replay: no server runs; each model's recordings answer its own prompts
    result = pytester.runpytest(*plugin_args(), "--fairness", *_reports(pytester))
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    for name in ("religion", "gender"):
        for model in ("sim-fair", "sim-biased"):
            assert re.search(rf"PASS\s+test_{name}\[{model}\]\s", out), out
    # the summary: the models as columns, then the paired verdicts
    # the summary (80 columns here): the models as columns, then the paired verdicts
    result.stdout.re_match_lines(
        [
            r"\s+models side by side — test_audit.py::test_religion — SNSR \[95% CI\] per model,",
            r"\s+attribute\s+sim-fair\s+sim-biased$",
            r"\s+model id\s+sim-fair\s+sim-biased$",
            rf"\s+religion\s+{CELL}\s+{CELL}$",
            r"\s+✓ religion: sim-fair is significantly fairer than sim-biased \(SNSR",
        ],
        consecutive=False,
    )
    section = out.split("models side by side")[1].split("fairness report written")[0]
    assert max(len(line) for line in section.splitlines()) <= 80
    data = _json(pytester)
    religion = _group(data, "test_religion")
    assert religion["models"] == ["sim-fair", "sim-biased"]
    assert religion["model_ids"] == ["sim-fair", "sim-biased"]
    fair, biased = religion["snsr"][0]
    assert fair["value"] < biased["value"]
    assert fair["ci"][1] < biased["ci"][0]  # the planted bias stands clear of the fair model
    (pair,) = religion["pairs"]
    assert pair["fairer"] == "sim-fair"
    assert pair["p_value"] <= religion["alpha"]
    assert pair["n_paired"] == 12
    # gender has no planted bias in either model: no significant difference
    (gender_pair,) = _group(data, "test_gender")["pairs"]
    assert gender_pair["fairer"] is None
    assert "no significant difference" in gender_pair["message"]
    markdown = (pytester.path / "r.md").read_text(encoding="utf-8")
    assert "### Models side by side" in markdown
    assert "| attribute | sim-fair | sim-biased |" in markdown
    assert "sim-fair is significantly fairer than sim-biased" in markdown
    _check_html(pytester.path / "r.html", pytester.path)


def _check_html(path: Path, tmp_path: Path) -> None:
    """The side-by-side section as Chromium renders it: both columns, the verdict."""
    chromium = _chromium()
    done = _run_chromium(chromium, tmp_path, "--dump-dom", path.as_uri())
    dom = done.stdout
    section = re.search(r'<section class="test models" id="models">(.*?)</section>', dom, re.S)
    assert section is not None, f"no models section; chromium said:\n{done.stderr[-2000:]}"
    body = section.group(1)
    assert re.search(r"<th>attribute</th><th>sim-fair</th><th>sim-biased</th>", body)
    assert body.count("<table>") == 2  # religion and gender
    fairer = re.findall(r"<li>✓ ([^<]*)</li>", body)
    assert fairer == [
        next(f for f in fairer if f.startswith("religion: sim-fair is significantly fairer"))
    ]
    assert re.search(r"<li>= gender: sim-fair vs sim-biased: no significant", body)


def test_same_numbers_under_xdist_and_random_order(
    pytester: pytest.Pytester, project: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    _record(pytester, project)
    report = pytester.path / "r.json"
    pytester.runpytest(*plugin_args(), "--fairness", f"--fairness-report={report}")
    sequential = _json(pytester)["models"]
    subprocess_env(monkeypatch)
    # another order (given on the command line), two workers
    shuffled = [
        "test_audit.py::test_religion[sim-biased]",
        "test_audit.py::test_gender[sim-fair]",
        "test_audit.py::test_religion[sim-fair]",
        "test_audit.py::test_gender[sim-biased]",
    ]
    args = ("-n", "2", "--fairness", f"--fairness-report={report}", *shuffled)
    result = pytester.runpytest_subprocess(*plugin_args(), *args)
    result.assert_outcomes(passed=4)
    assert _json(pytester)["models"] == sequential


def test_each_model_has_its_own_baseline_and_gate(
    pytester: pytest.Pytester, project: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    _record(pytester, project)
    baselines = sorted(p.name for p in (pytester.path / "baselines").glob("*.json"))
    assert baselines == [
        "test_gender-sim-biased.json",
        "test_gender-sim-fair.json",
        "test_religion-sim-biased.json",
        "test_religion-sim-fair.json",
    ]
    stored = json.loads((pytester.path / "baselines" / baselines[2]).read_text())
    assert stored["meta"]["model"] == "sim-biased"
    # the biased model gets worse, the fair one stays: re-record both, gate each alone
    servers = _serve(monkeypatch, {"sim-fair": _sim(0.0, 1), "sim-biased": _sim(0.9, 2)})
    try:
        result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-record=all")
    finally:
        for server in servers.values():
            server.__exit__(None, None, None)
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_audit.py::test_religion[[]sim-biased[]]*"])


CALLABLE_CONFTEST = """
import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender

SIMS = {
    "fair": SimulatedRecommender(noise=0.15, seed=1),
    "biased": SimulatedRecommender(bias={"religion": {"Muslim": 0.6}}, noise=0.15, seed=2),
}


@pytest.fixture(scope="session")
def recfair_recommender(request):
    return SIMS[getattr(request, "param", "fair")]
"""

WAYS = """
import pytest

from pytest_recfair import fairness

pytestmark = fairness(attr="religion")


def test_module_marked():
    pass


class TestInAClass:
    def test_method(self):
        pass


@pytest.mark.parametrize("recfair_recommender", ["fair", "biased"], indirect=True)
def test_parametrized_by_mark():
    pass
"""


def test_every_way_of_marking_runs_each_model(pytester: pytest.Pytester) -> None:
    """A module-level or class mark, and the test's own indirect parametrize, all run once
    per model of an in-process callable recommender (never recorded)."""
    pytester.makeconftest(
        CALLABLE_CONFTEST.replace(
            '@pytest.fixture(scope="session")',
            '@pytest.fixture(scope="session", params=["fair", "biased"])',
        )
    )
    pytester.makeini(INI)
    pytester.makepyfile(test_ways=WAYS)
    report = pytester.path / "r.json"
    args = ("--fairness", "--fairness-update", f"--fairness-report={report}")
    result = pytester.runpytest(*plugin_args(), *args)
    result.assert_outcomes(passed=6)
    ids = {r["meta"]["test_id"] for r in json.loads(report.read_text())["results"]}
    assert ids == {
        "test_ways.py::test_module_marked[fair]",
        "test_ways.py::test_module_marked[biased]",
        "test_ways.py::TestInAClass::test_method[fair]",
        "test_ways.py::TestInAClass::test_method[biased]",
        "test_ways.py::test_parametrized_by_mark[fair]",
        "test_ways.py::test_parametrized_by_mark[biased]",
    }
    groups = json.loads(report.read_text())["models"]
    assert len(groups) == 3
    for g in groups:
        assert g["models"] == ["fair", "biased"]
        assert g["pairs"][0]["fairer"] == "fair"
    assert not (pytester.path / "fixtures").exists()  # callables are not recorded


def test_a_plain_fixture_is_untouched(pytester: pytest.Pytester) -> None:
    """Without parameters the fixture is not made a dependency: ids stay as they were and
    there is no side-by-side section."""
    pytester.makeconftest(CALLABLE_CONFTEST)
    pytester.makeini(INI)
    pytester.makepyfile(test_ways=WAYS.split("@pytest.mark.parametrize")[0])
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_ways.py::test_module_marked PASSED*"])
    assert "models side by side" not in result.stdout.str()
