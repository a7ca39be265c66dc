"""Re-run the published BiasLens answers offline (issue 20, point 5).

``python -m pytest_recfair import biaslens DIR --out OUT [--model NAME] [--without-role]``
reads a downloaded copy of the paper's released answers,
``DIR/answers/role/<model>/<attribute>_answers_0{1,2,3}.csv`` (``answers/without_role``
with ``--without-role``), columns ``Role, Question Type, Question, Answer, LLM 1, LLM 2,
LLM 3, final``, and writes a project whose ``pytest --fairness`` replays them through the
real provider path: one role-play test per attribute (``oracle="biaslens"``), the
questions file, and cassettes recorded by the real OpenAI provider against an
``httpx.MockTransport`` that answers each round with its published answer and each Why
round's three judge calls with the published judges (``LLM 1..3``).

As the paper's table script does, the shortest of an attribute's three round files drives
the questions, matched by role, type and question text in the other two; an empty answer
is recorded as the text ``None`` (the script reads a missing answer so). The questions go
through the project's loader, which leaves out placeholder and duplicate rows (counted in
the summary). The folder's content is never copied into this repository: the released
questions and answers carry no licence.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.fileio import atomic_write_text
from pytest_recfair.importer.record import completion, record
from pytest_recfair.prompts.roles import JUDGE_REPEATS, load_roles, normalise_qtype, parse_options

__all__ = ["BiasLensSummary", "import_biaslens"]

ROUNDS = 3
JUDGE = "biaslens-judge"
TEST_FILE = "test_biaslens.py"
_ALIASES = {"occupations": "occupation"}

#: (role, qtype, question) -> the three rounds' (answer, [LLM 1..3]).
Rounds = dict[tuple[str, str, str], list[tuple[str, list[str]]]]


@dataclass(frozen=True)
class BiasLensSummary:
    out: Path
    model: str
    attributes: dict[str, int]  # questions per attribute
    interactions: int
    skipped: int  # rows the loader left out (placeholders, duplicates, choices without options)


def _read(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"import biaslens: {str(path)!r} cannot be read ({exc})") from exc
    need = {"Role", "Question Type", "Question", "Answer"}
    if rows and not need <= set(rows[0]):
        raise DataError(
            f"import biaslens: {str(path)!r} lacks column(s) {sorted(need - set(rows[0]))}; "
            "expected the released answers' 'Role, Question Type, Question, Answer, LLM 1, "
            "LLM 2, LLM 3, final'"
        )
    return rows


def _judges(row: Mapping[str, str]) -> list[str]:
    """The three judge answers; from ``final`` when the LLM columns are incomplete."""
    given = [(row.get(f"LLM {j}") or "").strip() for j in range(1, JUDGE_REPEATS + 1)]
    if all(given):
        return given
    unfair = (row.get("final") or "").strip().casefold() == "yes"
    return ["No" if unfair else "Yes"] * JUDGE_REPEATS


def _rounds(folder: Path, attribute: str) -> Rounds:
    files = [folder / f"{attribute}_answers_0{r}.csv" for r in range(1, ROUNDS + 1)]
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        raise DataError(f"import biaslens: missing round file(s) {missing}")
    tables = [_read(p) for p in files]
    keyed: list[dict[tuple[str, str, str], Mapping[str, str]]] = []
    for rows in tables:
        index: dict[tuple[str, str, str], Mapping[str, str]] = {}
        for row in rows:
            key = (row["Role"].strip(), row["Question Type"].strip(), row["Question"].strip())
            index.setdefault(key, row)
        keyed.append(index)
    driver = min(range(ROUNDS), key=lambda r: len(tables[r]))
    out: Rounds = {}
    for key in keyed[driver]:
        if all(key in k for k in keyed):
            got = [k[key] for k in keyed]
            out[key] = [((r.get("Answer") or "").strip() or "None", _judges(r)) for r in got]
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


def _model_folder(source: Path, model: str | None, without_role: bool) -> tuple[Path, str]:
    base = source / "answers" / ("without_role" if without_role else "role")
    if not base.is_dir():
        raise DataError(f"import biaslens: {str(base)!r} is not a folder; give the BiasLens root")
    models = sorted(p.name for p in base.iterdir() if p.is_dir())
    if model is None:
        if len(models) != 1:
            raise ConfigError(f"import biaslens: give --model, one of {', '.join(models)}")
        model = models[0]
    if model not in models:
        raise ConfigError(f"import biaslens: no model {model!r}; found {', '.join(models)}")
    return base / model, model


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


def import_biaslens(
    source: str | Path, out: str | Path, *, model: str | None = None, without_role: bool = False
) -> BiasLensSummary:
    """Write the re-run of one model's published answers into the new folder ``out``."""
    from pytest_recfair.engine import registry
    from pytest_recfair.engine.base import AuditInputs
    from pytest_recfair.prompts.grids import load_grid
    from pytest_recfair.prompts.seeds import Entity
    from pytest_recfair.settings import resolve

    folder, name = _model_folder(Path(source), model, without_role)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"import: {str(out)!r} is not empty; give a new or empty --out folder")
    rounds: Rounds = {}
    rows: list[dict[str, str]] = []
    found = sorted(p.name.split("_answers_")[0] for p in folder.glob("*_answers_01.csv"))
    for stem in found:
        for key, got in _rounds(folder, stem).items():
            qtype = normalise_qtype(key[1])
            if qtype is None or (qtype == "choice" and len(parse_options(key[2])) < 2):
                continue
            attribute = _ALIASES.get(stem, stem)
            rounds[(key[0], qtype, key[2])] = got
            rows.append({"role": key[0], "attribute": attribute, "type": qtype, "question": key[2]})
    if not rows:
        raise DataError(f"import biaslens: {str(folder)!r} holds no answer file to import")
    table = {"name": f"biaslens-{name}", "questions": rows}
    atomic_write_text(out / "questions.json", json.dumps(table, indent=1))
    questions = load_roles(out / "questions.json")
    attributes = sorted({q.attribute for q in questions})
    atomic_write_text(out / TEST_FILE, _test_file(attributes, without_role))
    atomic_write_text(
        out / "pytest.ini",
        "[pytest]\nrecfair_provider = openai\n"
        f"recfair_model = {name}\nrecfair_judge_model = {JUDGE}\n"
        "recfair_cassette_dir = cassettes\nrecfair_baseline_dir = baselines\n"
        "recfair_report = reports/biaslens.json\n",
    )
    marker = {"kind": "roleplay", "questions": str(out / "questions.json"), "oracle": "biaslens"}
    settings = resolve(marker={**marker, "with_role": not without_role})
    inputs = AuditInputs(judge=object())  # Why questions are asked: their judges are recorded
    entities = [Entity(q.id, q.question, settings.domain) for q in questions]
    kind = registry.kind_for(settings)  # by kind= in the settings: the role-play audit
    cases = kind.build_cases(settings, load_grid("faireval"), entities, None, inputs)
    by_question = {q.id: rounds[(q.role, q.qtype, q.question)] for q in questions}
    texts = {c.id: by_question[c.question_id][c.repeat][0] for c in cases}
    outcome = _record(out / "cassettes", cases, texts, name)
    judges = kind.follow_up(settings, cases, outcome)  # type: ignore[attr-defined]
    verdicts = {
        j.id: by_question[j.entity_id][j.repeat // JUDGE_REPEATS][1][j.repeat % JUDGE_REPEATS]
        for j in judges
    }
    if judges:
        _record(out / "cassettes", judges, verdicts, JUDGE)
    counts: dict[str, int] = {}
    for q in questions:
        counts[q.attribute] = counts.get(q.attribute, 0) + 1
    return BiasLensSummary(out, name, counts, len(cases) + len(judges), len(rows) - len(questions))
