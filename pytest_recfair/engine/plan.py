"""The plan of a live run, printed before any live request; its token/cost/duration guesses
and the budget :class:`Ledger` xdist workers share (a locked file: xdist's channel runs
one way while tests run). Cost only from the user's prices, never guessed. No pytest here."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Final

from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.engine import registry, stream
from pytest_recfair.engine.base import AuditRequest
from pytest_recfair.errors import ConfigError, RecfairError
from pytest_recfair.gate import thresholds as floors
from pytest_recfair.metrics import inference
from pytest_recfair.providers.adapter import CallableProvider, is_in_process
from pytest_recfair.providers.base import Usage
from pytest_recfair.providers.batch_api import flock
from pytest_recfair.providers.http import HTTPProvider
from pytest_recfair.providers.pacing import CaseText, known_limits, prompt_tokens, request_tokens
from pytest_recfair.providers.pipeline import Allowance
from pytest_recfair.providers.transport import CassetteTransport, case_extensions
from pytest_recfair.report.sections import kind_sections
from pytest_recfair.results import AuditResult
from pytest_recfair.settings import AuditSettings
from pytest_recfair.settings.values import Prices
from pytest_recfair.vocab import HIGHER_IS_FAIRER, STATISTICS

#: A hosted model writing 25 titles takes a few seconds; the loopback simulator far less.
SECONDS_PER_REQUEST: Final = 4.0


class BudgetExceeded(ConfigError):
    """A live run would send more requests or cost more than the configured budget."""


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
    # a Python pipeline's model calls per recorded prompt (0.0: none yet; None: no pipeline)
    calls_per_prompt: float | None = None
    intercepted: bool = False  # intercept="vcr": one prompt at a time

    @property
    def requests(self) -> int:
        """Live requests: to_ask x a pipeline's recorded calls per prompt (at least 1)."""
        return math.ceil(self.to_ask * max(1.0, self.calls_per_prompt or 1.0))

    def line(self) -> str:
        counts = (
            f"{self.test_id}: {self.prompts:,} prompts, {self.recorded:,} already recorded, "
            f"{self.to_ask:,} to ask"
        )
        per = self.calls_per_prompt
        known = f"{per:.1f} recorded" if per else "unknown before the first recording"
        calls = "" if per is None else f"; pipeline model calls per prompt: {known}"
        if not self.to_ask:
            return f"{counts}; nothing will be sent{calls}"
        cost = f"~${self.cost:,.2f}" if self.cost is not None else "cost unknown (no prices)"
        took = f"~{_duration(self.seconds)}" if self.seconds is not None else "duration unknown"
        if self.judge_calls:
            counts += f" (incl. {self.judge_calls:,} judge calls)"
        return (
            f"{counts}; ~{self.prompt_tokens:,} input + "
            f"~{self.completion_tokens:,} output tokens, {cost}; {self.concurrency} in flight,"
            f" {took}"
            + (f" (paced to {self.pace})" if self.pace else "")
            + calls
            + (" (vcrpy interception: one prompt at a time)" if self.intercepted else "")
        )


def total_line(plans: Sequence[Plan]) -> str:
    """One line for every plan of the run."""
    asked = sum(p.to_ask for p in plans)
    costs = [p.cost for p in plans if p.to_ask]
    cost = "cost unknown (no prices)" if None in costs else f"~${sum(c or 0.0 for c in costs):,.2f}"
    return (
        f"fairness plan: {len(plans)} audit(s), {sum(p.prompts for p in plans):,} prompts, "
        f"{sum(p.recorded for p in plans):,} already recorded, {asked:,} to ask, {cost}"
    )


