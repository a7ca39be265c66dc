"""The role-play audit (BiasLens): rates of biased answers while the model plays a role, and
its report sections (the paper's Tables 2 and 3 with Wilson intervals). Rounds send identical
bodies, so the cassette key holds the round as repeat index; Why answers are judged 3 times
(repeat ``round * 3 + j``), majority decides; a failed request is never a verdict."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from pytest_recfair.engine.base import (
    AuditInputs,
    Merged,
    PooledKind,
    Rebuild,
    Scored,
    ShardResult,
    merge_replies,
)
from pytest_recfair.engine.overlap.evidence import SHOW, reply_text
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.metrics.roleplay import (
    QuestionResult,
    RoleplayResult,
    RoleplayVariant,
    collect,
    question_verdict,
)
from pytest_recfair.metrics.roleplay_gate import check_limits, drift_test, role_effect
from pytest_recfair.prompts import roles
from pytest_recfair.prompts.grids import Grid
from pytest_recfair.prompts.roles import JUDGE_REPEATS, QType, RoleQuestion, RoleSet, judge_case_id
from pytest_recfair.prompts.seeds import Entity
from pytest_recfair.report.fmt import Table, fmt, fmt_pair, p_text
from pytest_recfair.report.sections import KindComparison, KindRow
from pytest_recfair.results import AuditResult, GateFailure, Interval, Stat, json_nan
from pytest_recfair.settings import AuditSettings
from pytest_recfair.settings.values import nearest

if TYPE_CHECKING:
    from pytest_recfair.providers.runstate import RunOutcome

#: The key of the role-play results in ``AuditResult.extras`` (the kind's name).
KEY: Final = "roleplay"
#: The paper's spelling of each question type.
LABELS: Final = {"yesno": "Yes/No", "choice": "Choice", "why": "Why"}


def _condition(cell: Mapping[str, Any]) -> str:
    return "" if cell["with_role"] else " (without role)"


def cell_name(attribute: str, qtype: str) -> str:
    return f"{attribute} · {LABELS.get(qtype, qtype)}"


def _label(cell: Mapping[str, Any]) -> str:
    return cell_name(cell["attribute"], cell["qtype"]) + _condition(cell)


def _rate(r: Mapping[str, Any]) -> str:
    """A cell's or role's biased rate with its interval."""
    return fmt(r["rate"]) + fmt_pair([r["low"], r["high"]])


class RoleplaySections:
    """The role-play kind's report sections."""

    def run_parts(self, result: AuditResult, data: Any) -> list[str]:
        """The run line's description: question set, questions and rounds (no grid or templates)."""
        why = data.get("why_not_asked") or 0
        return [
            f"questions {data['source']}: {data['asked']} x {data['rounds']} rounds",
            *([f"{why} Why questions not asked (no judge)"] if why else []),
        ]

    def measure(self, result: AuditResult) -> str:
        data = result.extras.get(KEY) or {}
        return f"role-play bias ({data.get('oracle', 'parsed')} oracle)"

    def brief(self, data: Any) -> str:
        cells = [c for c in data["cells"] if c["rate"] is not None]
        if not cells:
            return ""
        c = max(cells, key=lambda c: c["rate"])
        return f"most biased {_label(c)} {c['biased']}/{c['n']} = {fmt(c['rate'])}"

    def tables(self, data: Any) -> list[Table]:
        head = ["attribute", "type", "role", "biased / determined", "rate [95% CI]"]
        head += ["refusals", "failed", "unusable", "undetermined"]
        rows = [
            [
                c["attribute"], LABELS[c["qtype"]], "with" if c["with_role"] else "without",
                f"{c['biased']}/{c['n']}", _rate(c),
                f"{c['refusals']}/{c['rounds']}", str(c["failed"]), str(c["unusable"]),
                str(c["undetermined"]),
            ]
            for c in data["cells"]
        ]  # fmt: skip
        why = data.get("why_not_asked") or 0
        lead = (
            f"{data['source']}: {data['asked']} questions x {data['rounds']} rounds, "
            f"{data['oracle']} oracle"
            + (f"; {why} Why questions not asked (no judge configured)" if why else "")
        )
        effect = []
        if t := (data.get("effect") or {}).get("total"):
            red = "—" if t["reduction"] is None else f"{t['reduction']:.1%}"
            effect.append(
                f"role effect over {t['n']} paired questions: biased with the role "
                f"{t['biased_with']}, without {t['biased_without']}; reduction without the role "
                f"{red} (exact McNemar p {p_text(t['p_value'])})"
            )
        out = [Table("Role-play bias", head, rows, lead, effect, labels=3)]
        examples = [
            [r["role"], r["attribute"], _rate(r), f"{r['biased']}/{r['n']}", ex["question"],
             " | ".join(a if a is not None else "(failed)" for a in ex["answers"])]
            for r in data["worst_roles"]
            for ex in r["examples"] or [{"question": "", "answers": []}]
        ]  # fmt: skip
        if examples:
            head = ["role", "attribute", "rate [95% CI]", "biased", "question", "answers"]
            title = "Worst roles, with their biased questions and answers"
            out.append(Table(title, head, examples, labels=2, text=(4, 5)))
        return out

    def series(self, data: Any) -> list[tuple[str, Stat]]:
        return [
            (f"{_label(c)} · biased rate",
             Stat(json_nan(c["rate"]), Interval.from_obj([c["low"], c["high"]])))
            for c in data["cells"]
        ]  # fmt: skip

    def resolution(self, data: Any, settings: Any) -> list[tuple[str, float, int, int]]:
        """For the plan, what the gate tests: a cell's biased-answer rate paired by question,
        so only each question's spread over its R rounds (x(R - x) / (R - 1) of x biased)
        counts, plus the tolerance (the sign-flip holds the shift). Holm family: the cells
        and each attribute's undetermined share."""
        res, cells = RoleplayResult.from_dict(data["result"]), dict[tuple[str, str], list[float]]()
        r = res.repeats
        for q in res.select(with_role=settings.with_role):
            x = q.count("biased")
            v = x * (r - x) / (r - 1) / r**2 if r > 1 else 0.0
            cells.setdefault((q.attribute, q.qtype), []).append(v + settings.tolerance)
        m = len(cells) + len({a for a, _ in cells})
        return [
            (f"{cell_name(a, t)} · biased-answer rate", math.sqrt(sum(v)) / len(v), len(v), m)
            for (a, t), v in cells.items()
        ]

    def compare(
        self, a: AuditResult, b: AuditResult, *, tolerance: float, n_resamples: int, seed: int
    ) -> KindComparison:
        """The drift test paired by question: each cell's biased rate (exact sign-flip) and
        undetermined share (exact McNemar), Holm; results scored another way: no test."""
        was, now = a.extras[KEY], b.extras[KEY]
        with_role = getattr(b.meta, "with_role", None) is not False
        try:
            d = drift_test(
                RoleplayResult.from_dict(was["result"]), RoleplayResult.from_dict(now["result"]),
                tolerance=tolerance, with_role=with_role,
            )  # fmt: skip
        except DataError as exc:
            rates = {(c["attribute"], c["qtype"], c["with_role"]): c["rate"] for c in was["cells"]}
            rows = [
                KindRow(c["attribute"], LABELS[c["qtype"]] + _condition(c), "biased-question rate",
                        json_nan(rates.get((c["attribute"], c["qtype"], c["with_role"]))),
                        json_nan(c["rate"]), None, 0)
                for c in now["cells"]
            ]  # fmt: skip
            return KindComparison(tuple(rows), "no test", (str(exc),))
        rows = [
            KindRow(c.attribute, LABELS.get(c.qtype, c.qtype), "biased-answer rate",
                    *c.answer_rates, c.p_adjusted, c.questions)
            if c.test == "answers" else
            KindRow(c.attribute, "(all types)", "undetermined share", c.baseline_rate,
                    c.candidate_rate, c.p_adjusted, c.n)
            for c in d.cells
        ]  # fmt: skip
        notes = [f"{d.unpaired} questions of B not in A"] if d.unpaired else []
        test = "exact sign-flip over rounds (rates) / McNemar (undetermined), Holm"
        return KindComparison(tuple(rows), test, tuple(notes))

    def properties(self, data: Any) -> list[tuple[str, float | int | str]]:
        out: list[tuple[str, float | int | str]] = []
        for c in data["cells"]:
            key = f"recfair.{c['attribute']}.{c['qtype']}" + ("" if c["with_role"] else ".norole")
            if c["rate"] is not None:
                out.append((f"{key}.biased_rate", c["rate"]))
            out += [(f"{key}.{n}", c[n]) for n in ("biased", "n", "refusals")]
        return out


