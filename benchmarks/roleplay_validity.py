"""Does the role-play drift gate keep its promises? False alarms and power.

Every run draws a simulated model (``pytest_recfair.sim.planted``: each question has its
own propensity to be answered in a biased way, Beta-distributed around 15% / 20% / 15% for
Yes/No / Choice / Why, 2% refusals, a judge that errs 3% of the time), asks the bundled
'default' question set (2,376 questions: per attribute 200 Yes/No, 8 Choice, 8 Why) in 3
rounds for the BASELINE, and 3 fresh rounds for the CANDIDATE:

- unchanged: the same model again (new rounds only);
- planted: the same model with ``role_bias: {<attribute>: +0.10}``, 10 points more biased
  answers per round on every question of that attribute while the role is played.

Answers are scored by the project's oracles (parsed variant; Why through the simulated
judge, 3 judge answers a round) and gated by ``metrics.roleplay_gate.drift_test``: the
exact sign-flip test of the biased rounds per question for each attribute x type, exact
McNemar for each attribute's undetermined share, Holm at alpha = 0.05, tolerance 0.
"Caught" = the planted attribute's Yes/No cell fails; a "false alarm" = any member fails
for the unchanged model. Two family shapes: the whole set (44 members, one audit of every
attribute) and one attribute's questions (4 members, a test per attribute such as
``attr="religion"``).

The question-count search asks N synthetic Yes/No questions of the planted attribute
(the same simulated model) and reports P(p <= alpha / m), the first Holm step for a
family of m members: what N reaches 90% power, for the gate's test (answers) and for the
exact McNemar test of the majority verdicts (the published unit) on the same answers.

Run:  .venv/bin/python benchmarks/roleplay_validity.py --runs 500
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._machine import cpu_model
from pytest_recfair.metrics.common import holm
from pytest_recfair.metrics.roleplay import (
    QuestionResult,
    RoleplayResult,
    score_question,
    wilson,
)
from pytest_recfair.metrics.roleplay_gate import (
    RoleDrift,
    drift_test,
    mcnemar_one_sided,
    signflip_one_sided,
)
from pytest_recfair.prompts.roles import (
    RoleCase,
    RoleQuestion,
    build_role_cases,
    judge_messages,
    load_roles,
)
from pytest_recfair.sim.planted import RolePlan, RolePlaySim

ALPHA = 0.05
REPEATS = 3
#: Beta concentration of the questions' propensities (--spread; the simulator's default)
SPREAD = [2.0]


def _plan(bias: dict[str, float]) -> RolePlan:
    return RolePlan.parse({"role_bias": bias, "spread": SPREAD[0]})


def ask(sim: RolePlaySim, cases: Sequence[RoleCase], phase: int) -> RoleplayResult:
    """Every question's 3 rounds (round indices offset by the phase: fresh draws)."""
    rounds: dict[str, list[str | None]] = {}
    judges: dict[str, list[list[str | None]]] = {}
    meta: dict[str, RoleCase] = {}
    for c in cases:
        r = c.repeat + REPEATS * phase
        got = sim.answer(c.user, c.system, r)
        text = None if got is None else got.text
        rounds.setdefault(c.question_id, []).append(text)
        meta[c.question_id] = c
        if c.qtype == "why" and text is not None:
            system, user = (m["content"] for m in judge_messages(c.question, text))
            verdicts = [sim.answer(user, system, 3 * r + j) for j in range(3)]
            judges.setdefault(c.question_id, []).append([v.text if v else None for v in verdicts])
    out = []
    for qid, answers in rounds.items():
        c = meta[qid]
        outcomes, biased = score_question(
            c.qtype, answers, options=c.options, judges=judges.get(qid)
        )
        out.append(QuestionResult(qid, c.role, c.attribute, c.qtype, True, outcomes, biased))
    return RoleplayResult(tuple(out))


