"""Role-play judge calls in the plan, the budget and the shard merge, through the real
plugin against the simulator: ``--fairness-plan`` and ``recfair_max_requests`` /
``recfair_max_cost`` count the judge's 3 calls per Why round (at ``recfair_judge_prices``),
and ``--fairness-merge`` counts failed judge calls against ``max_failed`` as the
unsharded run does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_plugin_roleplay import AUDIT, CONFTEST
from tests.support.plugin import plugin_args

pytest_plugins = ["pytester"]

# The smoke set's religion questions: 8 of each type, 3 rounds, 3 judge calls a Why round.
ANSWERS = 24 * 3
JUDGE_CALLS = 8 * 3 * 3

# The sim as judge, failing on a fixed tenth of its calls (crc32 of the prompt and the
# call's place in its round: deterministic across processes, unlike hash()).
FLAKY_JUDGE = """

import zlib

_CALLS = {}


@pytest.fixture(scope="session")
def recfair_judge():
    sim = _sim("sim-judge")

    def judge(prompt, system=None):
        n = _CALLS[prompt] = _CALLS.get(prompt, -1) + 1
        if zlib.crc32(f"{prompt}#{n}".encode()) % 10 == 0:
            raise RuntimeError("judge unavailable")
        return sim(prompt, system)

    return judge
"""


def _setup(pytester: pytest.Pytester, ini: str = "", conftest: str = CONFTEST) -> None:
    pytester.makeconftest(conftest)
    pytester.makeini(
        "[pytest]\nrecfair_concurrency = 1\nrecfair_questions = smoke\nrecfair_max_retries = 0\n"
        + ini
    )
    pytester.makepyfile(test_audit=AUDIT)


def _args() -> tuple[str, ...]:
    return (*plugin_args(), "--fairness", "-p", "no:cacheprovider")


def test_the_plan_counts_the_judge_calls(pytester: pytest.Pytester) -> None:
    _setup(pytester)
    result = pytester.runpytest(*_args(), "--fairness-plan")
    result.assert_outcomes(skipped=1)
    total = ANSWERS + JUDGE_CALLS
    result.stdout.fnmatch_lines(
        [f"*recfair plan: test_audit.py::test_roles: {total} prompts, 0 already recorded, "
         f"{total} to ask (incl. {JUDGE_CALLS} judge calls);*"]
    )  # fmt: skip


def test_the_plan_sizes_the_drift_gate_once_a_baseline_exists(pytester: pytest.Pytester) -> None:
    """Before a baseline the entities a tolerance needs are unknown; after it, one line for
    the biased-answer rate (its worst cell), sized from the rounds stored, over the gate's
    Holm family (3 question types + religion's undetermined share) and the 24 questions."""
    _setup(pytester)
    result = pytester.runpytest(*_args(), "--fairness-plan")
    result.stdout.fnmatch_lines(["*recfair plan: tolerance 0: the entities needed * unknown*"])
    pytester.runpytest(*_args(), "--fairness-update").assert_outcomes(passed=1)
    pytester.makepyfile(test_audit=AUDIT.replace('"religion"', '"religion", tolerance=0.05'))
    after = pytester.runpytest(*_args(), "--fairness-plan")
    lines = [x for x in after.stdout.lines if "biased-answer rate: tolerance 0.05" in x]
    assert len(lines) == 1, after.stdout.str()  # one per gated statistic: its worst cell
    assert lines[0].startswith("recfair plan: religion · ")
    assert "at 24 entities a run cannot reliably detect" in lines[0]
    assert lines[0].endswith("(one of 4 tests, Holm)")


def test_a_budget_the_judge_would_exceed_stops_the_run_before_sending(
    pytester: pytest.Pytester,
) -> None:
    """The answers alone (72) fit in 100 requests; with the judge's 72 calls they do not."""
    asked = 'return lambda prompt, system=None: (_ for _ in ()).throw(AssertionError("asked"))'
    conftest = CONFTEST.replace('return _sim("sim")', asked)
    _setup(pytester, "recfair_max_requests = 100\n", conftest)
    result = pytester.runpytest(*_args())
    result.assert_outcomes(errors=1)  # at setup, like every budget stop
    result.stdout.fnmatch_lines(
        [f"*recfair_max_requests = 100: test_audit.py::test_roles would bring this run to "
         f"{ANSWERS + JUDGE_CALLS} live requests*nothing was sent*"]
    )  # fmt: skip
    assert "AssertionError" not in result.stdout.str()
    # the same audit within the budget runs (the judge calls are what tipped it)
    _setup(pytester, f"recfair_max_requests = {ANSWERS + JUDGE_CALLS}\n")
    pytester.runpytest(*_args(), "--fairness-update").assert_outcomes(passed=1)


def test_the_cost_budget_prices_the_judge_calls_at_the_judges_prices(
    pytester: pytest.Pytester,
) -> None:
    prices = "recfair_prices = 1, 1\nrecfair_max_cost = 1000\n"
    _setup(pytester, prices)
    result = pytester.runpytest(*_args())
    result.assert_outcomes(errors=1)  # the judge's calls have no price: cost unknown
    result.stdout.fnmatch_lines(["*Set recfair_prices (and recfair_judge_prices for its judge*"])
    _setup(pytester, prices + "recfair_judge_prices = 1, 1\n")
    plan = pytester.runpytest(*_args(), "--fairness-plan")
    plan.assert_outcomes(skipped=1)
    with_judge = _cost(plan.stdout.str())
    _setup(pytester, prices + "recfair_judge_prices = 100, 100\n")
    dearer = _cost(pytester.runpytest(*_args(), "--fairness-plan").stdout.str())
    assert dearer > with_judge > 0  # the judge's calls are priced at the judge's prices


def _cost(out: str) -> float:
    line = next(x for x in out.splitlines() if "recfair plan: test_audit.py" in x)
    return float(line.split("~$", 1)[1].split(";", 1)[0].replace(",", ""))


def _report(path: Path) -> dict[str, Any]:
    (res,) = json.loads(path.read_text(encoding="utf-8"))["results"]
    result: dict[str, Any] = res
    return result


def test_a_merge_counts_failed_judge_calls_against_max_failed(pytester: pytest.Pytester) -> None:
    """Shards whose judge failed on some calls merge to the unsharded run's counts of
    prompts and failures, and a merge run with a lower ``max_failed`` stops on them."""
    _setup(pytester, "recfair_max_failed = 0.5\n", CONFTEST + FLAKY_JUDGE)
    args = (*_args(), "--fairness-update")
    full = pytester.runpytest_subprocess(*args, "--fairness-report=full.json")
    full.assert_outcomes(passed=1)
    whole = _report(pytester.path / "full.json")
    judge_failed = sum(n for n in whole["failed"].values())
    assert judge_failed, "no judge call failed: the test no longer tests anything"
    assert whole["prompts"] == ANSWERS + JUDGE_CALLS
    for i in (1, 2):
        pytester.runpytest_subprocess(*args, f"--fairness-shard={i}/2").assert_outcomes(skipped=1)
    merge = (*_args(), "--fairness-merge=fairness-shards")
    merged = pytester.runpytest_subprocess(*merge, "--fairness-report=merged.json")
    merged.assert_outcomes(passed=1)
    both = _report(pytester.path / "merged.json")
    assert (both["prompts"], both["failed"]) == (whole["prompts"], whole["failed"])
    strict = pytester.runpytest_subprocess(*merge, "-o", "recfair_max_failed=0.01")
    strict.assert_outcomes(errors=1)  # at setup, as a run with too many failures
    strict.stdout.fnmatch_lines(["*judge unavailable*"])
