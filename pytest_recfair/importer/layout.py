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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import yaml

from pytest_recfair.errors import DataError
from pytest_recfair.importer.published import PublishedRun, Row, escape, fill, template_of
from pytest_recfair.prompts.seeds import slugify
from pytest_recfair.secrets import FILTERED

__all__ = ["Layout", "absent_cases", "entity_ids", "grid_yaml", "plan", "template_files"]

_DOMAIN = re.compile(r"\ba (\w+) recommendation system\b", re.IGNORECASE)


@dataclass(frozen=True)
class Layout:
    """What the import writes.

    ``templates``: class -> the marker's ``templates`` (a file written here, or a bundled
    set name); ``files``: template file name -> YAML text; ``skipped``: class -> why.
    """

    templates: Mapping[str, str]
    files: Mapping[str, str]
    domain: str
    model: str | None
    skipped: Mapping[str, str] = field(default_factory=dict)


def entity_ids(names: list[str], scope: str | None = None) -> dict[str, str]:
    """name -> a unique, file-safe id (prefixed by ``scope``, a class, when given)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    prefix = f"{slugify(scope)}." if scope else ""
    for name in names:
        base = prefix + slugify(name)
        ident, i = base, 2
        while ident in used:
            ident, i = f"{base}-{i}", i + 1
        used.add(ident)
        out[name] = ident
    return out


def _template(rows: Mapping[str, Row], value: str | None, where: str) -> str:
    """The one template every row of a file was asked with."""
    sample = next(iter(rows.values()))
    template = template_of(sample.prompt or "", sample.name, value)
    if template is None:
        what = (
            f"the value {value!r}"
            if value is not None and sample.name in (sample.prompt or "")
            else f"the entity {sample.name!r}"
        )
        raise DataError(f"import: {where}: the prompt does not contain {what}")
    for row in rows.values():
        if fill(template, row.name, value) != row.prompt:
            raise DataError(
                f"import: {where}, entity {row.name!r}: its prompt differs from the others' "
                f"({row.prompt!r}); a published run must use one template"
            )
    return template


def _system(rows: Mapping[str, Row], where: str) -> str | None:
    systems = {r.system for r in rows.values()}
    if len(systems) > 1:
        raise DataError(
            f"import: {where}: rows have different system messages {sorted(map(str, systems))[:2]}"
        )
    return next(iter(systems))


def _class_template(run: PublishedRun, cls: str) -> tuple[str, str | None]:
    """(conditioned template, system message) shared by every file of ``cls``."""
    found: set[tuple[str, str | None]] = set()
    for value, rows in run.classes[cls].items():
        if rows:
            where = f"{cls}/{value}.csv"
            found.add((_template(rows, value, where), _system(rows, where)))
    if not found:
        raise DataError(f"import: class {cls!r} has no row in any value file")
    if len(found) > 1:
        raise DataError(f"import: class {cls!r}: its value files use different templates")
    return found.pop()


def _yaml(run: PublishedRun, name: str, language: str, entry: dict[str, object]) -> str:
    data = {
        "name": name,
        "description": f"imported verbatim from {run.root.name} (python -m pytest_recfair import)",
        "languages": {language: entry},
    }
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=10**6)


def template_files(run: PublishedRun, language: str, name: str) -> Layout:
    """Verbatim template sets: ``templates.yaml`` for the first class's template, and a
    ``templates-<class>.yaml`` for each class asked with another one (another language);
    a class whose files do not share one template is skipped, with the reason."""
    neutral = _template(run.neutral, None, "neutral.csv")
    neutral_system = _system(run.neutral, "neutral.csv")
    templates: dict[str, str] = {}
    files: dict[str, str] = {}
    by_template: dict[tuple[str, str | None], str] = {}
    skipped: dict[str, str] = {}
    domain = None
    for cls in run.classes:
        try:
            conditioned, system = _class_template(run, cls)
        except DataError as exc:
            skipped[cls] = str(exc).removeprefix("import: ")
            continue
        if (conditioned, system) not in by_template:
            file = "templates.yaml" if not files else f"templates-{slugify(cls)}.yaml"
            entry: dict[str, object] = {"system": escape(system or "")}
            if neutral_system != system:
                entry["neutral_system"] = escape(neutral_system or "")
            entry |= {"neutral": neutral, "conditioned": conditioned, "verbatim": True}
            files[file] = _yaml(run, name, language, entry)
            by_template[(conditioned, system)] = file
        templates[cls] = by_template[(conditioned, system)]
        match = _DOMAIN.search(system or "")
        domain = domain or (match.group(1).lower() if match else None)
    return Layout(templates, files, domain or "movie", _model(run), skipped)


def grid_yaml(run: PublishedRun, name: str, classes: Iterable[str]) -> str:
    """One attribute per class, one value per file, worded (and labelled) as published."""
    attributes = [
        {"name": cls, "values": [{"label": v, "text": v} for v in run.classes[cls]]}
        for cls in classes
    ]
    data = {"name": name, "articles": "included", "attributes": attributes}
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=10**6)


def absent_cases(run: PublishedRun, ids: Mapping[str, Mapping[str, str]]) -> list[dict[str, str]]:
    """Every (class, value, entity) the published run never answered; ``ids``: class ->
    name -> that class's entity id."""
    return [
        {"attribute": cls, "value": value, "entity_id": ids[cls][name]}
        for cls in ids
        for value, rows in run.classes[cls].items()
        for name in run.neutral
        if name not in rows
    ]


def _model(run: PublishedRun) -> str | None:
    models = {str(b.body.get("model")) for b in run.batch.values() if b.body.get("model")}
    models = {m for m in models if FILTERED not in m}  # a key where the model id should be
    return sorted(models)[0] if len(models) == 1 else None


def plan(run: PublishedRun, *, flavour: str, language: str) -> Layout:
    """Templates (recovered or bundled) per class, domain and model of a published run."""
    if all(r.prompt for r in run.neutral.values()):
        return template_files(run, language, f"published-{flavour}")
    system = next(iter(run.neutral.values())).system or ""
    match = _DOMAIN.search(system)
    domain = match.group(1).lower() if match else "movie"
    return Layout(dict.fromkeys(run.classes, flavour), {}, domain, _model(run))


def dumps_json(data: object) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"