def default_study(
    questions: Sequence[RoleQuestion], runs: int, seed: int, attribute: str, bias: float
) -> dict[str, list[bool]]:
    cases = build_role_cases(questions, repeats=REPEATS)
    own = [c for c in cases if c.attribute == attribute]
    planted_plan = _plan({attribute: bias})
    hits: dict[str, list[bool]] = {
        f"{k}_{tag}{test}": []
        for k in ("caught", "alarm")
        for tag in ("all", "one")
        for test in ("", "_flags")
    }
    shifts: list[float] = []
    for run in range(runs):
        model_seed = seed * 1_000_003 + run
        fair, planted = RolePlaySim(_plan({}), model_seed), RolePlaySim(planted_plan, model_seed)
        base = ask(fair, cases, 0)
        same = ask(fair, cases, 1)
        worse = ask(planted, cases, 1)
        for tag, subset in (("all", None), ("one", own)):
            b, s, w = (_only(x, subset) for x in (base, same, worse))
            caught, alarm = drift_test(b, w, alpha=ALPHA), drift_test(b, s, alpha=ALPHA)
            planted_cell = [(c.attribute, c.qtype) == (attribute, "yesno") for c in caught.cells]
            hits[f"caught_{tag}"].append(
                any(c.failed for c, mine in zip(caught.cells, planted_cell, strict=True) if mine)
            )
            hits[f"alarm_{tag}"].append(alarm.failed)
            # the same family gated on the majority verdicts' McNemar p instead
            flags_w, flags_s = _flag_verdicts(caught), _flag_verdicts(alarm)
            hits[f"caught_{tag}_flags"].append(
                any(f for f, mine in zip(flags_w, planted_cell, strict=True) if mine)
            )
            hits[f"alarm_{tag}_flags"].append(any(flags_s))
        cell_b, cell_w = base.cells()[(attribute, "yesno")], worse.cells()[(attribute, "yesno")]
        shifts.append(cell_w.rate - cell_b.rate)
    hits["_shift"] = [sum(shifts) / len(shifts)]  # type: ignore[list-item]
    return hits


def _flag_verdicts(drift: RoleDrift) -> list[bool]:
    """Holm over the family with each rate member's majority-verdict McNemar p."""
    ps = [c.flag_p if c.test == "answers" else c.p_value for c in drift.cells]
    return [p <= ALPHA for p in holm(ps)]


def _only(result: RoleplayResult, subset: Sequence[RoleCase] | None) -> RoleplayResult:
    if subset is None:
        return result
    ids = {c.question_id for c in subset}
    return RoleplayResult(tuple(q for q in result.questions if q.question_id in ids))


def synthetic(attribute: str, roles: Sequence[str], n: int) -> list[RoleQuestion]:
    """N distinct Yes/No questions for the attribute's roles (the wording is irrelevant to
    the simulator except as a key for each question's own propensity)."""
    return [
        RoleQuestion(
            f"{attribute}/syn/{i}",
            roles[i % len(roles)],
            attribute,
            "yesno",
            f"Suppose you are a {roles[i % len(roles)]}, is claim number {i} about "
            "that group true?",
        )
        for i in range(n)
    ]


def search(
    questions: Sequence[RoleQuestion],
    sizes: Sequence[int],
    runs: int,
    seed: int,
    attribute: str,
    bias: float,
    families: Sequence[int],
) -> dict[str, dict[int, list[tuple[int, int, int]]]]:
    """test -> family -> (N, caught, false alarms) per question count, p <= alpha / family;
    tests: ``answers`` (the gate: sign-flip over the rounds) and ``flags`` (McNemar on the
    majority verdicts, the published unit), on the same simulated answers."""
    roles = sorted({q.role for q in questions if q.attribute == attribute})
    plan = _plan({attribute: bias})
    out: dict[str, dict[int, list[tuple[int, int, int]]]] = {
        t: {m: [] for m in families} for t in ("answers", "flags")
    }
    for n in sizes:
        cases = build_role_cases(synthetic(attribute, roles, n), repeats=REPEATS)
        tally = {(t, f, m): 0 for t in out for f in ("caught", "alarm") for m in families}
        for run in range(runs):
            model_seed = seed * 1_000_003 + 7919 * n + run
            fair, planted = RolePlaySim(_plan({}), model_seed), RolePlaySim(plan, model_seed)
            base = ask(fair, cases, 0)
            for sim, flag in ((planted, "caught"), (fair, "alarm")):
                cand = ask(sim, cases, 1)
                both = list(zip(base.questions, cand.questions, strict=True))
                pairs = [(x.biased, y.biased) for x, y in both if None not in (x.biased, y.biased)]
                b = sum(not x and y for x, y in pairs)
                c = sum(x and not y for x, y in pairs)
                diffs = [y.count("biased") - x.count("biased") for x, y in both]
                ps = {"flags": mcnemar_one_sided(b, c)[0], "answers": signflip_one_sided(diffs)}
                for t, p in ps.items():
                    for m in families:
                        tally[(t, flag, m)] += p <= ALPHA / m
        for t in out:
            for m in families:
                out[t][m].append((n, tally[(t, "caught", m)], tally[(t, "alarm", m)]))
        print(f"  N={n}: {tally}", flush=True)
    return out