def entries(
    result: RoleplayResult,
    rounds: Mapping[tuple[str, bool], list[Any]],
    answers: Mapping[str, str],
    judges: Mapping[str, list[str | None]],
    with_role: bool,
) -> dict[str, dict[str, Any]]:
    """cell label ("religion · Choice") -> evidence entry (report/evidence.py's shape);
    ``rounds``: (question id, with role) -> its cases in round order."""
    cells: dict[tuple[str, str], list[QuestionResult]] = {}
    for q in result.questions:
        if q.with_role == with_role:
            cells.setdefault((q.attribute, q.qtype), []).append(q)

    def row(q: QuestionResult) -> dict[str, Any]:
        lists = []
        other = (q.question_id, not q.with_role)
        mine = f"as {q.role}" if q.with_role else "no role"
        for key, label in ((q.key, mine), (other, "no role" if q.with_role else "with role")):
            asked = rounds.get(key, [])
            if not asked:
                continue
            outcomes = q.outcomes if key == q.key else ()
            titles, replies = [], []
            for i, c in enumerate(asked):
                text = answers.get(c.id)
                verdict = f" [{outcomes[i]}]" if i < len(outcomes) else ""
                short = " ".join((reply_text(text) or "(no answer: failed)").split())[:160]
                titles.append(f"round {c.repeat + 1}{verdict}: {short}")
                replies.append(f"round {c.repeat + 1}:\n{reply_text(text)}")
                for j, judged in enumerate(judges.get(c.id) or []):
                    replies.append(f"  judge {j + 1}: {reply_text(judged)}")
            lists.append({"label": label, "titles": titles, "reply": "\n\n".join(replies)})
        asked = rounds.get(q.key) or []
        question = " ".join(asked[0].question.split()) if asked else q.question_id
        verdict = {True: "biased", False: "not biased", None: "undetermined"}[q.biased]
        why = f"{verdict}: {q.count('biased')} of {len(q.outcomes)} rounds biased — {question}"
        return {"entity": q.role, "score": float(q.count("biased")), "why": why, "lists": lists}

    out = {}
    for (attribute, qtype), qs in cells.items():
        ranked = sorted(qs, key=lambda q: (q.biased is not True, -q.count("biased"), q.question_id))
        rows = [row(q) for q in ranked[:SHOW]]
        biased = sum(q.biased is True for q in qs)
        out[cell_name(attribute, qtype)] = {
            "what": (
                f"{biased} of {len(qs)} questions judged biased; shown: the biased ones "
                "first, then those with the most biased rounds, with every round's answer"
            ),
            "rows": rows,
        }
    return out


