"""``import biaslens DIR``: ``DIR/answers/{role,without_role}/<model>/<attribute>_answers_0N
.csv`` read as the paper's table script reads them, into a project that replays them: a
role-play test per attribute, a ``published`` questions file, cassettes (judge calls answer
what ``final`` says). Every input row is imported or named in the summary."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from pytest_recfair import secrets
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.fileio import staged_folder
from pytest_recfair.importer.published import read_csv, write_files
from pytest_recfair.importer.run import completion, new_folder, pytest_ini, record
from pytest_recfair.metrics.roleplay import why_outcome
from pytest_recfair.prompts.roles import ATTRIBUTE_ALIASES, ATTRIBUTES, JUDGE_REPEATS, load_roles

ROUNDS = 3
JUDGE = "biaslens-judge"
TEST_FILE = "test_biaslens.py"
#: The question types the paper's table script counts, spelled as it compares them.
_TYPES = {"Yes/No": "yesno", "Choice": "choice", "Wh": "why"}


@dataclass(frozen=True)
class _Row:
    where: str  # "<file>:<line>"
    cells: dict[str, str]  # scrubbed


#: (role, qtype, question) and the three rounds' rows, per question of the driving file.
Rounds = list[tuple[tuple[str, str, str], list[_Row]]]
#: why -> the input rows left out for it ("<file>:<line>").
Left = dict[str, list[str]]


@dataclass(frozen=True)
class BiasLensSummary:
    out: Path
    model: str
    attributes: dict[str, int]  # questions per attribute
    interactions: int
    left: Mapping[str, Sequence[str]]  # why -> the input rows left out for it
    notes: tuple[str, ...] = ()  # how the files were read (bytes that are not UTF-8)

    def lines(self) -> list[str]:
        """The import's report: what was imported, every row left out and why (scrubbed)."""
        counts = ", ".join(f"{a} ({n})" for a, n in self.attributes.items())
        skipped = sum(len(v) for v in self.left.values())
        out = [
            f"imported BiasLens {self.model}: questions {counts}; {self.interactions} answers "
            f"and judge calls recorded; {skipped} input rows left out" + (":" if self.left else "")
        ]
        out += [f"  {len(rows)} {why}: {_places(rows)}" for why, rows in self.left.items()]
        out += list(self.notes)
        out.append(f"re-run offline: cd {self.out} && pytest --fairness --fairness-update")
        return [secrets.scrub(line) for line in out]


def _places(rows: Sequence[str]) -> str:
    """``a.csv:3, a.csv:5, b.csv:4`` as ``a.csv lines 3, 5; b.csv line 4``."""
    by_file: dict[str, list[str]] = {}
    for row in rows:
        file, _, line = row.rpartition(":")
        by_file.setdefault(file, []).append(line)
    return "; ".join(
        f"{f} line{'s' if len(n) > 1 else ''} {', '.join(n)}" for f, n in by_file.items()
    )


def _judges(row: _Row, disagree: dict[str, None]) -> list[str]:
    """A Why round's three judge answers, giving the verdict the table reads off ``final``
    (``yes``: judged biased): the published ``LLM 1..3`` where they agree with it, else
    answers made from ``final`` (a round whose judges disagree goes to ``disagree``)."""
    given = [(row.cells.get(f"LLM {j}") or "").strip() for j in range(1, JUDGE_REPEATS + 1)]
    unfair = (row.cells.get("final") or "").lower() == "yes"  # as the script compares it
    if all(given) and why_outcome(None, given, "biaslens") == ("biased" if unfair else "unbiased"):
        return given
    if all(given):
        disagree[row.where] = None
    return ["No" if unfair else "Yes"] * JUDGE_REPEATS


def _key(row: _Row) -> tuple[str, str, str]:  # matched as the script does: the cells exactly
    return (row.cells["Role"], row.cells["Question Type"], row.cells["Question"])


