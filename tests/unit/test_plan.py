"""The live-run plan, prices and the budget."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pytest

from pytest_recfair.engine import plan
from pytest_recfair.errors import ConfigError
from pytest_recfair.metrics.inference import t_quantile
from pytest_recfair.providers.pacing import TOKENS_PER_ITEM
from pytest_recfair.settings import resolve, values


@dataclass(frozen=True)
class Case:
    system: str | None
    prompt: str
    k: int = 25


ASK = [Case("You are a recommender.", "x" * 400) for _ in range(100)]
PRICES = values.Prices(1.0, 4.0)


def test_estimate_counts_tokens_cost_and_duration() -> None:
    p = plan.estimate("t::a", ASK, recorded=20, concurrency=8, prices=PRICES)
    assert (p.prompts, p.recorded, p.to_ask) == (120, 20, 100)
    # 422 chars -> 106 tokens + 2 messages x 8 overhead
    assert p.prompt_tokens == 100 * (106 + 16)
    assert p.completion_tokens == 100 * 25 * TOKENS_PER_ITEM
    assert p.cost == pytest.approx((12_200 * 1.0 + 30_000 * 4.0) / 1e6)
    assert p.seconds == 13 * plan.SECONDS_PER_REQUEST  # ceil(100 / 8) waves
    line = p.line()
    assert "120 prompts, 20 already recorded, 100 to ask" in line
    assert "~$0.13" in line
    assert "8 in flight" in line


def test_max_tokens_bounds_the_reply_and_no_prices_no_cost() -> None:
    p = plan.estimate("t::a", ASK, recorded=0, concurrency=64, max_tokens=50)
    assert p.completion_tokens == 100 * 50
    assert p.cost is None
    assert "cost unknown (no prices)" in p.line()


def test_budget_requests_counts_earlier_tests() -> None:
    a = plan.estimate("t::a", ASK, recorded=0, concurrency=8)
    b = plan.estimate("t::b", ASK[:50], recorded=0, concurrency=8)
    budget = plan.Budget(max_requests=140)
    plan.check_budget(budget, [], a)
    with pytest.raises(plan.BudgetExceeded, match=r"^recfair_max_requests = 140: t::b would"):
        plan.check_budget(budget, [a], b)


def test_budget_cost_needs_prices() -> None:
    a = plan.estimate("t::a", ASK, recorded=0, concurrency=8)
    with pytest.raises(plan.BudgetExceeded, match="no prices"):
        plan.check_budget(plan.Budget(max_cost=1.0), [], a)
    priced = plan.estimate("t::a", ASK, recorded=0, concurrency=8, prices=PRICES)
    plan.check_budget(plan.Budget(max_cost=1.0), [], priced)
    with pytest.raises(plan.BudgetExceeded, match=r"estimated \$0\.13"):
        plan.check_budget(plan.Budget(max_cost=0.1), [], priced)


@pytest.mark.parametrize(
    ("given", "want"),
    [
        ("0.15, 0.60", (0.15, 0.6)),
        ("input=0.15 output=0.6", (0.15, 0.6)),
        ("3/15", (3.0, 15.0)),
        ((1, 2), (1.0, 2.0)),
    ],
)
def test_prices(given: object, want: tuple[float, float]) -> None:
    p = values.parse_prices(given)
    assert p is not None
    assert (p.input_per_mtok, p.output_per_mtok) == want


def test_blank_prices() -> None:
    assert values.parse_prices("  ") is None
    assert values.parse_prices(None) is None


@pytest.mark.parametrize("bad", ["cheap", "1", "1,2,3", "-1, 2", (1, "x"), 5])
def test_bad_prices(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"^recfair_prices: expected two prices") as e:
        values.parse_prices(bad)
    assert "\n" not in str(e.value)


def test_budget_keys() -> None:
    """The ini keys recfair_max_requests / recfair_max_cost (blank: no limit), as the
    settings parse them for the budget."""
    blank = resolve(ini={"recfair_max_requests": "", "recfair_max_cost": None})
    assert plan.budget_of(blank) == plan.Budget()
    given = resolve(ini={"recfair_max_requests": "500", "recfair_max_cost": "2.5"})
    assert plan.budget_of(given) == plan.Budget(500, 2.5)
    with pytest.raises(ConfigError, match=r"recfair_max_requests='lots' \(ini\): expected an int"):
        resolve(ini={"recfair_max_requests": "lots"})
    with pytest.raises(ConfigError, match=r"recfair_max_cost=-3.0 \(ini\): expected a number >= 0"):
        resolve(ini={"recfair_max_cost": "-3"})


def test_resolution_scales_the_floor_by_one_over_root_n() -> None:
    """The entities a tolerance needs: where the gate's floor (baseline_floor x the
    baseline's SE, falling as 1/sqrt(n)) reaches it; a subset run gets its shared SE."""
    from pytest_recfair import settings
    from pytest_recfair.gate.thresholds import standard_errors
    from tests.support import synth_results as synth

    base = synth.audit(n_entities=40, noise=0.1)
    ids = base.attributes[0].matrix.entities
    se = standard_errors(base.attributes[0])["snsr"]
    floor = 1.645 * se
    low = settings.resolve(marker={"tolerance": floor / 3})
    (line,) = plan.resolution(low, base, ids)
    needed = re.search(r"needs ~(\d+) entities in baseline and run \(at 40:", line)
    assert needed is not None, line
    assert int(needed.group(1)) in (360, 361)  # 40 x 3 ** 2, rounded up
    assert f"raised to the noise floor {floor:.3g}" in line
    power = t_quantile(0.96, 39) + t_quantile(0.9, 39)  # 4/5 of alpha 0.05: the spreads'
    assert f"rise below ~{floor + power * math.sqrt(2) * se:.3g}" in line
    high = settings.resolve(marker={"tolerance": 2 * floor})
    (line,) = plan.resolution(high, base, ids)
    assert f"tolerance {2 * floor:g} applies (noise floor {floor:.3g} at 40 entities)" in line
    (line,) = plan.resolution(settings.resolve(), base, ids)
    assert "is raised to the noise floor" in line
    sub = plan.resolution(low, base, ids[:10])[0]
    assert "at 10 entities" in sub
    (unknown,) = plan.resolution(low, None, ids)
    assert "unknown until a baseline is recorded" in unknown


