"""The plan of a live run: what will be asked, roughly what it costs and how long it takes,
and the budget that refuses to start beyond a limit.

Printed before any live request (and alone with ``--fairness-plan``, which sends nothing).
Token counts are estimates: about 4 characters per prompt token plus a small per-message
overhead, and for the reply ``max_tokens`` when set, else about 12 tokens per asked item
(a numbered title with its year). Cost needs the user's prices (USD per million input and
output tokens); without them it is left out, never guessed. Duration assumes
:data:`SECONDS_PER_REQUEST` per request, ``concurrency`` at a time, and no less than the
requests- and tokens-per-minute limits allow when one is set or was seen.

Pure: stdlib only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from pytest_recfair.errors import ConfigError

__all__ = [
    "SECONDS_PER_REQUEST",
    "Budget",
    "BudgetExceeded",
    "Plan",
    "Prices",
    "check_budget",
    "estimate",
    "parse_budget",
    "parse_prices",
    "request_tokens",
    "total_line",
    "with_judge",
]

CHARS_PER_TOKEN: Final = 4.0
MESSAGE_OVERHEAD_TOKENS: Final = 8
TOKENS_PER_ITEM: Final = 12
#: A hosted model writing 25 titles takes a few seconds; the loopback simulator far less.
SECONDS_PER_REQUEST: Final = 4.0


class BudgetExceeded(ConfigError):
    """A live run would send more requests or cost more than the configured budget."""


class _Case(Protocol):
    @property
    def system(self) -> str | None: ...
    @property
    def prompt(self) -> str: ...


@dataclass(frozen=True)
class Prices:
    """USD per million input (prompt) and output (completion) tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok
        ) / 1e6


@dataclass(frozen=True)
class Budget:
    """Limits of one pytest run; None means no limit."""

    max_requests: int | None = None
    max_cost: float | None = None


@dataclass(frozen=True)
class Plan:
    """One audited test's live run, before it starts."""

    test_id: str
    prompts: int
    recorded: int
    to_ask: int
    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    concurrency: int
    seconds: float | None  # None: not estimated (an in-process recommender)
    pace: str = ""  # the limit that sets the duration ("600 requests/min"), if one does
    judge_calls: int = 0  # of to_ask: calls to a judge model (with_judge)

    def line(self) -> str:
        counts = (
            f"{self.test_id}: {self.prompts:,} prompts, {self.recorded:,} already recorded, "
            f"{self.to_ask:,} to ask"
        )
        if not self.to_ask:
            return f"{counts}; nothing will be sent"
        cost = f"~${self.cost:,.2f}" if self.cost is not None else "cost unknown (no prices)"
        took = f"~{_duration(self.seconds)}" if self.seconds is not None else "duration unknown"
        if self.judge_calls:
            counts += f" (incl. {self.judge_calls:,} judge calls)"
        return (
            f"{counts}; ~{self.prompt_tokens:,} input + "
            f"~{self.completion_tokens:,} output tokens, {cost}; {self.concurrency} in flight,"
            f" {took}" + (f" (paced to {self.pace})" if self.pace else "")
        )


def total_line(plans: Sequence[Plan]) -> str:
    """One line for every plan of the run."""
    asked = sum(p.to_ask for p in plans)
    costs = [p.cost for p in plans if p.to_ask]
    cost = (
        f"~${sum(c or 0.0 for c in costs):,.2f}"
        if all(c is not None for c in costs)
        else "cost unknown (no prices)"
    )
    return (
        f"fairness plan: {len(plans)} audit(s), {sum(p.prompts for p in plans):,} prompts, "
        f"{sum(p.recorded for p in plans):,} already recorded, {asked:,} to ask, {cost}"
    )


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{max(1, math.ceil(seconds))} s"
    minutes = seconds / 60
    return f"{minutes:.0f} min" if minutes < 90 else f"{minutes / 60:.1f} h"


