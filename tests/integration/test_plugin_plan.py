"""Time, money, progress (issue 10 point 4): the plan before any live request, the budget,
the progress line in a real terminal (pty) and off one (pytester), tokens and cost in
the summary and reports. The recommender is the simulator over real HTTP on loopback.
"""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.support.plugin import RELIGION_AND_GENDER_TESTS, REPO, plugin_args
from tests.support.pty_run import run_in_pty

pytest_plugins = ["pytester"]

TESTS = RELIGION_AND_GENDER_TESTS


@pytest.fixture
def sim() -> Iterator[SimServer]:
    """The simulator on loopback, 20 ms per answer (so a run takes a while)."""
    with SimServer(SimulatedRecommender("demo", seed=0), latency_ms=20) as server:
        yield server


def _ini(server: SimServer, extra: str = "", entities: int = 6) -> str:
    return (
        textwrap.dedent(
            f"""
            [pytest]
            recfair_entities = {entities}
            recfair_n_resamples = 50
            recfair_concurrency = 2
            recfair_provider = openai
            recfair_model = recfair-sim
            recfair_base_url = {server.base_url}
            recfair_prices = 1.0, 4.0
            """
        )
        + extra
    )


def _plan_line(out: str, test: str) -> tuple[int, int, int]:
    """(prompts, already recorded, to ask) of the printed plan of ``test``."""
    m = re.search(
        rf"^recfair plan: \S*::{test}: ([\d,]+) prompts, ([\d,]+) already recorded, "
        r"([\d,]+) to ask; (?:~[\d,]+ input \+ ~[\d,]+ output tokens, ~\$[\d.,]+; 2 in flight, ~"
        r"|nothing will be sent$)",
        out,
        re.MULTILINE,
    )
    assert m, out
    prompts, recorded, ask = (int(g.replace(",", "")) for g in m.groups())
    return prompts, recorded, ask


def test_fairness_plan_alone_sends_nothing(pytester: pytest.Pytester, sim: SimServer) -> None:
    pytester.makeini(_ini(sim))
    pytester.makepyfile(test_plan_audit=TESTS)
    result = pytester.runpytest(
        *plugin_args(), "--fairness", "--fairness-plan", "--fairness-record=once"
    )
    result.assert_outcomes(skipped=2)
    out = result.stdout.str()
    religion = _plan_line(out, "test_religion")
    gender = _plan_line(out, "test_gender")
    assert religion[1] == gender[1] == 0  # nothing recorded yet
    assert religion[0] == religion[2] > 0
    assert sim.stats.requests == 0  # the plan sent nothing
    result.stdout.fnmatch_lines(["*= fairness plan =*", "fairness plan: 2 audit(s), *"])
    assert not (pytester.path / "fixtures").exists()  # and recorded nothing

    # a live run prints each plan first and sends exactly what they say (the gender
    # test's neutral prompts were recorded by the religion test just before: the store
    # is shared, so its plan counts them as recorded)
    live = pytester.runpytest(
        *plugin_args(), "--fairness", "--fairness-record=once", "--fairness-update"
    )
    live.assert_outcomes(passed=2)
    out = live.stdout.str()
    assert _plan_line(out, "test_religion") == religion
    live_gender = _plan_line(out, "test_gender")
    assert live_gender[0] == gender[0]
    assert sim.stats.requests == religion[2] + live_gender[2]
    # -q: each plan still starts a line of its own (pytest's "s" letters end no line)
    again = pytester.runpytest(
        *plugin_args(), "--fairness", "--fairness-plan", "--fairness-record=once", "-q"
    )
    again.assert_outcomes(skipped=2)
    assert _plan_line(again.stdout.str(), "test_religion") == (religion[0], religion[0], 0)
    assert _plan_line(again.stdout.str(), "test_gender") == (gender[0], gender[0], 0)
    assert sim.stats.requests == religion[2] + live_gender[2]


