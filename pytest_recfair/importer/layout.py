"""Turn a published run into the project's inputs: seeds, grid, templates and test file.

Templates are recovered from the published prompts themselves (entity name -> ``{entity}``,
value text -> ``{value}``) and checked against EVERY row, so the prompts the audit builds
are the published ones character for character; the set is ``verbatim`` (no translation,
no elision) and gets a ``neutral_system`` when the neutral prompt had its own system
message. Without prompt columns the bundled ``faireval``/``fairllm`` set is used.

Pure: stdlib + yaml.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from pytest_recfair.errors import DataError
from pytest_recfair.importer.published import PublishedRun, Row
from pytest_recfair.prompts.seeds import slugify

__all__ = ["Layout", "absent_cases", "entity_ids", "grid_yaml", "plan", "templates_yaml"]

_DOMAIN = re.compile(r"\ba (\w+) recommendation system\b", re.IGNORECASE)


@dataclass(frozen=True)
class Layout:
    """What the import writes: ``templates`` is a YAML text, or a bundled set name."""

    templates: str
    templates_file: bool
    domain: str
    model: str | None


def entity_ids(names: list[str]) -> dict[str, str]:
    """name -> a unique, file-safe id."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        base = slugify(name)
        ident, i = base, 2
        while ident in used:
            ident, i = f"{base}-{i}", i + 1
        used.add(ident)
        out[name] = ident
    return out


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _template_of(row: Row, value: str | None, where: str) -> str:
    prompt = row.prompt or ""
    if row.name not in prompt:
        raise DataError(f"import: {where}: the prompt does not contain the entity {row.name!r}")
    text = _escape(prompt)
    if value is not None:
        at = text.find(_escape(value))
        if at < 0:
            raise DataError(f"import: {where}: the prompt does not contain the value {value!r}")
        text = text[:at] + "{value}" + text[at + len(_escape(value)) :]
    return text.replace(_escape(row.name), "{entity}")


def _fill(template: str, name: str, value: str | None) -> str:
    text = template.replace("{entity}", "\0E").replace("{value}", "\0V")
    text = text.replace("{{", "{").replace("}}", "}")
    return text.replace("\0E", name).replace("\0V", value or "")


def _one(
    run: PublishedRun, rows: Mapping[str, Row], value: str | None, template: str, where: str
) -> None:
    for row in rows.values():
        if _fill(template, row.name, value) != row.prompt:
            raise DataError(
                f"import: {where}, entity {row.name!r}: its prompt differs from the others' "
                f"({row.prompt!r}); a published run must use one template"
            )


def _system(rows: Mapping[str, Row], where: str) -> str | None:
    systems = {r.system for r in rows.values()}
    if len(systems) > 1:
        raise DataError(
            f"import: {where}: rows have different system messages {sorted(map(str, systems))[:2]}"
        )
    return next(iter(systems))


def templates_yaml(run: PublishedRun, language: str, name: str) -> tuple[str, str]:
    """The verbatim template set (YAML text) and the domain its system message names."""
    first_class, values = next(iter(run.classes.items()))
    first_value, rows = next(iter(values.items()))
    if not rows:
        raise DataError(f"import: {first_class}/{first_value}.csv has no row")
    sample = next(iter(rows.values()))
    neutral_row = next(iter(run.neutral.values()))
    conditioned = _template_of(sample, first_value, f"{first_class}/{first_value}.csv")
    neutral = _template_of(neutral_row, None, "neutral.csv")
    _one(run, run.neutral, None, neutral, "neutral.csv")
    system = None
    for cls, vals in run.classes.items():
        for value, vrows in vals.items():
            _one(run, vrows, value, conditioned, f"{cls}/{value}.csv")
            got = _system(vrows, f"{cls}/{value}.csv")
            if system is not None and got != system:
                raise DataError(
                    f"import: {cls}/{value}.csv has another system message than the other files"
                )
            system = got
    neutral_system = _system(run.neutral, "neutral.csv")
    match = _DOMAIN.search(system or "")
    entry: dict[str, object] = {"system": _escape(system or "")}
    if neutral_system != system:
        entry["neutral_system"] = _escape(neutral_system or "")
    entry |= {"neutral": neutral, "conditioned": conditioned, "verbatim": True}
    data = {
        "name": name,
        "description": f"imported verbatim from {run.root.name} (python -m pytest_recfair import)",
        "languages": {language: entry},
    }
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=10**6), (
        match.group(1).lower() if match else "movie"
    )


def grid_yaml(run: PublishedRun, name: str) -> str:
    """One attribute per class, one value per file, worded (and labelled) as published."""
    attributes = [
        {"name": cls, "values": [{"label": v, "text": v} for v in vals]}
        for cls, vals in run.classes.items()
    ]
    data = {"name": name, "articles": "included", "attributes": attributes}
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=10**6)


def absent_cases(run: PublishedRun, ids: Mapping[str, str]) -> list[dict[str, str]]:
    """Every (class, value, entity) the published run never answered."""
    return [
        {"attribute": cls, "value": value, "entity_id": ids[name]}
        for cls, vals in run.classes.items()
        for value, rows in vals.items()
        for name in run.neutral
        if name not in rows
    ]


def _model(run: PublishedRun) -> str | None:
    models = {str(b.body.get("model")) for b in run.batch.values() if b.body.get("model")}
    return sorted(models)[0] if len(models) == 1 else None


def plan(run: PublishedRun, *, flavour: str, language: str) -> Layout:
    """Templates (recovered or bundled), domain and model of a published run."""
    has_prompts = all(r.prompt for r in run.neutral.values())
    if has_prompts:
        text, domain = templates_yaml(run, language, f"published-{flavour}")
        return Layout(text, True, domain, _model(run))
    system = next(iter(run.neutral.values())).system or ""
    match = _DOMAIN.search(system)
    return Layout(flavour, False, match.group(1).lower() if match else "movie", _model(run))


def dumps_json(data: object) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"
