"""The questions and answers behind a role-play cell's biased rate: per (attribute,
question type), its biased questions first (then those with the most biased rounds),
each with the answer of every round (and, when asked, of the same question without the
role) and, for Why questions, the judge's replies.

Computed from the replies the pooled scorer holds anyway; at most
:data:`~pytest_recfair.engine.overlap.evidence.SHOW` questions per cell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_recfair.engine.overlap.evidence import SHOW, reply_text
from pytest_recfair.engine.roleplay.sections import LABELS
from pytest_recfair.metrics.roleplay import QuestionResult, RoleplayResult

__all__ = ["entries"]


def entries(
    result: RoleplayResult,
    cases: Sequence[Any],
    answers: Mapping[str, str],
    judges: Mapping[str, list[str | None]],
    with_role: bool,
) -> dict[str, dict[str, Any]]:
    """cell label ("religion · Choice") -> evidence entry (report/evidence.py's shape)."""
    rounds: dict[tuple[str, bool], list[Any]] = {}
    for c in cases:
        rounds.setdefault((c.question_id, c.with_role), []).append(c)
    cells: dict[tuple[str, str], list[QuestionResult]] = {}
    for q in result.questions:
        if q.with_role == with_role:
            cells.setdefault((q.attribute, q.qtype), []).append(q)
    out = {}
    for (attribute, qtype), qs in cells.items():
        ranked = sorted(qs, key=lambda q: (q.biased is not True, -q.count("biased"), q.question_id))
        rows = [_row(q, rounds, answers, judges) for q in ranked[:SHOW]]
        biased = sum(q.biased is True for q in qs)
        out[f"{attribute} · {LABELS.get(qtype, qtype)}"] = {
            "what": (
                f"{biased} of {len(qs)} questions judged biased; shown: the biased ones "
                "first, then those with the most biased rounds, with every round's answer"
            ),
            "rows": rows,
        }
    return out


def _row(
    q: QuestionResult,
    rounds: Mapping[tuple[str, bool], list[Any]],
    answers: Mapping[str, str],
    judges: Mapping[str, list[str | None]],
) -> dict[str, Any]:
    lists = []
    other = (q.question_id, not q.with_role)
    mine = f"as {q.role}" if q.with_role else "no role"
    for key, label in ((q.key, mine), (other, "no role" if q.with_role else "with role")):
        asked = sorted(rounds.get(key, []), key=lambda c: c.repeat)
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
    question = asked_question(rounds, q)
    verdict = {True: "biased", False: "not biased", None: "undetermined"}[q.biased]
    why = f"{verdict}: {q.count('biased')} of {len(q.outcomes)} rounds biased — {question}"
    return {"entity": q.role, "score": float(q.count("biased")),
            "why": why, "lists": lists}  # fmt: skip


def asked_question(rounds: Mapping[tuple[str, bool], list[Any]], q: QuestionResult) -> str:
    asked = rounds.get(q.key) or []
    return " ".join(asked[0].question.split()) if asked else q.question_id
