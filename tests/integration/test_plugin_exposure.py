"""Exposure audits through pytest, over loopback HTTP to the simulator: item groups' share
of the top-K slots against the catalogue or a history, the gate, drift, bad settings."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import pytest_recfair.engine.registry  # noqa: F401  (the kinds' sections)
from pytest_recfair.report.history import load_run
from pytest_recfair.report.sections import series
from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.support.plugin import (
    assert_shards_merge_to_the_full_audit,
    before_summary,
    plugin_args,
    subprocess_env,
)

pytest_plugins = ["pytester"]

AUDIT = """
from pytest_recfair import fairness


@fairness(kind="exposure", attr="gender", grid="fairllm", domain="restaurant", k=10,
          seeds="cities", catalogue="catalogue.csv", SETTINGS)
def test_exposure(fairness_result):
    pass
"""


@pytest.fixture(autouse=True)
def _this_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    subprocess_env(monkeypatch)


GATED = 'item_field="plays", bins=5, max_exposure_gap=0.05, max_popularity_lift=0.05'


def _catalogue(path: Path) -> Path:
    """100 places; plays rise with the index, so tier Qn is the n-th plays quintile."""
    rows = ["title,tier,plays,cuisine"]
    rows += [f"Cafe {i:03d},Q{i // 20 + 1},{(i + 1) * 37},{'thai' if i % 2 else 'diner'}"
             for i in range(100)]  # fmt: skip
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _sim(catalogue: Path, **plan: Any) -> SimulatedRecommender:
    items = {"catalogue": str(catalogue), "field": "tier", "domain": "restaurant", **plan}
    return SimulatedRecommender(bias={"items": items})


def _project(pytester: pytest.Pytester, srv: SimServer, settings: str, ini: str = "") -> None:
    pytester.makeini(
        "[pytest]\nrecfair_provider = openai\nrecfair_model = recfair-sim-1\n"
        f"recfair_base_url = {srv.base_url}\nrecfair_n_resamples = 300\n"
        "recfair_record_mode = new_episodes\n" + ini
    )
    pytester.makepyfile(test_audit=AUDIT.replace("SETTINGS", settings))
    pytester.makeconftest(
        "import pytest\n\n\n@pytest.fixture\ndef cities():\n"
        "    return [f'Town {i}' for i in range(60)]\n"
    )


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", *args)


def _report(pytester: pytest.Pytester) -> Mapping[str, Any]:
    doc = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    exposure: Mapping[str, Any] = doc["results"][0]["exposure"]
    return exposure


def test_fair_model_passes_and_the_report_holds_every_group(pytester: pytest.Pytester) -> None:
    cat = _catalogue(pytester.path / "catalogue.csv")
    with SimServer(_sim(cat)) as srv:
        _project(pytester, srv, GATED)
        result = _run(pytester, "--fairness", "--fairness-update", "--fairness-report=r.json")
        result.assert_outcomes(passed=1)
        assert srv.stats.requests == 60 * 5  # neutral + 4 gender values per town
    ex = _report(pytester)
    assert ex["groups"] == ["Q1", "Q2", "Q3", "Q4", "Q5"]
    assert ex["reference_share"] == [0.2] * 5
    assert all(abs(s - 0.2) < 0.05 for s in ex["share"])
    assert ex["matched"]["matched"] == ex["matched"]["total"] == 300 * 10
    assert ex["long_tail"] == pytest.approx(0.8, abs=0.05)
    assert 0 < ex["gini"] < 0.5
    assert ex["coverage"] == 1.0
    assert [v for _, v in ex["values"]] == ["Boy", "Female", "Girl", "Male"]
    assert all(abs(x) < 0.05 for x in ex["lift"])


def test_exposure_moved_to_the_head_fails_and_names_the_groups(
    pytester: pytest.Pytester,
) -> None:
    cat = _catalogue(pytester.path / "catalogue.csv")
    # 10 points of every list move from the tail quintile to the head quintile, and
    # prompts for a girl get 40% of their mix from the head (popularity lift)
    sim = _sim(cat, mix={"Q1": 0.5, "Q5": 1.5}, shift={"Girl": {"Q5": 0.4}})
    with SimServer(sim) as srv:
        _project(pytester, srv, GATED)
        result = _run(pytester, "--fairness", "--fairness-report=r.json", "-v")
    result.assert_outcomes(failed=1)
    out = before_summary(result.stdout.str())
    for group in ("Q1", "Q5"):
        assert f"plays group '{group}' took" in out
    assert "plays group 'Q3'" not in out
    assert "Girl: popularity lift +0." in out
    assert "Male: popularity lift" not in out
    assert "evidence plays: the 5 items that took most exposure" in out
    ex = _report(pytester)
    # every list: +0.10 to the head; the girl's lists (1 in 5) 40% more of theirs
    assert ex["gap"][4] == pytest.approx(0.1 + 0.4 * 0.7 / 5, abs=0.03)
    assert all(abs(g) < 0.03 for g in ex["gap"][1:4])
    assert ex["ratio"][0] < 0.75


def test_drift_against_the_baseline_and_history_reference(pytester: pytest.Pytester) -> None:
    """A history file as the reference; then a model that leans to the head, under the
    absolute limits, fails against the stored baseline."""
    cat = _catalogue(pytester.path / "catalogue.csv")
    rows = ["title,count"] + [f"Cafe {i:03d},{1 + (i >= 80)}" for i in range(100)]
    (pytester.path / "history.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    settings = 'item_field="tier", reference="history.csv"'
    with SimServer(_sim(cat)) as srv:
        _project(pytester, srv, settings)
        _run(pytester, "--fairness", "--fairness-update", "--fairness-report=r.json")
    ex = _report(pytester)
    assert ex["reference_share"][4] == pytest.approx(40 / 120)
    assert ex["history"]["matched"] == ex["history"]["total"] == 100
    with SimServer(_sim(cat, mix={"Q1": 0.4, "Q5": 1.6})) as srv:
        _project(pytester, srv, settings)
        again = _run(pytester, "--fairness", "--fairness-record=all", "--fairness-report=b.json")
    again.assert_outcomes(failed=1)
    # its headline names the measure that got worse (-v: the detail)
    again.stdout.fnmatch_lines(
        ["  tier exposure long-tail share 0.* → 0.* (-0.*, tolerance 0, p *"]
    )
    # the two stored runs compared by the gate's own test: each measure, family-wise
    run = subprocess.run(
        [sys.executable, "-m", "pytest_recfair", "compare", "r.json", "b.json", "--format",
         "json"], cwd=pytester.path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    rows = {r["statistic"]: r for r in json.loads(run.stdout)["rows"]}
    assert set(rows) == {"MGU", "long-tail share", "max |lift|"}
    assert all(r["test"] == "paired entity bootstrap, Holm" for r in rows.values())
    tail = rows["long-tail share"]
    assert (tail["a"], tail["n_paired"]) == (pytest.approx(ex["long_tail"], abs=1e-6), 60)
    assert tail["b"] < tail["a"]
    assert tail["worse"]
    # and the headline numbers the history chart plots, each with its interval
    result = load_run(pytester.path / "b.json").results[0]
    plotted = dict(series(result))
    assert set(plotted) == {"tier exposure · MGU", "tier exposure · DGU"}  # lower: fairer
    stat = plotted["tier exposure · MGU"]
    assert stat.ci is not None
    assert stat.value == pytest.approx(rows["MGU"]["b"], abs=1e-6)  # stored to 6 places
    assert stat.ci.low <= stat.value <= stat.ci.high


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ('item_field="stars"', "has no field 'stars'; its fields are tier, cuisine, plays"),
        ('item_field="cuisine", bins=5', "*bins=5*field 'cuisine'*is text*"),
        ('item_field="plays"', "*numeric with more than 20 values; give bins=5*"),
        ('item_field="tier", reference="empty.csv"', "*history file*holds no interactions*"),
        ('item_field="tier", reference="nope.csv"', "*no such history file*"),
    ],
)
def test_bad_settings_stop_before_the_first_request(
    pytester: pytest.Pytester, settings: str, message: str
) -> None:
    cat = _catalogue(pytester.path / "catalogue.csv")
    (pytester.path / "empty.csv").write_text("title,count\n", encoding="utf-8")
    with SimServer(_sim(cat)) as srv:
        _project(pytester, srv, settings)
        result = _run(pytester, "--fairness")
        assert srv.stats.requests == 0
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*test_exposure: *{message}"])


def test_replay_renders_every_channel_with_the_recorded_numbers(
    pytester: pytest.Pytester,
) -> None:
    """Recorded over loopback, replayed with the server gone: the same numbers, and the
    exposure section in the terminal, JSON, Markdown, HTML and JUnit; the plan counts its
    prompts as recorded; under xdist the same numbers."""
    cat = _catalogue(pytester.path / "catalogue.csv")
    with SimServer(_sim(cat, mix={"Q5": 1.3})) as srv:
        _project(pytester, srv, 'item_field="plays", bins=5')
        _run(pytester, "--fairness", "--fairness-update", "--fairness-report=r.json")
    recorded = _report(pytester)
    again = _run(
        pytester, "--fairness", "--fairness-record=none", "--fairness-report=r.json",
        "--fairness-report=r.md", "--fairness-report=r.html", "--junitxml=j.xml",
    )  # fmt: skip
    again.assert_outcomes(passed=1)
    assert _report(pytester) == recorded
    # the short summary: the test's line with its largest gap (Q5, planted) and group
    gaps = dict(zip(recorded["groups"], recorded["gap"], strict=True))
    assert max(gaps, key=lambda g: abs(gaps[g])) == "Q5"
    line = f"PASS*test_exposure*plays: largest exposure gap +{gaps['Q5']:.3f} (Q5)"
    again.stdout.fnmatch_lines([line])
    assert "plays exposure vs catalogue: MGU" in (pytester.path / "r.md").read_text()
    assert "Item exposure: plays" in (pytester.path / "r.html").read_text()
    assert 'name="recfair.exposure.plays.mgu"' in (pytester.path / "j.xml").read_text()
    plan = _run(pytester, "--fairness", "--fairness-plan", "--fairness-record=none")
    assert "300 prompts, 300 already recorded, 0 to ask" in plan.stdout.str()
    workers = _run(pytester, "--fairness", "-n", "2", "--fairness-report=r.json", "-v")
    workers.assert_outcomes(passed=1)
    assert _report(pytester) == recorded  # the same numbers from an xdist worker
    flat = " ".join(workers.stdout.str().split())  # the summary's lines, unwrapped
    assert "Item exposure: plays — plays exposure vs catalogue: MGU 0.0" in flat
    # each group's share against the reference's: a row of the groups table
    row = r"Q1: share 0\.\d{3} \[.*?, reference 0\.\d{3}, "  # a line a row, or columns:
    assert re.search(row, flat) or re.search(r"group share weighted reference .*? Q1 0\.", flat)


def test_shards_merge_to_the_unsharded_exposure_audit(pytester: pytest.Pytester) -> None:
    cat = _catalogue(pytester.path / "catalogue.csv")
    pytester.makeconftest(
        "import pytest\nfrom pytest_recfair.sim.recommender import SimulatedRecommender\n\n\n"
        "@pytest.fixture(scope='session')\ndef recfair_recommender():\n"
        f"    items = {{'catalogue': {str(cat)!r}, 'field': 'tier', 'domain': 'restaurant',"
        " 'mix': {'Q5': 1.3}}\n    return SimulatedRecommender(bias={'items': items})\n\n\n"
        "@pytest.fixture\ndef cities():\n    return [f'Town {i}' for i in range(24)]\n"
    )
    pytester.makeini("[pytest]\nrecfair_n_resamples = 100\n")
    pytester.makepyfile(test_audit=AUDIT.replace("SETTINGS", 'item_field="plays", bins=5'))
    assert_shards_merge_to_the_full_audit(pytester)


def test_batch_recording_gives_the_numbers_of_a_synchronous_one(pytester: pytest.Pytester) -> None:
    cat = _catalogue(pytester.path / "catalogue.csv")
    with SimServer(_sim(cat, mix={"Q5": 1.3})) as srv:
        _project(pytester, srv, 'item_field="plays", bins=5', "recfair_batch_poll = 0.05\n")
        batch = _run(pytester, "--fairness", "--fairness-batch", "--fairness-update")
        batch.assert_outcomes(passed=1)
        assert srv.batches.created == 1
        assert srv.stats.outcomes["ok"] == 0, "no synchronous request was sent"
        _run(pytester, "--fairness", "--fairness-record=none", "--fairness-report=r.json")
        from_batch = _report(pytester)
        shutil.rmtree(pytester.path / "fixtures" / "cassettes")
        _run(pytester, "--fairness", "--fairness-report=r.json").assert_outcomes(passed=1)
    assert _report(pytester) == from_batch