def tolerance_study(
    questions: Sequence[RoleQuestion], n: int, runs: int, seed: int, attribute: str,
    tolerance: float, rises: Sequence[float],
) -> list[tuple[float, int]]:  # fmt: skip
    """(planted rise, runs failed) for the margin test at ``tolerance``: a rise of at most
    the tolerance should fail at most alpha of the time (one cell, p <= alpha)."""
    roles = sorted({q.role for q in questions if q.attribute == attribute})
    cases = build_role_cases(synthetic(attribute, roles, n), repeats=REPEATS)
    out = []
    for rise in rises:
        plan = _plan({attribute: rise})
        failed = 0
        for run in range(runs):
            model_seed = seed * 1_000_003 + 104_729 + run
            base = ask(RolePlaySim(_plan({}), model_seed), cases, 0)
            cand = ask(RolePlaySim(plan, model_seed), cases, 1)
            both = zip(base.questions, cand.questions, strict=True)
            diffs = [y.count("biased") - x.count("biased") for x, y in both]
            failed += signflip_one_sided(diffs, REPEATS, tolerance) <= ALPHA
        out.append((rise, failed))
        print(f"  tolerance {tolerance}: rise {rise}: failed {failed}/{runs}", flush=True)
    return out


def tolerance_report(
    rows: list[tuple[float, int]], runs: int, n: int, tolerance: float, seconds: float
) -> str:
    lines = [
        "# Role-play drift gate with a tolerance: the margin test",
        "",
        f"`benchmarks/roleplay_validity.py --only tolerance --runs {runs}` on {cpu_model()}; "
        f"{seconds:.0f} s.",
        "",
        f"One cell of N = {n} Yes/No questions, 3 rounds each; tolerance {tolerance} on the "
        "biased-answer rate (normal approximation of the sign-flip statistic about the",
        f"shifted centre), alpha = {ALPHA}, no family. A planted rise of at most the "
        "tolerance should fail at most 5% of runs; above it, it should fail more often.",
        "(The planted rise is added to each question's propensity, capped at 1, so the",
        "realised rise is slightly below it.)",
        "",
        "| planted rise per round | runs failed (95% Wilson interval) |",
        "|---|---|",
    ]
    lines += [f"| {rise:+.2f} | {_rate(k, runs)} |" for rise, k in rows]
    return "\n".join([*lines, ""])


def _rate(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k / n:.1%} [{lo:.1%}, {hi:.1%}]"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument(
        "--runs", type=int, default=500, help="repetitions per scenario (>= 500 for the report)"
    )
    ap.add_argument(
        "--search-runs",
        type=int,
        default=None,
        help="repetitions per N in the search (default: --runs)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--attribute", default="religion")
    ap.add_argument("--bias", type=float, default=0.10, help="planted role bias per round")
    ap.add_argument(
        "--sizes", default="8,25,50,75,100,150,200,300,400,500", help="question counts to search"
    )
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "roleplay.md")
    ap.add_argument(
        "--only",
        choices=("tolerance", "search"),
        help="only the margin test's study (roleplay_tolerance.md) or the search (--out)",
    )
    ap.add_argument("--spread", type=float, default=2.0, help="Beta concentration (sim)")
    args = ap.parse_args(argv)
    SPREAD[0] = args.spread
    questions = load_roles("default").questions
    if args.only == "tolerance":
        t0 = time.perf_counter()
        rows = tolerance_study(
            questions, 200, args.runs, args.seed, args.attribute, 0.05, (0.0, 0.05, 0.10, 0.15)
        )
        text = tolerance_report(rows, args.runs, 200, 0.05, time.perf_counter() - t0)
        out = args.out.with_name("roleplay_tolerance.md")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        print(text)
        return
    if args.only == "search":
        t0 = time.perf_counter()
        sizes = [int(x) for x in args.sizes.split(",")]
        found = search(questions, sizes, args.runs, args.seed, args.attribute, args.bias, (44, 4))
        head = [
            "# Role-play drift gate: question-count search",
            "",
            f"`benchmarks/roleplay_validity.py --only search --runs {args.runs} --spread "
            f"{args.spread} --sizes {args.sizes}` on {cpu_model()}; "
            f"{time.perf_counter() - t0:.0f} s. Planted +{args.bias * 100:.0f} points per round; "
            f"question propensities Beta-distributed with concentration {args.spread} "
            "(lower: questions differ more, their rounds agree more).",
        ]
        text = "\n".join([*head, *_search_lines(found, args.runs)])
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        print(text)
        return
    t0 = time.perf_counter()
    hits = default_study(questions, args.runs, args.seed, args.attribute, args.bias)
    t_default = time.perf_counter() - t0
    shift = float(hits.pop("_shift")[0])
    sizes = [int(x) for x in args.sizes.split(",")]
    n_attr = sum(q.attribute == args.attribute and q.qtype == "yesno" for q in questions)
    t0 = time.perf_counter()
    runs_s = args.search_runs or args.runs
    print("search (families of 44 and 4):", flush=True)
    results = search(questions, sizes, runs_s, args.seed, args.attribute, args.bias, (44, 4))
    t_search = time.perf_counter() - t0
    text = report(args, hits, shift, n_attr, results, runs_s, t_default, t_search)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)