def _rounds(folder: Path, attribute: str, left: Left, notes: list[str]) -> Rounds:
    """The questions of the shortest round file, in its order, as the paper's table script
    counts them: a question repeated there is counted again (its own answer, the other
    files' first), one missing from another file reads the answer None there (said in
    ``notes``); every other row is added to ``left``."""
    files = [folder / f"{attribute}_answers_0{r}.csv" for r in range(1, ROUNDS + 1)]
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        raise DataError(f"import biaslens: missing round file(s) {missing}")
    need = ("Role", "Question Type", "Question", "Answer")
    hint = "expected the released answers' 'Role, Question Type, Question, Answer, LLM 1, ...'"
    tables = [  # read as the paper's table script reads them
        [_Row(f"{p.name}:{line}", c) for line, c in read_csv(p, need, hint, notes)] for p in files
    ]
    empty = [p.name for p, rows in zip(files, tables, strict=True) if not rows]
    if empty:  # the table's driving file has no row: no question of the attribute counts
        notes.append(f"{attribute} left out: {', '.join(empty)} hold(s) only the header")
        why = f"rows of {attribute}, whose round file {empty[0]} holds only its header"
        if any(tables):
            left.setdefault(why, []).extend(r.where for rows in tables for r in rows)
        return []
    driver = min(range(ROUNDS), key=lambda r: len(tables[r]))
    keyed: list[dict[tuple[str, str, str], _Row]] = []
    for r, rows in enumerate(tables):
        index: dict[tuple[str, str, str], _Row] = {}
        for row in rows:
            if _key(row) in index and r != driver:  # the script reads the first match
                why = "repeats of a question in a round file that does not drive"
                left.setdefault(why, []).append(row.where)
            index.setdefault(_key(row), row)
        keyed.append(index)
    for r, index in enumerate(keyed):
        for key, row in index.items() if r != driver else ():
            if key not in keyed[driver]:
                why = "rows whose question the driving (shortest) round file does not hold"
                left.setdefault(why, []).append(row.where)
    out: Rounds = []
    unanswered: list[str] = []
    for row in tables[driver]:  # one missing elsewhere reads the answer None, as the script
        got = [row if i == driver else k.get(_key(row)) for i, k in enumerate(keyed)]
        unanswered += [row.where] if None in got else []
        out.append((_key(row), [g or _Row(row.where, {}) for g in got]))
    if unanswered:
        notes.append(
            f"{len(unanswered)} question(s) missing from another {attribute} round file, "
            f"read there with the answer None as the paper's script reads them: "
            f"{_places(unanswered)}"
        )
    return out


def _record(root: Path, cases: Sequence[Any], texts: Mapping[str, str], model: str) -> Any:
    """Record ``cases``; the mock network answers by case id with the published text."""

    def answer(request: httpx.Request) -> dict[str, Any] | None:
        case = request.extensions.get("recfair_case")
        text = None if case is None else texts.get(case.id)
        return (
            None if case is None or text is None else completion(model, text, case.id, "biaslens")
        )

    return record(root, cases, answer, test_id=TEST_FILE, model=model, what="import biaslens")


def _test_file(attributes: Sequence[str], without_role: bool) -> str:
    lines = [
        '"""The published BiasLens answers re-run offline (python -m pytest_recfair import '
        'biaslens)."""',
        "",
        "from pytest_recfair import fairness",
    ]
    for a in attributes:
        lines += [
            "",
            "",
            f'@fairness(kind="roleplay", questions="questions.json", attr="{a}", '
            f'oracle="biaslens", with_role={not without_role})',
            f"def test_{a}():",
            "    pass",
        ]
    return "\n".join(lines) + "\n"


def _questions(
    folder: Path, left: Left, notes: list[str]
) -> tuple[list[dict[str, str]], list[list[_Row]]]:
    """The question rows to write, and each one's three input rows."""
    rows: list[dict[str, str]] = []
    sources: list[list[_Row]] = []
    found = sorted(p.name.split("_answers_")[0] for p in folder.glob("*_answers_01.csv"))
    for stem in found:
        attribute = ATTRIBUTE_ALIASES.get(stem.casefold(), stem.casefold())
        if attribute not in ATTRIBUTES:
            raise DataError(
                f"import biaslens: {str(folder / f'{stem}_answers_01.csv')!r} is named for "
                f"{stem!r}, not one of the attributes {', '.join(ATTRIBUTES)}; rename its three "
                "round files <attribute>_answers_0N.csv or move them out of the folder"
            )
        for key, got in _rounds(folder, stem, left, notes):
            qtype = _TYPES.get(key[1])
            if qtype is None:
                why = "questions of a type the paper's table does not count (3 rows each)"
                left.setdefault(why, []).extend(r.where for r in got)
                continue
            rows.append({"role": key[0], "attribute": attribute, "type": qtype, "question": key[2]})
            sources.append(got)
    return rows, sources