def resolution(
    settings: AuditSettings, baseline: AuditResult | None, entities: Sequence[str]
) -> list[str]:
    """Per gated statistic (its least resolved attribute): the entities a baseline needs for
    the tolerance to be the margin (max(tolerance, baseline_floor x SE), SE ~ 1/sqrt(n)),
    and the smallest worsening a run of ``entities`` catches 9 times in 10: margin +
    (t_{1-a} + t_0.9) x sqrt(2) x SE, n0 - 1 df (docs/baselines.md checks by simulation)."""
    if baseline is None:
        return [
            f"tolerance {settings.tolerance:g}: the entities needed to resolve it are unknown "
            "until a baseline is recorded (its standard errors set the gate's noise floor)"
        ]
    ids = set(entities)
    tol, factor = settings.tolerance, settings.baseline_floor
    out = []
    for stat in (g for g in settings.gated if g in STATISTICS):
        rows = []
        for a in baseline.attributes:
            shared = ids & set(a.matrix.entities) or None  # none shared: the gate uses all
            se = floors.standard_errors(a, shared)[stat]
            n0 = len(shared or a.matrix.entities)
            if math.isfinite(se):
                needed = n0 * (factor * se / tol) ** 2 if tol > 0 else math.inf if se > 0 else 0.0
                rows.append((needed, f"{a.attribute} ({a.metric})", n0, se))
        if not rows:
            continue
        needed, where, n0, se = max(rows, key=lambda row: row[0])  # the least resolved
        floor = factor * se
        word = "drop" if stat in HIGHER_IS_FAIRER else "rise"
        head = f"{where} {stat.upper()}: tolerance {tol:g}"
        if floor <= tol:
            state = f"applies (noise floor {floor:.3g} at {n0} entities)"
        elif math.isinf(needed):
            state = f"is raised to the noise floor {floor:.3g}: no baseline is free of noise"
        else:
            state = (
                f"needs ~{math.ceil(needed):,} entities in baseline and run (at {n0}: "
                f"raised to the noise floor {floor:.3g} = {factor:g} x SE {se:.3g})"
            )
        # the spreads' share of alpha, and t for an error estimated from n0 entities
        level = 1.0 - settings.alpha * (1.0 - inference.UNUSABLE_ALPHA)
        power = inference.t_quantile(level, n0 - 1) + inference.t_quantile(0.9, n0 - 1)
        mde = max(tol, floor) + power * math.sqrt(2.0) * se
        out.append(
            f"{head} {state}; at {n0} entities a run cannot reliably detect an "
            f"{stat.upper()} {word} below ~{mde:.3g} (one comparison)"
        )
    return out + _kind_lines(settings, baseline)


def _kind_lines(settings: AuditSettings, baseline: AuditResult) -> list[str]:
    """The other kinds' gated numbers, each its least resolved (docs/baselines.md)."""
    tol, z, n_b = settings.tolerance, NormalDist().inv_cdf, getattr(baseline.meta, "n_entities", 1)
    n_run, worst = settings.entities or n_b, dict[str, tuple[float, str, int, int]]()
    for sections, data in kind_sections(baseline):
        own = getattr(sections, "resolution", None)
        rows = own(data, settings) if own is not None else [
            (label, (s.ci.high - s.ci.low) / (2 * z(0.975)), n_b, 1)
            for label, s in getattr(sections, "series", lambda _: [])(data) if s.ci
        ]  # fmt: skip
        for label, se, n, m in rows:
            where, _, stat = label.rpartition(" · ")
            if n > 1 and math.isfinite(se) and se > worst.get(stat, (-1.0,))[0]:
                worst[stat] = (se, where, n, m)  # the largest SE needs the most entities
    out = []
    for stat, (se, where, n, m) in worst.items():
        noise = (z(1.0 - settings.alpha / m) + z(0.9)) * math.sqrt(2.0) * se  # at n entities
        mde = tol + noise * math.sqrt(n / max(1.0, n * n_run / n_b))  # n: this number's share
        need = f"~{(noise / tol) ** 2 * n_b:,.0f} entities" if tol > 0 else "no entities"
        out.append(
            f"{where} · {stat}: tolerance {tol:g} (the margin, never raised) needs {need} for"
            f" a rise of 2 x tolerance to be caught 9 times in 10 (SE {se:.3g}"
            f" at {n}); at {n_run} entities a run cannot reliably detect a {stat} rise below"
            f" ~{mde:.3g}" + (f" (one of {m} tests, Holm)" if m > 1 else " (one comparison)")
        )
    return out


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{max(1, math.ceil(seconds))} s"
    minutes = seconds / 60
    return f"{minutes:.0f} min" if minutes < 90 else f"{minutes / 60:.1f} h"


