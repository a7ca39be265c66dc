"""The simulator's role-play answers (sim/planted.py) and its hook in the recommender."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from pytest_recfair.errors import DataError
from pytest_recfair.metrics.roleplay import (
    choice_outcome,
    collect,
    score_question,
    why_outcome,
    yesno_outcome,
)
from pytest_recfair.metrics.roleplay_gate import drift_test
from pytest_recfair.prompts.roles import (
    JUDGE_REPEATS,
    RoleCase,
    build_role_cases,
    judge_case_id,
    judge_messages,
    load_roles,
)
from pytest_recfair.sim.planted import RolePlan, RolePlaySim, roleplay_qtype
from pytest_recfair.sim.recommender import SimulatedRecommender

QUESTIONS = load_roles("smoke").questions


def _rate(sim: RolePlaySim, attribute: str, *, with_role: bool = True, rounds: int = 60) -> float:
    cases = [
        c
        for c in build_role_cases(QUESTIONS, repeats=1, with_role=with_role)
        if c.attribute == attribute and c.qtype == "yesno"
    ]
    hits = total = 0
    for c in cases:
        for r in range(rounds):
            answer = sim.answer(c.user, c.system, r)
            assert answer is not None
            hits += yesno_outcome(answer.text) == "biased"
            total += 1
    return hits / total


def test_planted_role_bias_raises_the_rate_only_with_the_role() -> None:
    fair = RolePlaySim(RolePlan(), seed=1)
    planted = RolePlaySim(RolePlan.parse({"role_bias": {"religion": 0.10}}), seed=1)
    base = _rate(fair, "religion")
    assert 0 < base < 0.5
    assert _rate(planted, "religion") - base == pytest.approx(0.10, abs=0.04)
    assert _rate(planted, "age") == _rate(fair, "age")  # other attributes untouched
    assert _rate(planted, "religion", with_role=False) == _rate(fair, "religion", with_role=False)


def test_answers_are_deterministic_and_rounds_independent() -> None:
    c = build_role_cases(QUESTIONS[:1])[0]
    a, b = RolePlaySim(seed=3), RolePlaySim(seed=3)
    assert [a.answer(c.user, c.system, r) for r in range(20)] == [
        b.answer(c.user, c.system, r) for r in range(20)
    ]
    assert len({a.answer(c.user, c.system, r).kind for r in range(200)}) >= 2  # type: ignore[union-attr]


def test_answer_shapes_are_read_by_the_oracles() -> None:
    sim = RolePlaySim(
        RolePlan.parse({"refusal": 0.2, "base": {"yesno": 0.5, "choice": 0.5, "why": 0.5}}), seed=0
    )
    kinds = set()
    for c in build_role_cases([q for q in QUESTIONS if q.attribute == "gender"], repeats=5):
        ans = sim.answer(c.user, c.system, c.repeat)
        assert ans is not None
        kinds.add((c.qtype, ans.kind))
        if c.qtype == "yesno":
            got = yesno_outcome(ans.text)
        elif c.qtype == "choice":
            got = choice_outcome(ans.text, c.options)
        else:
            judge = judge_messages(c.question, ans.text)
            verdicts = [sim.answer(judge[1]["content"], judge[0]["content"], j) for j in range(3)]
            assert all(
                v is not None and v.kind == "judge" and v.text.rstrip(".") in ("Yes", "No")
                for v in verdicts
            )
            got = why_outcome(ans.text, [v.text for v in verdicts if v is not None])
        if ans.kind == "refusal":
            assert got == "refusal"
        elif c.qtype != "why":  # the judge errs now and then (judge_noise)
            assert got == ans.kind, (c.user, ans)
    assert {k for _, k in kinds} == {"biased", "unbiased", "refusal"}


def test_noiseless_judge_follows_the_answer() -> None:
    sim = RolePlaySim(
        RolePlan.parse({"judge_noise": 0, "base": {"why": 0.5}, "refusal": 0}), seed=2
    )
    for c in build_role_cases([q for q in QUESTIONS if q.qtype == "why"][:20]):
        ans = sim.answer(c.user, c.system, c.repeat)
        assert ans is not None
        judge = judge_messages(c.question, ans.text)
        texts = [sim.answer(judge[1]["content"], judge[0]["content"], j) for j in range(3)]
        outcomes, _ = score_question("why", [ans.text], judges=[[t.text for t in texts if t]])
        assert outcomes[0] == ans.kind


def test_recommender_hook_answers_roleplay_prompts_only() -> None:
    rec = SimulatedRecommender(bias={"roleplay": {"role_bias": {"religion": 0.5}}}, seed=4)
    c = next(c for c in build_role_cases(QUESTIONS) if c.qtype == "choice")
    reply = rec.respond(c.user, c.system)
    assert reply.items == ()
    assert choice_outcome(reply.text, c.options) in ("biased", "unbiased", "refusal")
    assert roleplay_qtype(c.user) == "choice"
    assert roleplay_qtype("Recommend 10 films like those of Agnès Varda.") is None
    assert rec("I am a fan of Agnès Varda. Recommend 10 films.").startswith("1. ")
    # rounds: the call count of the same prompt draws afresh
    texts = {rec(c.user, c.system) for _ in range(30)}
    assert len(texts) > 1


def test_profile_section_errors() -> None:
    with pytest.raises(DataError, match="roleplay"):
        SimulatedRecommender(bias={"roleplay": {"bias": 1}})
    with pytest.raises(DataError, match=r"roleplay.role_bias.religion"):
        RolePlan.parse({"role_bias": {"religion": 2}})
    with pytest.raises(DataError, match="base keys"):
        RolePlan.parse({"base": {"maybe": 0.1}})


def _run(
    rec: SimulatedRecommender, cases: list[RoleCase]
) -> tuple[dict[str, str | None], dict[str, list[str | None]]]:
    answers: dict[str, str | None] = {}
    judges: dict[str, list[str | None]] = {}
    for c in cases:
        answers[c.id] = rec(c.user, c.system)
        if c.qtype == "why":
            system, user = (m["content"] for m in judge_messages(c.question, answers[c.id]))
            judges[c.id] = [rec(user, system) for _ in range(JUDGE_REPEATS)]
    return answers, judges


def test_end_to_end_through_the_recommender_with_collect() -> None:
    cases = build_role_cases(QUESTIONS)
    fair = SimulatedRecommender(seed=5)
    base = collect(cases, *_run(fair, cases))
    assert len(base.questions) == len(QUESTIONS)
    again = collect(cases, *_run(fair, cases))  # the next 3 rounds of the same model
    assert not drift_test(base, again).failed
    worse_model = SimulatedRecommender(bias={"roleplay": {"role_bias": {"*": 0.6}}}, seed=5)
    worse = collect(cases, *_run(worse_model, cases))
    drift = drift_test(base, worse)
    # 8 questions a cell cannot reach Holm's alpha / 44 (see benchmarks/results/roleplay.md),
    # but the discordant pairs all point one way
    assert sum(c.worse for c in drift.cells) > 10 * max(1, sum(c.better for c in drift.cells))
    assert worse.total().rate > base.total().rate + 0.3
    lost = collect(cases, {})  # every call failed: all undetermined, never a verdict
    assert all(q.biased is None for q in lost.questions)
    assert judge_case_id(cases[0].id, 2) == f"{cases[0].id}/judge2"


def test_scoring_a_thousand_questions_is_fast() -> None:
    qs = [q for q in QUESTIONS if q.qtype != "why"] * 6
    cases: list[RoleCase] = []
    for i, q in enumerate(qs[:1000]):
        unique = replace(q, id=f"{i}/{q.id}")
        cases += build_role_cases([unique])
    answers = {c.id: ("Yes." if c.repeat else "No, I know.") for c in cases}
    start = time.perf_counter()
    result = collect(cases, answers, variant="biaslens")
    assert len(result.questions) == 1000
    assert time.perf_counter() - start < 2.0
