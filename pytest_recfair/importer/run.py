"""Write an offline re-run of a published audit into one folder: templates recovered from
the published prompts, checked against EVERY row (else the bundled set); cassettes recorded
through the real path, an ``httpx.MockTransport`` answering with the published reply (CSV
``Result``, or the Batch API body with the same text); unanswered cases never recorded."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import yaml

from pytest_recfair import secrets
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.fileio import staged_folder
from pytest_recfair.importer.published import (
    PublishedRun,
    Row,
    escape,
    fill,
    messages,
    read_folder,
    recover_prompts,
    template_of,
    write_files,
)
from pytest_recfair.prompts.cases import PromptCase, build_cases
from pytest_recfair.prompts.grids import load_grid
from pytest_recfair.prompts.seeds import Entity, slugify
from pytest_recfair.providers.http import from_config
from pytest_recfair.providers.runner import run_cases
from pytest_recfair.providers.runstate import RunOutcome
from pytest_recfair.secrets import FILTERED
from pytest_recfair.vocab import MISSING_POLICIES

_DOMAIN = re.compile(r"\ba (\w+) recommendation system\b", re.IGNORECASE)


@dataclass(frozen=True)
class Layout:
    """``templates``: class -> the marker's ``templates`` (a file written here, or a bundled
    set name); ``files``: template file name -> YAML text; ``skipped``: class -> why."""

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


def _template(rows: Mapping[str, Row], value: str | None, where: str) -> tuple[str, str | None]:
    """The one template and system message every row of a file was asked with."""
    sample = next(iter(rows.values()))
    template = template_of(sample.prompt or "", sample.name, value)
    if template is None:
        named = value is not None and sample.name in (sample.prompt or "")
        what = f"the value {value!r}" if named else f"the entity {sample.name!r}"
        raise DataError(f"import: {where}: the prompt does not contain {what}")
    for row in rows.values():
        if fill(template, row.name, value) != row.prompt:
            raise DataError(
                f"import: {where}, entity {row.name!r}: its prompt differs from the others' "
                f"({row.prompt!r}); a published run must use one template"
            )
    systems = {r.system for r in rows.values()}
    if len(systems) > 1:
        raise DataError(
            f"import: {where}: rows have different system messages {sorted(map(str, systems))[:2]}"
        )
    return template, next(iter(systems))


def _class_template(run: PublishedRun, cls: str) -> tuple[str, str | None]:
    """(conditioned template, system message) shared by every file of ``cls``."""
    found = {_template(rows, v, f"{cls}/{v}.csv") for v, rows in run.classes[cls].items() if rows}
    if not found:
        raise DataError(f"import: class {cls!r} has no row in any value file")
    if len(found) > 1:
        raise DataError(f"import: class {cls!r}: its value files use different templates")
    return found.pop()


def plan(run: PublishedRun, *, flavour: str, language: str) -> Layout:
    """Templates per class, domain and model of a published run: the bundled set when the
    neutral file has no prompts, else verbatim sets recovered from them (``templates.yaml``
    for the first class's template, a ``templates-<class>.yaml`` for each class asked with
    another one; a class whose files do not share one template is skipped, with why)."""
    if not any(r.prompt for r in run.neutral.values()):  # an empty one is named by the check
        match = _DOMAIN.search(next(iter(run.neutral.values())).system or "")
        domain = match.group(1).lower() if match else "movie"
        return Layout(dict.fromkeys(run.classes, flavour), {}, domain, _batch_model(run))
    neutral, neutral_system = _template(run.neutral, None, "neutral.csv")
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
            data = {
                "name": f"published-{flavour}",
                "description": f"imported verbatim from {run.root.name} "
                "(python -m pytest_recfair import)",
                "languages": {language: entry},
            }
            files[file] = yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=10**6)
            by_template[(conditioned, system)] = file
        templates[cls] = by_template[(conditioned, system)]
        match = _DOMAIN.search(system or "")
        domain = domain or (match.group(1).lower() if match else None)
    return Layout(templates, files, domain or "movie", _batch_model(run), skipped)


def grid_yaml(run: PublishedRun, name: str, classes: Iterable[str]) -> str:
    """One attribute per class, one value per file, worded (and labelled) as published."""
    attributes = [
        {"name": cls, "values": [{"label": v, "text": v} for v in run.classes[cls]]}
        for cls in classes
    ]
    data = {"name": name, "articles": "included", "attributes": attributes}
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=10**6)


def absent_cases(run: PublishedRun, ids: Mapping[str, Mapping[str, str]]) -> list[dict[str, str]]:
    """Every (class, value, entity id) the published run never answered."""
    return [
        {"attribute": cls, "value": value, "entity_id": ids[cls][name]}
        for cls in ids
        for value, rows in run.classes[cls].items()
        for name in run.neutral
        if name not in rows
    ]


def _batch_model(run: PublishedRun) -> str | None:
    models = {str(b.body.get("model")) for b in run.batch.values() if b.body.get("model")}
    models = {m for m in models if FILTERED not in m}  # a key where the model id should be
    return sorted(models)[0] if len(models) == 1 else None


#: The published template sets the folder may come from (bundled sets of the same name).
FLAVOURS = ("faireval", "fairllm")

TEST_FILE = "test_published.py"

#: Where the replies of record come from.
REPLIES = ("csv", "batch")


@dataclass(frozen=True)
class ImportSummary:
    out: Path
    k: int
    entities: int
    classes: dict[str, int]  # class -> number of values (imported classes only)
    interactions: int
    absent: int
    dropped: int
    model: str
    rows: int = 500  # rows read per file (the neutral file's row count when not cut)
    cut: bool = True  # --rows given: only the first ``rows`` rows of each file were read
    skipped: dict[str, str] = field(default_factory=dict)  # class -> why
    # class (or neutral) -> batch replies that differ from the CSV
    differing: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    batch_replies: bool = False  # --replies batch: the batch replies were recorded

    def lines(self) -> list[str]:
        """The import's report: what was imported, skipped and why (secrets scrubbed)."""
        classes = ", ".join(f"{c} ({v})" for c, v in self.classes.items())
        rows = f"the first {self.rows} rows of each file"
        if not self.cut:
            rows = f"every row of each file (neutral.csv: {self.rows}; --rows N to cut)"
        out = [
            f"imported top_{self.k}: {self.entities} entities, {rows}; "
            f"classes {classes}; {self.interactions} replies recorded, {self.absent} never "
            f"answered (left out of their value's mean), {self.dropped} rows naming entities "
            f"without a neutral reply ignored; model {self.model}",
            *self.notes,
        ]
        out += [f"skipped class {c}: {why}" for c, why in self.skipped.items()]
        if any(self.differing.values()):
            counts = ", ".join(f"{c} {n}" for c, n in self.differing.items() if n)
            which = (
                "the batch replies were recorded (--replies batch)"
                if self.batch_replies
                else "the CSV replies were recorded (--replies batch records the batch ones)"
            )
            out.append(f"batch_output.jsonl differs from the CSV 'Result' ({counts}): {which}")
        out.append(f"re-run offline: cd {self.out} && pytest --fairness --fairness-update")
        return [secrets.scrub(line) for line in out]