def test_other_kinds_resolution_from_their_intervals_and_own_hooks() -> None:
    """A kind's gated number: SE = interval width / 2 z_0.975 at the baseline's entities,
    falling as 1/sqrt(n); a rise of 2 x tolerance is caught 9 in 10 from the entities
    named. Role play: its sign-flip members' SE from the rounds, Holm over its family."""
    from dataclasses import replace
    from statistics import NormalDist

    from pytest_recfair import settings
    from pytest_recfair.engine import registry  # noqa: F401  (registers the kinds' sections)
    from pytest_recfair.metrics.roleplay import Outcome, QuestionResult, RoleplayResult
    from tests.support import synth_results as synth

    z = NormalDist().inv_cdf
    s = settings.resolve(marker={"tolerance": 0.02, "entities": 160})  # the run's size
    rows = [{"attribute": a, "pooled_bias": 0.1, "pooled_bias_ci": ci}
            for a, ci in (("religion", [0.08, 0.12]), ("gender", [0.05, 0.15]))]  # fmt: skip
    base = replace(synth.audit(n_entities=40), extras={"positions": {"attributes": rows}})
    (line,) = [x for x in plan.resolution(s, base, ["e1"]) if "bias" in x]
    noise = (z(0.95) + z(0.9)) * math.sqrt(2) * 0.05 * math.sqrt(40) / z(0.975)  # gender's
    assert line.startswith("gender · position bias: tolerance 0.02 (the margin, never raised)")
    assert f"needs ~{(noise / 0.02) ** 2:,.0f} entities for a rise of 2 x tolerance" in line
    assert "at 160 entities a run cannot reliably detect a position bias rise below " in line
    assert line.endswith(f"~{0.02 + noise / math.sqrt(160):.3g} (one comparison)")
    # two questions of one cell, 3 rounds: 1 and 3 biased; one of another attribute
    asked: list[tuple[str, str, list[Outcome]]] = [
        ("1", "age", ["biased", "unbiased", "unbiased"]),
        ("2", "age", ["biased"] * 3),
        ("3", "race", ["unbiased"] * 3),
    ]
    q = [QuestionResult(i, "r", a, "yesno", True, tuple(o), None) for i, a, o in asked]
    roles = {"roleplay": {"result": RoleplayResult(tuple(q)).to_dict()}}
    s = settings.resolve(marker={"tolerance": 0.02})  # unset: the baseline's 40 entities
    (line,) = plan.resolution(s, replace(base, attributes=(), extras=roles), ["1", "2", "3"])
    # per question x(R - x) / (R - 1) / R^2 of its rounds' spread, + the tolerance
    se = math.sqrt(1 * 2 / 2 / 9 + 0.02 + 0 + 0.02) / 2  # race's one question: not sized
    noise = (z(1 - 0.05 / 4) + z(0.9)) * math.sqrt(2) * se * math.sqrt(2)  # 2 cells + 2 attrs
    assert line.startswith("age · Yes/No · biased-answer rate: tolerance 0.02")
    assert f"needs ~{(noise / 0.02) ** 2 * 40 / 2:,.0f} entities" in line
    assert f"(SE {se:.3g} at 2)" in line  # of its 40 entities, 2 behind this cell
    assert "at 40 entities a run" in line  # of them 2 behind this cell, as in the baseline
    assert line.endswith(f"below ~{0.02 + noise / math.sqrt(2):.3g} (one of 4 tests, Holm)")