def estimate(
    test_id: str,
    to_ask: Sequence[CaseText],
    *,
    recorded: int,
    concurrency: int,
    max_tokens: int | None = None,
    prices: Prices | None = None,
    seconds_per_request: float | None = SECONDS_PER_REQUEST,
    rpm: float | None = None,
    tpm: float | None = None,
) -> Plan:
    """The plan for asking ``to_ask``; ``rpm`` / ``tpm``: the provider's known limits."""
    prompt_total = sum(map(prompt_tokens, to_ask))
    completion_tokens = sum(request_tokens(c, max_tokens) for c in to_ask) - prompt_total
    waves = math.ceil(len(to_ask) / max(1, concurrency))
    seconds = None if seconds_per_request is None else waves * seconds_per_request
    slowest = max(
        ((n / limit * 60.0, f"{limit:,.0f} {what}/min")
         for n, limit, what in ((len(to_ask), rpm, "requests"),
                                (prompt_total + completion_tokens, tpm, "tokens"))
         if limit and n),
        default=None,
    )  # fmt: skip
    pace = ""
    if slowest is not None and (seconds is None or slowest[0] > seconds):
        seconds, pace = slowest
    cost = Usage(prompt_total, completion_tokens).cost(prices) if prices else None
    n = len(to_ask)
    return Plan(test_id, n + recorded, recorded, n, prompt_total, completion_tokens, cost,
                concurrency, seconds, pace)  # fmt: skip


def with_judge(main: Plan, judge: Plan) -> Plan:
    """``main`` plus ``judge``'s calls at its prices; cost unknown when either is unpriced."""
    if not judge.to_ask:
        return main
    costs, took = (main.cost if main.to_ask else 0.0, judge.cost), (main.seconds, judge.seconds)
    return dataclasses.replace(
        main,
        **{k: getattr(main, k) + getattr(judge, k) for k in ("prompt_tokens", "completion_tokens")},
        **{k: getattr(main, k) + judge.to_ask for k in ("prompts", "to_ask", "judge_calls")},
        cost=None if None in costs else sum(c or 0.0 for c in costs),
        seconds=None if took == (None, None) else sum(t or 0.0 for t in took),
    )


