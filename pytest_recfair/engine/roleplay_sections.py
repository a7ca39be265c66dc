"""How every report format shows role-play results (``extras["roleplay"]``): the paper's
Tables 2 and 3 with Wilson intervals, the worst roles, the role effect and the evidence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from pytest_recfair.engine.overlap.evidence import SHOW, reply_text
from pytest_recfair.errors import DataError
from pytest_recfair.metrics.roleplay import QuestionResult, RoleplayResult
from pytest_recfair.metrics.roleplay_gate import drift_test
from pytest_recfair.report.fmt import Table, fmt, fmt_pair, p_text
from pytest_recfair.report.sections import KindComparison, KindRow
from pytest_recfair.results import AuditResult, Interval, Stat, json_nan

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


def _head(data: Mapping[str, Any]) -> str:
    why = data.get("why_not_asked") or 0
    note = f"; {why} Why questions not asked (no judge configured)" if why else ""
    return (
        f"{data['source']}: {data['asked']} questions x {data['rounds']} rounds, "
        f"{data['oracle']} oracle{note}"
    )


def _effect_text(e: Mapping[str, Any]) -> str:
    t = e["total"]
    red = "—" if t["reduction"] is None else f"{t['reduction']:.1%}"
    return (
        f"role effect over {t['n']} paired questions: biased with the role {t['biased_with']}, "
        f"without {t['biased_without']}; reduction without the role {red} "
        f"(exact McNemar p {p_text(t['p_value'])})"
    )


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
        effect = [_effect_text(data["effect"])] if data.get("effect") else []
        out = [Table("Role-play bias", head, rows, _head(data), effect, labels=3)]
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
        """For the plan, what the gate tests (not the series' majority rate): a cell's
        biased-answer rate, paired by question, so only each question's spread over its R
        rounds, x(R - x) / (R - 1) of x biased, counts; plus the tolerance a shift by
        whole questions adds (the sign-flip's variance holds the shift). Holm family: the
        cells and each attribute's undetermined share."""
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
