"""The role-play kind without pytest's plugin: its cases, judge calls, scoring and gate."""

from __future__ import annotations

import pytest

from pytest_recfair.engine import registry
from pytest_recfair.engine.base import AuditInputs, AuditRequest
from pytest_recfair.engine.stream import measure
from pytest_recfair.engine.verdict import run_audit
from pytest_recfair.errors import ConfigError
from pytest_recfair.prompts.grids import load_grid
from pytest_recfair.providers.base import Completion, Usage
from pytest_recfair.providers.runstate import RunOutcome
from pytest_recfair.report import sections as junit
from pytest_recfair.report.registry import render
from pytest_recfair.report.terminal import terminal_summary
from pytest_recfair.settings import resolve
from pytest_recfair.sim.recommender import SimulatedRecommender


def _request(judge: bool = True, **marker: object) -> AuditRequest:
    # the hand-written smoke set: 8 questions of each type per attribute
    s = resolve(marker={"kind": "roleplay", "attr": "religion", "questions": "smoke", **marker})
    sim = SimulatedRecommender("demo", seed=1)
    return AuditRequest(
        s, sim, [], load_grid("faireval"), "t::roles",
        inputs=AuditInputs(judge=sim if judge else None),
    )  # fmt: skip


def test_kind_by_name_or_by_questions_and_an_unknown_name_is_one_line() -> None:
    kind = registry.kind_for(resolve(marker={"questions": "default"}))
    assert kind is registry.kind_for(resolve(marker={"kind": "roleplay"}))
    assert registry.kind_for(resolve(marker={})) is registry.kinds()[-1]
    with pytest.raises(
        ConfigError, match="no such kind of audit; known: items, exposure, positions"
    ):
        registry.kind_for(resolve(marker={"kind": "rolepay"}))


def test_rounds_share_a_body_but_not_a_repeat_index_or_an_id() -> None:
    request = _request()
    kind = registry.kind_for(request.settings)
    questions = kind.entities(request.settings, [], request.inputs)  # type: ignore[attr-defined]
    assert len(questions) == 24  # religion: 8 of each type, Why asked (a judge is set)
    cases = kind.build_cases(request.settings, request.grid, questions[:1], request.inputs)
    assert [c.repeat for c in cases] == [0, 1, 2]
    assert len({(c.system, c.prompt) for c in cases}) == 1
    assert len({c.id for c in cases}) == 3
    assert {c.entity_id for c in cases} == {questions[0].id}  # one cassette per question


def test_every_answered_why_round_is_judged_three_times_under_its_own_repeats() -> None:
    request = _request()
    kind = registry.kind_for(request.settings)
    questions = kind.entities(request.settings, [], request.inputs)  # type: ignore[attr-defined]
    why = [q for q in questions if "/why/" in q.id][:1]
    cases = kind.build_cases(request.settings, request.grid, why, request.inputs)
    done = {c.id: Completion("Because of reasons.") for c in cases[:2]}  # round 3 failed
    outcome = RunOutcome(done, {cases[2].id: "boom"}, Usage())
    judges = kind.follow_up(request.settings, cases, outcome)  # type: ignore[attr-defined]
    assert [j.repeat for j in judges] == [0, 1, 2, 3, 4, 5]
    assert {j.judged for j in judges} == {cases[0].id, cases[1].id}
    assert all(j.entity_id == why[0].id for j in judges)


def test_without_a_judge_why_questions_are_not_asked_and_the_report_says_so() -> None:
    result = measure(_request(judge=False))
    data = result.extras["roleplay"]
    assert data["why_not_asked"] == 8
    assert {c["qtype"] for c in data["cells"]} == {"yesno", "choice"}
    shown = " ".join(line.strip() for line in terminal_summary([result], verbose=True))
    assert "8 Why questions not asked (no judge configured)" in shown


def test_a_failed_request_is_a_failed_round_under_the_biaslens_oracle_too() -> None:
    class Flaky(SimulatedRecommender):
        def __call__(self, prompt: str, system: str | None = None, **kw: object) -> str:
            if system == "You are a Buddhist monk":
                raise RuntimeError("down")
            return super().__call__(prompt, system)

    request = _request(judge=False, oracle="biaslens", max_failed=0.5)
    request = AuditRequest(**{**request.__dict__, "recommender": Flaky("demo", seed=1)})
    data = measure(request).extras["roleplay"]
    monk = [q for q in data["result"]["questions"] if q["role"] == "Buddhist monk"]
    assert monk
    assert all(q["outcomes"] == ["failed"] * 3 and q["biased"] is None for q in monk)


def test_limits_fail_and_every_channel_shows_the_cells() -> None:
    request = _request(max_biased=0.0)
    result = run_audit(request)
    assert not result.gate.passed
    assert {f.kind for f in result.gate.failures} == {"biased_rate"}
    data = result.extras["roleplay"]
    props = dict(junit.properties(result))
    html = render(".html", [result])
    for c in data["cells"]:
        assert props[f"recfair.religion.{c['qtype']}.n"] == c["n"]
        assert f"{c['biased']}/{c['n']}" in html
    assert "Worst roles" in html


def test_the_same_run_against_its_own_baseline_passes() -> None:
    first = measure(_request())
    again = run_audit(_request(tolerance=0.05), baseline=first)
    assert again.gate.passed, again.gate.failures


def test_role_effect_asks_both_conditions_and_pairs_them_by_question() -> None:
    result = measure(_request(role_effect=True, entities=10))
    data = result.extras["roleplay"]
    assert {c["with_role"] for c in data["cells"]} == {True, False}
    assert 0 < data["effect"]["total"]["n"] <= 10  # questions determined in both conditions
    assert "role effect over" in "\n".join(terminal_summary([result], verbose=True))
    assert any(".norole.biased_rate" in k for k, _ in junit.properties(result))


def test_a_persona_role_is_refused_by_the_roleplay_kind() -> None:
    """role= is the other audits' persona; the role-play kind plays its questions' roles."""
    s = resolve(marker={"kind": "roleplay", "role": "nurse"})
    with pytest.raises(ConfigError, match=r"role='nurse'.*remove role="):
        registry.kind_for(s).check(s, ())  # type: ignore[attr-defined]


def test_the_run_line_names_the_question_set_not_a_grid_in_every_channel() -> None:
    """The kind describes its own run (report/sections.run_parts): the set, the questions
    asked and the rounds, not the grid and templates a role-play audit does not use."""
    from pytest_recfair.report.status import describe

    result = measure(_request(judge=False))
    line = describe(result)
    assert "questions smoke: 16 x 3 rounds" in line
    assert "8 Why questions not asked (no judge)" in line
    assert "grid" not in line
    assert "templates" not in line
    assert "role-play bias (parsed oracle)" in line
    for text in ("\n".join(terminal_summary([result], verbose=True)), render(".md", [result])):
        assert "questions smoke: 16 x 3 rounds" in " ".join(text.split())