#: The plan's stand-in for a Why answer not yet given: 100 words, the format's limit.
_STAND_IN = " ".join(["answer"] * 100)
#: Rounds per question when ``repeats`` is left at 1: the paper asks each question 3 times.
ROUNDS = 3
WORST_ROLES = 5  # roles shown in the drill-down
EXAMPLES = 3  # biased questions shown per role


@dataclass(frozen=True, slots=True)
class _Case:
    id: str
    system: str | None
    prompt: str
    entity: str
    entity_id: str  # names its cassette: the question's
    attribute: str
    value: str  # the role (failures are counted per role)
    repeat: int


@dataclass(frozen=True, slots=True)
class RoleplayCase(_Case):
    """One round (``repeat``) of one question."""

    question_id: str
    role: str
    qtype: QType
    options: tuple[str, ...]
    with_role: bool
    question: str


@dataclass(frozen=True, slots=True)
class JudgeCase(_Case):
    """Judge call ``j`` about the answer of case ``judged`` (a Why round), kept in the
    question's cassette under repeat ``round * 3 + j``."""

    judged: str


#: The bundled question sets (prompts/data/roleplay/<name>.yaml).
BUNDLED_SETS = ("default", "smoke")


def _guess(name: str, known: Sequence[str]) -> str:
    near = nearest(name, known)
    return f"; did you mean {near!r}?" if near is not None else ""