def test_budget_refuses_to_start(pytester: pytest.Pytester, sim: SimServer) -> None:
    pytester.makeini(_ini(sim, "recfair_max_requests = 10\n"))
    pytester.makepyfile(test_plan_audit=TESTS)
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-record=once")
    assert sim.stats.requests == 0
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) + outcomes.get("errors", outcomes.get("error", 0)) == 2
    lines = [x for x in result.stdout.lines if "recfair_max_requests = 10:" in x]
    assert lines, result.stdout.str()
    assert "nothing was sent for it" in lines[0]
    assert "Traceback" not in result.stdout.str()

    pytester.makeini(_ini(sim, "recfair_max_cost = 0.00001\n"))
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-record=once")
    assert sim.stats.requests == 0
    result.stdout.fnmatch_lines(
        ["*recfair_max_cost = 1e-05: *would bring this run to an estimated $*"]
    )


def test_progress_off_a_terminal_is_a_line_per_tenth(
    pytester: pytest.Pytester, sim: SimServer
) -> None:
    """pytester's output is not a terminal: no carriage returns, a line per tenth once
    the run lasts over 2 s (6 entities x 31 prompts at 2 in flight, 20 ms each: ~2 s)."""
    pytester.makeini(_ini(sim, entities=12))
    pytester.makepyfile(
        test_plan_audit="""
        from pytest_recfair import fairness

        @fairness()
        def test_all(fairness_result):
            pass
        """
    )
    result = pytester.runpytest(
        *plugin_args(), "--fairness", "--fairness-record=once", "--fairness-update"
    )
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "\r" not in out
    progress = [x for x in result.stdout.lines if re.match(r"recfair: [\d,]+/[\d,]+ \(\d+%\)", x)]
    assert progress, out
    assert len(progress) <= 10
    total = _plan_line(out, "test_all")[2]
    assert progress[-1].startswith(f"recfair: {total:,}/{total:,} (100%)")
    assert re.search(r"[\d,]+ tokens  \$[\d.]+$", progress[-1]), progress[-1]


def test_plan_and_progress_line_in_a_real_terminal(tmp_path: Path, sim: SimServer) -> None:
    (tmp_path / "pytest.ini").write_text(_ini(sim, entities=12))
    (tmp_path / "test_pty_audit.py").write_text(
        "from pytest_recfair import fairness\n\n@fairness()\ndef test_all(fairness_result):\n"
        "    pass\n"
    )
    report = tmp_path / "report.json"
    argv = [
        sys.executable,
        "-m",
        "pytest",
        *plugin_args(),
        "-p",
        "no:cacheprovider",
        "--fairness",
        "--fairness-record=once",
        "--fairness-update",
        f"--fairness-report={report}",
    ]
    code, out = run_in_pty(argv, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert code == 0, out
    _, recorded, ask = _plan_line(out, "test_all")
    assert recorded == 0
    assert sim.stats.requests == ask
    # the line is redrawn in place: carriage returns, several states, the last one complete
    frames = re.findall(r"\r(recfair: [\d,]+/[\d,]+ \(\d+%\)[^\r\n]*)", out)
    assert len(frames) >= 2, out
    assert frames[-1].startswith(f"recfair: {ask:,}/{ask:,} (100%)")
    assert re.search(r"ETA \d+:\d\d", " ".join(frames[:-1]))
    assert re.search(r"\d+\.\d/s .*0 failed  [\d,]+ tokens  \$\d+\.\d{4}", frames[-1])
    # tokens and cost in the summary and the report
    summary = out[out.index("fairness summary") :]
    assert re.search(r"tokens: [\d,]+ input \+ [\d,]+ output; cost \$\d+\.\d{4}", summary), summary
    data = json.loads(report.read_text())
    audit = data["results"][0] if "results" in data else data["audits"][0]
    assert audit["prompt_tokens"] > 0
    assert audit["cost"] == pytest.approx(
        (audit["prompt_tokens"] * 1.0 + audit["completion_tokens"] * 4.0) / 1e6
    )