def _function_name(cls: str) -> str:
    return "test_" + (re.sub(r"\W+", "_", cls.lower()).strip("_") or "class")


def _seeds_csv(names: list[str], ids: Mapping[str, str]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["id", "name"])
    writer.writerows([ids[n], n] for n in names)
    return buf.getvalue()


def _test_file(run: PublishedRun, layout: Layout, language: str, classes: list[str]) -> str:
    lines = [
        '"""Published audit re-run offline (written by python -m pytest_recfair import).',
        "",
        "Each class has its own seeds file (class-scoped entity ids), so each has its own",
        "cassettes: two classes asking the same prompt keep their own published replies.",
        "The model and the missing-reply policy are ini keys (pytest.ini).",
        '"""',
        "",
        "from pytest_recfair import fairness",
        "",
        "PUBLISHED = dict(",
        '    grid="grid.yaml",',
        f"    domain={layout.domain!r},",
        f"    language={language!r},",
        f"    k={run.k},",
        '    variant="fairllm",',
        '    metric="jaccard,serp,prag",',
        '    absent="absent.json",',
        ")",
    ]
    for cls in classes:
        lines += [
            "",
            "",
            f"@fairness(attr={cls!r}, templates={layout.templates[cls]!r}, "
            f"seeds={f'seeds/{slugify(cls)}.csv'!r}, **PUBLISHED)",
            f"def {_function_name(cls)}(fairness_result):",
            "    assert fairness_result.attributes",
        ]
    return "\n".join(lines) + "\n"