def rounds_of(settings: AuditSettings) -> int:
    return settings.repeats if settings.repeats > 1 else ROUNDS


@lru_cache(maxsize=8)
def _load(source: str, stamp: int) -> RoleSet:
    """Loaded once per file version (``stamp``: its mtime)."""
    return roles.load_roles(source)


def question_set(settings: AuditSettings, inputs: AuditInputs) -> RoleSet:
    """The ``questions=`` set: bundled, or a file by the test file, rootdir or the cwd."""
    source = settings.questions or "default"
    path = Path(source)
    if not path.suffix:
        return _load(source, 0)
    if not path.is_absolute():
        path = next((d / source for d in inputs.where if (d / source).is_file()), path)
    return _load(str(path), path.stat().st_mtime_ns if path.is_file() else 0)


def _asked(settings: AuditSettings, questions: RoleSet, judged: bool) -> list[RoleQuestion]:
    """The questions this audit asks: of ``attr``; Why questions only with a judge."""
    if settings.attr is not None and settings.attr not in roles.ATTRIBUTES:
        raise ConfigError(
            f"@fairness(attr={settings.attr!r}) is not a role-play attribute; expected one "
            f"of {', '.join(roles.ATTRIBUTES)} (or no attr: every attribute of the set)"
            + _guess(settings.attr, roles.ATTRIBUTES)
        )
    mine = [q for q in questions if settings.attr in (None, q.attribute)]
    asked = [q for q in mine if judged or q.qtype != "why"]
    if not asked:
        raise DataError(
            f"{questions.name}: no question to ask without a judge about "
            f"{settings.attr or 'any attribute'}; add some, or pick another attr"
        )
    return asked


def _judge_cases(cases: Sequence[Any], answers: Mapping[str, str]) -> list[JudgeCase]:
    """Three judge calls for every Why round with an answer in ``answers`` (by case id)."""
    out = []
    for c in cases:
        text = answers.get(c.id)
        if not isinstance(c, RoleplayCase) or c.qtype != "why" or text is None:
            continue
        system, user = (m["content"] for m in roles.judge_messages(c.question, text))
        out += [
            JudgeCase(judge_case_id(c.id, j), system, user, c.entity, c.entity_id, c.attribute,
                      c.value, c.repeat * JUDGE_REPEATS + j, c.id)
            for j in range(JUDGE_REPEATS)
        ]  # fmt: skip
    return out


def _score(
    settings: AuditSettings,
    inputs: AuditInputs,
    asked: Sequence[RoleplayCase | JudgeCase],
    completions: Mapping[str, Any],
) -> Scored:
    cases = [c for c in asked if isinstance(c, RoleplayCase)]
    answers = {c.id: completions[c.id].text for c in cases if c.id in completions}
    # by id, not by the judge cases: a shard merge rebuilds only the questions' cases
    judges: dict[str, list[str | None]] = {
        c.id: [getattr(completions.get(judge_case_id(c.id, j)), "text", None)
               for j in range(JUDGE_REPEATS)]
        for c in cases if c.qtype == "why"
    }  # fmt: skip
    variant = cast(RoleplayVariant, settings.oracle)
    scored = collect(cases, answers, judges, variant=variant, repeats=rounds_of(settings))
    result = _failed_is_no_verdict(scored, cases, answers)
    rounds: dict[tuple[str, bool], list[RoleplayCase]] = {}  # every round of a question
    for c in sorted(cases, key=lambda c: c.repeat):
        rounds.setdefault((c.question_id, c.with_role), []).append(c)
    questions = question_set(settings, inputs)
    mine = [q for q in questions if settings.attr in (None, q.attribute)]
    cells = [
        {"attribute": a, "qtype": t, "with_role": w, **cell.to_dict()}
        for w in (True, False)
        for (a, t), cell in result.cells(with_role=w).items()
    ]
    data = {  # the kind's results (extras["roleplay"])
        "source": questions.name,
        "digest": questions.digest(),
        "oracle": settings.oracle,
        "rounds": rounds_of(settings),
        "asked": len({c.question_id for c in cases}),
        "why_not_asked": 0 if inputs.judge is not None else sum(q.qtype == "why" for q in mine),
        "cells": cells,
        "worst_roles": _worst_roles(result, rounds, answers, settings.with_role),
        "effect": role_effect(result).to_dict() if settings.role_effect else None,
        "result": result.to_dict(),
    }
    shown = entries(result, rounds, answers, judges, settings.with_role)
    return Scored((), 0, {KEY: data}, evidence=shown)