def _prompt_tokens(case: _Case) -> int:
    chars = len(case.prompt) + len(case.system or "")
    return math.ceil(chars / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS * (2 if case.system else 1)


def request_tokens(case: _Case, max_tokens: int | None) -> int:
    """Tokens one request may use, prompt plus reply, before it is sent (what the plan
    counts, and what the runner's pacer debits until the reply's usage corrects it)."""
    return _prompt_tokens(case) + (max_tokens or TOKENS_PER_ITEM * getattr(case, "k", 1))


def estimate(
    test_id: str,
    to_ask: Sequence[_Case],
    *,
    recorded: int,
    concurrency: int,
    max_tokens: int | None = None,
    prices: Prices | None = None,
    seconds_per_request: float | None = SECONDS_PER_REQUEST,
    rpm: float | None = None,
    tpm: float | None = None,
) -> Plan:
    """The plan for asking ``to_ask`` (the prompts without a valid recording); ``rpm`` /
    ``tpm``: the requests / tokens per minute the provider allows, when known."""
    prompt_tokens = sum(map(_prompt_tokens, to_ask))
    # a case without k (a candidate pick) asks for one item
    completion_tokens = sum(max_tokens or TOKENS_PER_ITEM * getattr(c, "k", 1) for c in to_ask)
    waves = math.ceil(len(to_ask) / max(1, concurrency))
    seconds = None if seconds_per_request is None else waves * seconds_per_request
    paced = [
        (n / limit * 60.0, f"{limit:,.0f} {what}/min")
        for n, limit, what in (
            (len(to_ask), rpm, "requests"),
            (prompt_tokens + completion_tokens, tpm, "tokens"),
        )
        if limit and n
    ]
    slowest = max(paced, default=None)
    pace = ""
    if slowest is not None and (seconds is None or slowest[0] > seconds):
        seconds, pace = slowest
    return Plan(
        test_id=test_id,
        prompts=len(to_ask) + recorded,
        recorded=recorded,
        to_ask=len(to_ask),
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost=prices.cost(prompt_tokens, completion_tokens) if prices else None,
        concurrency=concurrency,
        seconds=seconds,
        pace=pace,
    )


# --- judge calls (role-play Why answers: a second model judges each answer 3 times)


def with_judge(main: Plan, judge: Plan) -> Plan:
    """``main`` with the judge calls of ``judge`` (estimated at the judge's prices) added:
    the budget counts them like any request; cost unknown when either is unpriced."""
    if not judge.to_ask:
        return main
    costs = (main.cost if main.to_ask else 0.0, judge.cost)
    seconds = (main.seconds or 0.0) + (judge.seconds or 0.0)
    return dataclasses.replace(
        main,
        prompts=main.prompts + judge.to_ask,
        to_ask=main.to_ask + judge.to_ask,
        prompt_tokens=main.prompt_tokens + judge.prompt_tokens,
        completion_tokens=main.completion_tokens + judge.completion_tokens,
        cost=None if None in costs else sum(c or 0.0 for c in costs),
        seconds=None if main.seconds is None and judge.seconds is None else seconds,
        judge_calls=main.judge_calls + judge.to_ask,
    )


def check_budget(budget: Budget, spent: Iterable[Plan], plan: Plan) -> None:
    """Raise BudgetExceeded if ``plan`` on top of the plans already run passes the budget."""
    before = list(spent)
    requests = sum(p.to_ask for p in before) + plan.to_ask
    if budget.max_requests is not None and requests > budget.max_requests:
        raise BudgetExceeded(
            f"recfair_max_requests = {budget.max_requests:,}: {plan.test_id} would bring "
            f"this run to {requests:,} live requests ({plan.to_ask:,} for this test); "
            "nothing was sent for it. Raise recfair_max_requests, audit fewer entities "
            "(--fairness-entities), or run --fairness-plan to see every test's share."
        )
    if budget.max_cost is None:
        return
    if plan.cost is None and plan.to_ask:
        raise BudgetExceeded(
            f"recfair_max_cost = {budget.max_cost:g} is set but no prices are: the cost of "
            f"{plan.test_id} cannot be estimated, so nothing was sent. Set recfair_prices "
            f"{'(and recfair_judge_prices for its judge calls) ' if plan.judge_calls else ''}"
            "(USD per million input and output tokens, e.g. '0.15, 0.60')."
        )
    cost = sum(p.cost or 0.0 for p in before) + (plan.cost or 0.0)
    if cost > budget.max_cost:
        raise BudgetExceeded(
            f"recfair_max_cost = {budget.max_cost:g}: {plan.test_id} would bring this run "
            f"to an estimated ${cost:,.2f}; nothing was sent for it. Raise recfair_max_cost "
            "or audit fewer entities (--fairness-entities)."
        )


_NUMBER = r"\s*(\d+(?:\.\d*)?|\.\d+)\s*"
_PRICES = re.compile(rf"^(?:input\s*=)?{_NUMBER}[,;/ ]\s*(?:output\s*=)?{_NUMBER}$", re.I)


def parse_prices(value: object, name: str = "recfair_prices") -> Prices | None:
    """``"0.15, 0.60"`` / ``"input=0.15 output=0.60"`` / ``(0.15, 0.6)`` -> Prices; blank ->
    None; anything else a one-line ConfigError naming ``name``."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    nums: Sequence[object] = ()
    if isinstance(value, list | tuple) and len(value) == 2:
        nums = value
    else:
        m = _PRICES.match(value) if isinstance(value, str) else None
        nums = (m.group(1), m.group(2)) if m else ()
    try:
        inp, out = (float(n) for n in nums)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        inp = out = -1.0
    if not (inp >= 0 and out >= 0 and math.isfinite(inp + out)):
        raise ConfigError(
            f"{name}: expected two prices in USD per million tokens, input then output, "
            f"e.g. '0.15, 0.60', got {value!r}; copy them from your provider's price list"
        )
    return Prices(inp, out)


def parse_budget(max_requests: object, max_cost: object) -> Budget:
    """The ini keys recfair_max_requests / recfair_max_cost (blank = no limit)."""
    requests = _limit(max_requests, "recfair_max_requests", whole=True)
    return Budget(
        max_requests=None if requests is None else int(requests),
        max_cost=_limit(max_cost, "recfair_max_cost", whole=False),
    )


def _limit(value: object, name: str, *, whole: bool) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    number = -1.0
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            number = float(int(value.strip()) if whole else float(value.strip()))
    elif isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value) if not whole or float(value).is_integer() else -1.0
    if number < 0 or not math.isfinite(number):
        what = "a whole number of requests" if whole else "an amount in USD"
        raise ConfigError(
            f"{name}: expected {what} >= 0, got {value!r}; leave it empty for no limit"
        )
    return number