def pytest_ini(model: str, report: str, **keys: str) -> str:
    """An imported project's pytest.ini (both importers'): model, cassettes, baselines."""
    at = {"cassette_dir": "cassettes", "baseline_dir": "baselines", "report": report}
    ini = {"provider": "openai", "model": model, **keys, **at}
    return "[pytest]\n" + "".join(f"recfair_{k} = {v}\n" for k, v in ini.items())


def new_folder(out: str | Path) -> Path:
    """``--out``, checked to be a new or empty folder (both importers write a whole project)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        what = "is not empty" if out.is_dir() else "is a file"
        raise ConfigError(f"import: --out {str(out)!r} {what}; give a new or empty folder")
    return out


def import_run(
    source: str | Path,
    out: str | Path,
    *,
    flavour: str = "faireval",
    n: int | None = None,
    language: str = "en",
    model: str | None = None,
    missing: str = "zero",
    replies: str = "csv",
) -> ImportSummary:
    """Read ``source`` (a FaiRLLM/FairEval result folder), write the re-run into ``out``;
    ``n`` rows per file (None: all); ``replies``: ``csv`` (the ``Result`` column, of record)
    or ``batch`` (``batch_output.jsonl`` where it has a reply)."""
    if flavour not in FLAVOURS:
        raise ConfigError(f"import: expected one of {', '.join(FLAVOURS)}; got {flavour!r}")
    if missing not in MISSING_POLICIES or replies not in REPLIES:
        raise ConfigError(
            f"import: --missing takes {', '.join(MISSING_POLICIES)} and --replies takes "
            f"{', '.join(REPLIES)}; got {missing!r}, {replies!r}"
        )
    out = new_folder(out)
    run, notes = recover_prompts(read_folder(source, n=n))
    if empty := [f"{c}/{v}.csv" for c, vs in run.classes.items() for v, r in vs.items() if not r]:
        notes.append(
            f"value files holding only their header left out (no reply): {', '.join(empty)}"
        )
        run = replace(
            run, classes={c: {v: r for v, r in vs.items() if r} for c, vs in run.classes.items()}
        )
    layout = plan(run, flavour=flavour, language=language)
    classes = [c for c in run.classes if c not in layout.skipped]
    if not classes:
        why = "; ".join(f"{c}: {w}" for c, w in layout.skipped.items())
        raise DataError(f"import: no class of {str(source)!r} can be imported ({why})")
    the_model = secrets.scrub(model) if model else layout.model
    if not the_model:  # guessed from the folder's name, and said
        the_model = f"{'gemini' if 'gemini' in str(source).lower() else 'unknown'}-published"
        notes.append(
            f"model: not in the folder's files; labelled {the_model} (give --model to name it)"
        )
    names = list(run.neutral)
    ids = {cls: entity_ids(names, cls) for cls in classes}
    absent = absent_cases(run, ids)
    files = {
        "seeds.csv": _seeds_csv(names, entity_ids(names)),
        "grid.yaml": grid_yaml(run, f"published-{flavour}", classes),
        "absent.json": json.dumps(absent, ensure_ascii=False, indent=2) + "\n",
        TEST_FILE: _test_file(run, layout, language, classes),
        "pytest.ini": pytest_ini(the_model, "reports/published.md", missing=missing),
        **layout.files,
        **{f"seeds/{slugify(c)}.csv": _seeds_csv(names, ids[c]) for c in classes},
    }
    written, differing = 0, {}  # class -> batch replies differing from the CSV
    with staged_folder(out) as tmp:  # a failed import leaves --out as it was
        write_files(tmp, files)
        grid = load_grid(tmp / "grid.yaml")
        for cls in classes:
            tpl = layout.templates[cls]
            entities = [Entity(ids[cls][n], n, layout.domain) for n in run.neutral]
            cases = build_cases(
                grid, tmp / tpl if tpl in layout.files else tpl, entities, domain=layout.domain,
                k=run.k, language=language, attributes=[cls],
            )  # fmt: skip
            # the same neutral replies in every class
            count, (differing["neutral"], differing[cls]) = record_class(
                run, cases, {v: k for k, v in ids[cls].items()}, root=tmp / "cassettes",
                test_id=f"{TEST_FILE}::{_function_name(cls)}", model=the_model,
                prefer_batch=replies == "batch",
            )  # fmt: skip
            written += count
        if written == 0:
            raise DataError(f"import: {str(source)!r} gave no reply to record")
    values = {c: len(run.classes[c]) for c in classes}
    return ImportSummary(
        out, run.k, len(names), values, written, len(absent), run.dropped, the_model, run.rows,
        n is not None, dict(layout.skipped), differing, tuple(notes), replies == "batch",
    )  # fmt: skip


def completion(model: str, text: str, key: str, source: str = "published") -> dict[str, Any]:
    """An OpenAI chat completion for a reply the folder has only as text."""
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": "stop",
    }
    return {"id": f"chatcmpl-{source}-{digest}", "object": "chat.completion", "created": 0,
            "model": model, "choices": [choice]}  # fmt: skip


def record(
    root: Path,
    cases: Sequence[Any],
    answer: Callable[[httpx.Request], dict[str, Any] | None],
    *,
    test_id: str,
    model: str,
    what: str,
) -> RunOutcome:
    """Record ``cases`` through the real OpenAI provider; the network answers ``answer``'s body."""

    def respond(request: httpx.Request) -> httpx.Response:
        body = answer(request)
        if body is None:
            return httpx.Response(404, json={"error": {"message": "not in the published run"}})
        return httpx.Response(200, json=body)

    provider = from_config("openai", model=model, api_key_env="")
    with CassetteStore(root, mode="all") as store:
        outcome = run_cases(
            provider, list(cases), cassettes=store, test_id=test_id,
            transport=httpx.MockTransport(respond), progress=False, max_retries=0,
        )  # fmt: skip
    if outcome.errors:
        raise DataError(
            f"{what}: recording {test_id} failed for {len(outcome.errors)} case(s): "
            f"{next(iter(outcome.errors.values()))}"
        )
    return outcome