def _failed_is_no_verdict(
    result: RoleplayResult, cases: Sequence[RoleplayCase], answers: Mapping[str, str]
) -> RoleplayResult:
    """A failed round is "failed" whatever the oracle (biaslens reads a missing answer
    as ``None``, as the paper's scripts do): a failed request is never a verdict."""
    lost: dict[tuple[str, bool], set[int]] = {}
    for c in cases:
        if c.id not in answers:
            lost.setdefault((c.question_id, c.with_role), set()).add(c.repeat)

    def marked(q: QuestionResult, gone: set[int]) -> QuestionResult:
        outcomes = tuple("failed" if r in gone else o for r, o in enumerate(q.outcomes))
        return dataclasses.replace(q, outcomes=outcomes, biased=question_verdict(outcomes))

    out = tuple(marked(q, lost[q.key]) if q.key in lost else q for q in result.questions)
    return RoleplayResult(out, result.variant, result.repeats) if lost else result


def _worst_roles(
    result: RoleplayResult,
    rounds: Mapping[tuple[str, bool], list[RoleplayCase]],
    answers: Mapping[str, str],
    with_role: bool,
) -> list[dict[str, Any]]:
    """The roles with the highest biased-question rate, their biased questions and answers."""
    by_role = result.cells(with_role=with_role, by="role")
    ranked = sorted(
        ((k, v) for k, v in by_role.items() if v.biased), key=lambda kv: (-kv[1].rate, kv[0])
    )
    out = []
    for (attribute, role), cell in ranked[:WORST_ROLES]:
        biased = [
            q for q in result.select(with_role=with_role) if q.role == role and q.biased is True
        ]
        examples = [
            {"question": asked[0].question, "answers": [answers.get(c.id) for c in asked]}
            for asked in (rounds[q.key] for q in biased[:EXAMPLES])
        ]
        out.append({"attribute": attribute, "role": role, **cell.to_dict(), "examples": examples})
    return out


def _limit_failures(settings: AuditSettings, now: RoleplayResult) -> list[GateFailure]:
    breaches = check_limits(now, max_biased=settings.max_biased, with_role=settings.with_role)
    cells = now.cells(with_role=settings.with_role)
    return [
        GateFailure("biased_rate", attribute=cell_name(b.attribute, b.qtype), value=b.value,
                    limit=b.threshold,
                    detail=f"biased-question rate {b.value:.3f} > {b.limit} {b.threshold:g}",
                    value_ci=Interval(cell.low, cell.high))
        for b in breaches
        for cell in [cells[b.attribute, b.qtype]]
    ]  # fmt: skip


def _drift_failures(
    settings: AuditSettings, before: RoleplayResult, now: RoleplayResult
) -> list[GateFailure]:
    """Each failed drift member, with the majority-based biased-question rates beside it."""
    s = settings
    try:
        drift = drift_test(before, now, tolerance=s.tolerance, alpha=s.alpha, with_role=s.with_role)
    except DataError as exc:
        return [GateFailure("incompatible", detail=str(exc))]
    out = []
    for c in (c for c in drift.cells if c.failed):
        turned = f"{c.worse} questions turned, {c.better}"
        if c.test != "answers":
            was, now_, n = c.baseline_rate, c.candidate_rate, c.n
            detail = (f"undetermined share {was:.3f} -> {now_:.3f} rose by more than the "
                      f"tolerance {c.margin:g} ({turned} turned back; exact McNemar, Holm p = "
                      f"{c.p_adjusted:.3g} over {n} paired questions)")  # fmt: skip
        else:
            (was, now_), n = c.answer_rates, c.questions
            detail = (f"biased-answer rate {was:.3f} -> {now_:.3f} ({c.answers_before} -> "
                      f"{c.answers_after} of {c.answer_rounds} rounds) rose by more than the "
                      f"tolerance {c.margin:g} (exact sign-flip over the rounds, Holm p = "
                      f"{c.p_adjusted:.3g} over {n} paired questions; biased-question rate "
                      f"{c.baseline_rate:.3f} -> {c.candidate_rate:.3f}, {turned} turned "
                      "back)")  # fmt: skip
        out.append(GateFailure(
            "biased_rate", attribute=cell_name(c.attribute, c.qtype), value=now_,
            limit=c.margin, baseline=was, p_value=c.p_adjusted, alpha=drift.alpha, n_paired=n,
            detail=detail,
        ))  # fmt: skip
    return out


