"""Recover the prompts of files whose prompt column holds replies, from ``batch_input.jsonl``.

In some published folders (FairEval's OpenAI runs) the processing script overwrote the
CSV's ``Instruction`` column with the reply; the prompts the model was asked are only in
the Batch API request file. A file is taken to hold replies when most of its rows' prompts
do not name the row's entity (or equal its reply). Its template is then found among the
batch prompts of its own folder (or of the whole run): the one which, filled with each
row's entity and the file's value, gives a prompt the batch file holds for EVERY row.

Pure: stdlib only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from pytest_recfair.importer.published import NEUTRAL, PublishedRun, Row
from pytest_recfair.importer.template import fill, template_of

__all__ = ["holds_replies", "recover_prompts"]


def holds_replies(rows: Mapping[str, Row]) -> bool:
    """Most rows' prompts are not prompts for their entity (or are the reply itself)."""
    bad = sum(
        1 for r in rows.values() if not r.prompt or r.name not in r.prompt or r.prompt == r.reply
    )
    return bool(rows) and 2 * bad > len(rows)


def _pool(run: PublishedRun, key: str) -> Sequence[tuple[str, str]]:
    source = run.sources.get(key)
    if source is not None and run.asked.get(source.parent):
        return run.asked[source.parent]
    return [p for asked in run.asked.values() for p in asked]


def _find(
    rows: Mapping[str, Row],
    value: str | None,
    pool: Sequence[tuple[str, str]],
    avoid: Sequence[str],
) -> dict[str, tuple[str, str]] | None:
    """name -> (system, prompt) from one template that covers every row, or None."""
    by_prompt = {user: (system, user) for system, user in pool}
    first = next(iter(rows.values()))
    for _, user in pool:
        if first.name not in user or (value is not None and value not in user):
            continue
        if value is None and any(v in user for v in avoid):
            continue  # a conditioned prompt, not the neutral one
        template = template_of(user, first.name, value)
        if template is None:
            continue
        found = {r.name: by_prompt.get(fill(template, r.name, value)) for r in rows.values()}
        if all(found.values()):
            return {name: hit for name, hit in found.items() if hit is not None}
    return None


def recover_prompts(run: PublishedRun) -> tuple[PublishedRun, list[str]]:
    """``run`` with prompts taken from the batch files where the CSVs hold replies."""
    files: dict[str, tuple[Mapping[str, Row], str | None]] = {NEUTRAL: (run.neutral, None)}
    for cls, values in run.classes.items():
        files |= {f"{cls}/{value}": (rows, value) for value, rows in values.items()}
    values_text = [v for vals in run.classes.values() for v in vals]
    fixed: dict[str, dict[str, Row]] = {}
    unfound: list[str] = []
    for key, (rows, value) in files.items():
        if not rows or not holds_replies(rows):
            continue
        hits = _find(rows, value, _pool(run, key), values_text) if run.asked else None
        if hits is None:
            unfound.append(key)
            continue
        fixed[key] = {
            name: replace(row, system=hits[name][0], prompt=hits[name][1])
            for name, row in rows.items()
        }
    notes = []
    if fixed:
        notes.append(
            f"prompts: the CSV 'Instruction' column holds replies in {len(fixed)} file(s); "
            "the prompts were taken from batch_input.jsonl"
        )
    if NEUTRAL in unfound:  # no prompt to recover the templates from: the bundled set
        notes.append(
            "prompts: neutral.csv's 'Instruction' holds replies and no batch_input.jsonl "
            "prompt fits it; the bundled template set is used for every class"
        )
        return _without_prompts(run), notes
    if unfound:
        notes.append(
            f"prompts: {len(unfound)} file(s) hold replies in 'Instruction' and no batch "
            f"prompt fits them ({', '.join(unfound[:3])}); their class is skipped"
        )
    if not fixed:
        return run, notes
    neutral = fixed.get(NEUTRAL, dict(run.neutral))
    classes = {
        cls: {v: fixed.get(f"{cls}/{v}", dict(rows)) for v, rows in vals.items()}
        for cls, vals in run.classes.items()
    }
    return replace(run, neutral=neutral, classes=classes), notes


def _without_prompts(run: PublishedRun) -> PublishedRun:
    def clear(rows: Mapping[str, Row]) -> dict[str, Row]:
        return {name: replace(row, prompt=None) for name, row in rows.items()}

    classes = {
        cls: {v: clear(rows) for v, rows in vals.items()} for cls, vals in run.classes.items()
    }
    return replace(run, neutral=clear(run.neutral), classes=classes)