def record_class(
    run: PublishedRun,
    cases: Sequence[PromptCase],
    names: Mapping[str, str],
    *,
    root: Path,
    test_id: str,
    model: str,
    prefer_batch: bool = False,
) -> tuple[int, tuple[int, int]]:
    """Record one test's cassettes (one class; ``names``: entity id -> name); returns the
    interactions written and how many batch replies differ from the CSV's ``Result`` (the
    reply of record unless ``prefer_batch``), (neutral, conditioned)."""
    sent: list[PromptCase] = []
    bodies: dict[tuple[str, str], dict[str, Any]] = {}
    differ = [0, 0]  # neutral, conditioned
    for case in cases:
        name = names[case.entity_id]
        cls = case.attribute
        row = (run.neutral if cls is None else run.classes[cls][case.value or ""]).get(name)
        if row is None:
            continue  # never answered in the published run
        if row.prompt is not None and row.prompt != case.prompt:
            raise DataError(
                f"import: the audit would ask {case.prompt!r} where the published run asked "
                f"{row.prompt!r} (entity {row.name!r}); the templates do not reproduce it"
            )
        key = (case.system, case.prompt)
        batch = run.batch.get(key)
        body = completion(model, row.reply, json.dumps(key))
        if batch is not None and batch.response is not None:
            try:  # a body without a reply text differs
                same = batch.response["choices"][0]["message"]["content"] == row.reply
            except (KeyError, IndexError, TypeError):
                same = False
            differ[case.attribute is not None] += 0 if same else 1
            if same or prefer_batch:
                body = dict(batch.response)
        bodies[key] = body
        sent.append(case)

    def answer(request: httpx.Request) -> dict[str, Any] | None:
        return bodies.get(messages(json.loads(request.content)))

    record(root, sent, answer, test_id=test_id, model=model, what="import")
    return len(sent), (differ[0], differ[1])