class RoleplayAudit(PooledKind):
    """The BiasLens role-play audit, scored over all its questions."""

    name = KEY
    sections = RoleplaySections()

    def check(self, settings: AuditSettings, where: tuple[Path, ...]) -> None:
        """At collection: the questions load and some are about ``attr``."""
        if settings.role is not None:
            raise ConfigError(
                f"role={settings.role!r} puts a persona in the system message of a list, "
                "item or position audit; a role-play audit takes its roles from its "
                "questions (questions=): remove role="
            )
        source = settings.questions or "default"
        if not Path(source).suffix and source not in BUNDLED_SETS:
            raise ConfigError(
                f"@fairness(questions={source!r}): no such bundled role-play question set; "
                f"expected one of {', '.join(BUNDLED_SETS)} or a CSV/YAML/JSON file"
                + _guess(source, BUNDLED_SETS)
            )
        _asked(settings, question_set(settings, AuditInputs(where=where)), True)

    def entities(
        self, settings: AuditSettings, seeds: Sequence[Entity], inputs: AuditInputs
    ) -> list[Entity]:
        """The questions, as entities (chunks, shards and ``entities=N`` take questions)."""
        asked = _asked(settings, question_set(settings, inputs), inputs.judge is not None)
        return [Entity(q.id, f"{q.role}: {q.question}", settings.domain) for q in asked]

    def build_cases(
        self, settings: AuditSettings, grid: Grid, entities: Sequence[Entity], inputs: AuditInputs
    ) -> list[RoleplayCase]:
        index = {q.id: q for q in question_set(settings, inputs)}
        questions = [index[e.id] for e in entities]
        conditions = [settings.with_role] + ([False] if settings.role_effect else [])
        rounds = rounds_of(settings)
        return [
            RoleplayCase(c.id, c.system, c.user, c.role, c.question_id, c.attribute, c.role,
                         c.repeat, c.question_id, c.role, c.qtype, c.options, c.with_role,
                         c.question)
            for with_role in dict.fromkeys(conditions)
            for c in roles.build_role_cases(questions, repeats=rounds, with_role=with_role)
        ]  # fmt: skip

    def planned_follow_up(self, settings: AuditSettings, cases: Sequence[Any]) -> list[JudgeCase]:
        """The judge calls ``cases`` will bring, with the longest allowed answer."""
        return _judge_cases(cases, {c.id: _STAND_IN for c in cases})

    def merge(
        self, settings: AuditSettings, parts: Sequence[ShardResult], rebuild: Rebuild
    ) -> Merged:
        """With the judge cases of answered Why rounds, so they count as unsharded."""

        def with_judges() -> tuple[list[Any], AuditInputs]:
            cases, inputs = rebuild()
            if inputs.judge is None:
                return cases, inputs
            _, replies = merge_replies(parts)
            answers = {k: str(v["text"]) for k, v in replies["completions"].items()}
            return [*cases, *_judge_cases(cases, answers)], inputs

        return super().merge(settings, parts, with_judges)

    def follow_up(
        self, settings: AuditSettings, cases: Sequence[Any], outcome: RunOutcome
    ) -> list[JudgeCase]:
        return _judge_cases(cases, {k: c.text for k, c in outcome.completions.items()})

    score = staticmethod(_score)

    def failures(
        self, settings: AuditSettings, result: AuditResult, baseline: AuditResult | None
    ) -> tuple[GateFailure, ...]:
        data = result.extras.get(KEY)
        if not data:
            return ()
        now = RoleplayResult.from_dict(data["result"])
        out = _limit_failures(settings, now)
        before = baseline.extras.get(KEY) if baseline is not None else None
        if before:
            out += _drift_failures(settings, RoleplayResult.from_dict(before["result"]), now)
        return tuple(out)


ROLEPLAY = RoleplayAudit()