def check_budget(budget: Budget, spent: Iterable[Plan], plan: Plan) -> None:
    """Raise BudgetExceeded if ``plan`` on top of the plans already run passes the budget."""
    before = list(spent)
    requests = sum(p.requests for p in before) + plan.requests
    if budget.max_requests is not None and requests > budget.max_requests:
        raise BudgetExceeded(
            f"recfair_max_requests = {budget.max_requests:,}: {plan.test_id} would bring "
            f"this run to {requests:,} live requests ({plan.requests:,} for this test); "
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


def allowance(
    settings: AuditSettings, spent: Iterable[Plan], planned: Plan | None
) -> Allowance | None:
    """A pipeline's live calls' budget (network default) less earlier plans; else None."""
    if planned is None or planned.calls_per_prompt is None:
        return None
    requests, cost = dataclasses.astuple(budget_of(settings, network=True))
    before = list(spent)
    return Allowance(
        requests=None if requests is None else max(0, requests - sum(p.requests for p in before)),
        cost=None if cost is None else max(0.0, cost - sum(p.cost or 0.0 for p in before)),
        prices=settings.prices,
    )


#: Live prompts one run may send to an HTTP recommender unless recfair_max_requests is set
#: (the quickstart's first recording, 20 entities, asks ~720).
DEFAULT_MAX_REQUESTS: Final = 2_000
#: Estimated USD one run may spend unless recfair_max_cost is set (needs recfair_prices).
DEFAULT_MAX_COST: Final = 5.0


def budget_of(
    settings: AuditSettings, planned: Plan | None = None, *, network: bool | None = None
) -> Budget:
    """The settings' limits if either is set, else a networked (timed) recommender's defaults."""
    if network is None:
        network = planned is not None and planned.seconds is not None
    requests, cost = settings.max_requests, settings.max_cost
    if not network or requests is not None or cost is not None:
        return Budget(requests, cost)  # a budget the user set is the budget
    return Budget(DEFAULT_MAX_REQUESTS, DEFAULT_MAX_COST if settings.prices is not None else None)


@dataclasses.dataclass(frozen=True)
class Ledger:
    """The plans of one run, shared by its processes."""

    path: Path

    def reserve(self, limits: Budget | None, planned: Plan) -> None:
        """Record ``planned`` for all workers; BudgetExceeded past ``limits`` (None: no limit)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            flock(fd, block=True)  # Windows: workers not serialised
            if limits is not None:
                check_budget(limits, self.plans(), planned)
            line = json.dumps(dataclasses.asdict(planned), sort_keys=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        finally:
            os.close(fd)

    def plans(self) -> list[Plan]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out = []
        for number, line in enumerate(text.splitlines(), 1):
            try:
                out.append(Plan(**json.loads(line)))
            except (ValueError, TypeError) as exc:
                raise ConfigError(
                    f"budget ledger {self.path} line {number} is not a plan ({exc}); it is "
                    "this run's own file: re-run."
                ) from None
        return out


def audit_plan(request: AuditRequest, cassette_root: Path) -> Plan:
    """The plan of this audit's run (of its shard's share, with a shard)."""
    settings, recommender, test_id = request.settings, request.recommender, request.test_id
    kind = registry.kind_for(settings)
    cases = stream.all_cases(kind, request)
    store = CassetteStore(cassette_root, settings.record_mode, autosave=None)
    calls: dict[str, int] | None = None  # a pipeline's: case id -> its recorded model calls
    found: set[str] = set()  # the ids of cases with a valid (2xx) recording
    if isinstance(recommender, CallableProvider):
        wanted = {c.id for c in cases} if store.policy.replays else set()
        entities = sorted({c.entity_id for c in cases if c.id in wanted})
        recorded = (case for e in entities for case, _, _ in store.recorded(e))
        found = set(calls := dict(Counter(case for case in recorded if case in wanted)))
    elif store.policy.replays and not is_in_process(recommender):
        if isinstance(recommender, HTTPProvider):
            store.add_secrets(recommender.secrets)
        replayer = CassetteTransport(store, test_id=test_id)
        for case in cases:
            built = recommender.build_request(case.system, case.prompt)
            built.extensions = {**built.extensions, **case_extensions(case)}
            try:
                response = replayer.replay(built)
            except RecfairError:  # a miss the record mode would not record: not recorded
                continue
            if response is not None and 200 <= response.status_code < 300:
                found.add(case.id)
    to_ask = [c for c in cases if c.id not in found]
    # paced by the configured limit, else by what this process's replies said
    seen_rpm, seen_tpm = known_limits(recommender)
    vcr = settings.intercept == "vcr"  # vcrpy interception: one prompt at a time
    main = estimate(
        test_id,
        to_ask,
        recorded=len(found),
        concurrency=1 if vcr else settings.concurrency,
        max_tokens=settings.max_tokens or getattr(recommender, "max_tokens", None),
        prices=settings.prices,
        seconds_per_request=None if is_in_process(recommender) else SECONDS_PER_REQUEST,
        rpm=settings.rpm or seen_rpm,
        tpm=settings.tpm or seen_tpm,
    )
    if calls is not None:
        per_prompt = sum(calls.values()) / len(calls) if calls else 0.0
        main = dataclasses.replace(main, calls_per_prompt=per_prompt, intercepted=vcr)
    judge, more = request.inputs.judge, getattr(kind, "planned_follow_up", None)
    if more is None or judge is None:
        return main
    judged = estimate(
        test_id,
        more(settings, to_ask),
        recorded=0,
        concurrency=settings.concurrency,
        max_tokens=getattr(judge, "max_tokens", None),
        prices=settings.judge_prices,
        seconds_per_request=None if is_in_process(judge) else SECONDS_PER_REQUEST,
    )
    return with_judge(main, judged)