def import_biaslens(
    source: str | Path, out: str | Path, *, model: str | None = None, without_role: bool = False
) -> BiasLensSummary:
    """Write the re-run of one model's published answers into the new folder ``out``."""
    base = Path(source) / "answers" / ("without_role" if without_role else "role")
    if not base.is_dir():
        raise DataError(f"import biaslens: {str(base)!r} is not a folder; give the BiasLens root")
    models = sorted(p.name for p in base.iterdir() if p.is_dir())
    if model is None and len(models) != 1:
        raise ConfigError(f"import biaslens: give --model, one of {', '.join(models)}")
    name = models[0] if model is None else model
    if name not in models:
        raise ConfigError(f"import biaslens: no model {name!r}; found {', '.join(models)}")
    folder, out = base / name, new_folder(out)
    left: Left = {}
    notes: list[str] = []
    rows, sources = _questions(folder, left, notes)
    if not rows:
        why = "; ".join(notes) or "no <attribute>_answers_01.csv"
        raise DataError(f"import biaslens: {str(folder)!r} holds no question to import ({why})")
    with staged_folder(out) as tmp:
        counts, interactions = _write(tmp, secrets.scrub(name), rows, sources, without_role, notes)
    return BiasLensSummary(out, secrets.scrub(name), counts, interactions, left, tuple(notes))


def _write(
    out: Path,
    name: str,
    rows: list[dict[str, str]],
    sources: Sequence[Sequence[_Row]],
    without_role: bool,
    notes: list[str],
) -> tuple[dict[str, int], int]:
    """Write the project into ``out``: (questions per attribute, interactions recorded)."""
    from pytest_recfair.engine import registry
    from pytest_recfair.engine.base import AuditInputs
    from pytest_recfair.prompts.grids import load_grid
    from pytest_recfair.prompts.seeds import Entity
    from pytest_recfair.settings import resolve

    table = {"name": f"biaslens-{name}", "published": True, "questions": rows}
    attributes = sorted({r["attribute"] for r in rows})  # a published set keeps every row
    write_files(
        out,
        {
            "questions.json": json.dumps(table, indent=1),
            TEST_FILE: _test_file(attributes, without_role),
            "pytest.ini": pytest_ini(name, "reports/biaslens.json", judge_model=JUDGE),
        },
    )
    try:  # the written questions through the project's loader; errors name the input rows
        questions = load_roles(out / "questions.json", strict=True)
    except DataError as exc:
        where = re.search(r"questions\[(\d+)\][.:]? ?", str(exc))
        got = sources[int(where.group(1))] if where else []
        message = str(exc).split(where.group(0) if where else ": ", 1)[-1]
        raise DataError(
            f"import biaslens: {_places([r.where for r in got]) or 'the answer files'}: {message}"
        ) from None
    by_question = {q.id: got for q, got in zip(questions, sources, strict=True)}
    marker = {"kind": "roleplay", "questions": str(out / "questions.json"), "oracle": "biaslens"}
    settings = resolve(marker={**marker, "with_role": not without_role})
    inputs = AuditInputs(judge=object())  # Why questions are asked: their judges are recorded
    entities = [Entity(q.id, q.question, settings.domain) for q in questions]
    kind = registry.kind_for(settings)  # by kind= in the settings: the role-play audit
    cases = kind.build_cases(settings, load_grid("faireval"), entities, inputs)
    texts = {
        c.id: (by_question[c.question_id][c.repeat].cells.get("Answer") or "").strip() or "None"
        for c in cases
    }
    outcome = _record(out / "cassettes", cases, texts, name)
    judges = kind.follow_up(settings, cases, outcome)  # type: ignore[attr-defined]
    disagree: dict[str, None] = {}
    r = JUDGE_REPEATS  # a judge call's repeat: its round times the judges, plus its judge
    rounds = {j.id: by_question[j.entity_id][j.repeat // r] for j in judges}
    verdicts = {j.id: _judges(rounds[j.id], disagree)[j.repeat % r] for j in judges}
    if disagree:
        notes.append(
            f"{len(disagree)} Why round(s) whose judges (LLM 1..3) disagree with 'final': "
            f"recorded as 'final' says, which the paper's table reads: {_places(list(disagree))}"
        )
    if judges:
        _record(out / "cassettes", judges, verdicts, JUDGE)
    return dict(Counter(q.attribute for q in questions)), len(cases) + len(judges)