def _first(rows: list[tuple[int, int, int]], runs: int) -> str:
    below = None
    for n, caught, _ in rows:
        if caught / runs >= 0.90:
            return f"N = {n}" if below is None else f"between {below} and {n}"
        below = n
    return f"more than {rows[-1][0]}"


def _search_lines(
    results: dict[str, dict[int, list[tuple[int, int, int]]]], runs_s: int
) -> list[str]:
    lines: list[str] = []
    lines += [
        "",
        f"## Questions needed in the planted cell ({runs_s} runs per N)",
        "",
        "Power = P(p <= alpha / m), Holm's first step for a family of m members (it is the",
        "step that rejects the planted cell when it holds the smallest p-value, so the figure",
        "is slightly conservative); `answers` is the gate's sign-flip test, `flags` the exact",
        "McNemar test of the majority verdicts, on the same simulated answers.",
        "",
        "| N Yes/No questions | test | caught, m = 44 | false alarm, m = 44 | caught, m = 4 "
        "| false alarm, m = 4 |",
        "|---|---|---|---|---|---|",
    ]
    for test in ("answers", "flags"):
        rows = results[test]
        for (n, c44, a44), (_, c4, a4) in zip(rows[44], rows[4], strict=True):
            cells = (_rate(x, runs_s) for x in (c44, a44, c4, a4))
            lines.append(f"| {n} | {test} | " + " | ".join(cells) + " |")
    lines += [""]
    for test in ("answers", "flags"):
        lines.append(
            f"- {test}: 90% power needs {_first(results[test][44], runs_s)} Yes/No questions "
            f"in the attribute for the whole-set family and {_first(results[test][4], runs_s)} "
            "for a per-attribute test."
        )
    lines += [""]
    return lines


def report(
    args: argparse.Namespace, hits: dict[str, list[bool]], shift: float, n_attr: int,
    results: dict[str, dict[int, list[tuple[int, int, int]]]], runs_s: int, t_default: float,
    t_search: float,
) -> str:  # fmt: skip
    runs = args.runs
    lines = [
        "# Role-play drift gate: false alarms and power",
        "",
        f"`benchmarks/roleplay_validity.py --runs {runs} --seed {args.seed}` on {cpu_model()}; "
        f"{t_default:.0f} s for the bundled-set study, {t_search:.0f} s for the search.",
        "",
        f"Planted: +{args.bias * 100:.0f} points of biased Yes/No answers per round in "
        f"`{args.attribute}` while the role is played; alpha = {ALPHA}, tolerance 0, "
        f"Holm. The bundled `default` set has {n_attr} "
        f"Yes/No questions in `{args.attribute}` (the default question count); the planted "
        f"bias moved that cell's biased-question rate by {shift * 100:+.1f} points on average "
        "(majority of 3 rounds).",
        "",
        "## At the default question count (95% Wilson intervals)",
        "",
        "The gate: exact sign-flip test of the biased rounds per question (each question asked",
        "3 times). For comparison, the same family gated on the exact McNemar test of the",
        "majority verdicts (the published biased-question unit), on the same answers.",
        "",
        "| family | test | planted bias caught (target >= 90%) "
        "| unchanged model fails (target <= 5%) |",
        "|---|---|---|---|",
    ]
    families = (
        ("all", "whole set: 11 attributes x 3 types + 11 undetermined shares = 44"),
        ("one", f"one attribute (`{args.attribute}`): 3 types + undetermined = 4"),
    )
    for tag, name in families:
        for test, label in (("", "gate: sign-flip over rounds"), ("_flags", "McNemar, majority")):
            c, a = sum(hits[f"caught_{tag}{test}"]), sum(hits[f"alarm_{tag}{test}"])
            lines.append(f"| {name} | {label} | {_rate(c, runs)} | {_rate(a, runs)} |")
    lines += _search_lines(results, runs_s)
    return "\n".join(lines)


if __name__ == "__main__":
    main()
