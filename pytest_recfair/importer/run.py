"""Write everything an offline re-run of a published audit needs, into one folder."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_recfair import prompts
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.fileio import atomic_write_text
from pytest_recfair.importer.layout import (
    Layout,
    absent_cases,
    dumps_json,
    entity_ids,
    grid_yaml,
    plan,
)
from pytest_recfair.importer.published import PublishedRun, read_folder
from pytest_recfair.importer.record import record_class

__all__ = ["FLAVOURS", "ImportSummary", "import_run"]

#: The published template sets the folder may come from (bundled sets of the same name).
FLAVOURS = ("faireval", "fairllm")
TEST_FILE = "test_published.py"
DEFAULT_MODEL = "gpt-3.5-turbo"


@dataclass(frozen=True)
class ImportSummary:
    out: Path
    k: int
    entities: int
    classes: dict[str, int]  # class -> number of values
    interactions: int
    absent: int
    dropped: int
    templates: str
    model: str


def _function_name(cls: str) -> str:
    return "test_" + (re.sub(r"\W+", "_", cls.lower()).strip("_") or "class")


def _seeds_csv(names: list[str], ids: dict[str, str]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["id", "name"])
    writer.writerows([ids[n], n] for n in names)
    return buf.getvalue()


def _test_file(run: PublishedRun, layout: Layout, language: str, domain: str) -> str:
    templates = "templates.yaml" if layout.templates_file else layout.templates
    lines = [
        '"""Published audit re-run offline (written by python -m pytest_recfair import)."""',
        "",
        "from pytest_recfair import fairness",
        "",
        "PUBLISHED = dict(",
        '    grid="grid.yaml",',
        f"    templates={templates!r},",
        '    seeds="seeds.csv",',
        f"    domain={domain!r},",
        f"    language={language!r},",
        f"    k={run.k},",
        '    variant="fairllm",',
        '    metric="jaccard,serp,prag",',
        '    missing="zero",',
        '    absent="absent.json",',
        ")",
    ]
    for cls in run.classes:
        lines += [
            "",
            "",
            f"@fairness(attr={cls!r}, **PUBLISHED)",
            f"def {_function_name(cls)}(fairness_result):",
            "    assert fairness_result.attributes",
        ]
    return "\n".join(lines) + "\n"


def _ini(model: str) -> str:
    return (
        "[pytest]\n"
        "recfair_provider = openai\n"
        f"recfair_model = {model}\n"
        "recfair_cassette_dir = cassettes\n"
        "recfair_baseline_dir = baselines\n"
        "recfair_report = reports/published.md\n"
    )


def import_run(
    source: str | Path,
    out: str | Path,
    *,
    flavour: str = "faireval",
    n: int = 500,
    language: str = "en",
    model: str | None = None,
) -> ImportSummary:
    """Read ``source`` (a FaiRLLM/FairEval result folder) and write the re-run into ``out``."""
    if flavour not in FLAVOURS:
        raise ConfigError(f"import: expected one of {', '.join(FLAVOURS)}; got {flavour!r}")
    run = read_folder(source, n=n)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"import: {str(out)!r} is not empty; give a new or empty --out folder")
    layout = plan(run, flavour=flavour, language=language)
    the_model = model or layout.model or DEFAULT_MODEL
    names = list(run.neutral)
    ids = entity_ids(names)
    by_id = {v: k for k, v in ids.items()}
    files = {
        "seeds.csv": _seeds_csv(names, ids),
        "grid.yaml": grid_yaml(run, f"published-{flavour}"),
        "absent.json": dumps_json(absent_cases(run, ids)),
        TEST_FILE: _test_file(run, layout, language, layout.domain),
        "pytest.ini": _ini(the_model),
    }
    if layout.templates_file:
        files["templates.yaml"] = layout.templates
    for name, text in files.items():
        atomic_write_text(out / name, text)
    grid = prompts.load_grid(out / "grid.yaml")
    templates = out / "templates.yaml" if layout.templates_file else layout.templates
    entities = [prompts.Entity(id=ids[n], name=n, domain=layout.domain) for n in names]
    written = 0
    for cls in run.classes:
        cases = prompts.build_cases(
            grid, templates, entities, domain=layout.domain, k=run.k, language=language,
            attributes=[cls],
        )  # fmt: skip
        test_id = f"{TEST_FILE}::{_function_name(cls)}"
        written += record_class(
            run, cases, by_id, root=out / "cassettes", test_id=test_id, model=the_model
        )
    if written == 0:
        raise DataError(f"import: {str(source)!r} gave no reply to record")
    return ImportSummary(
        out=out,
        k=run.k,
        entities=len(names),
        classes={c: len(v) for c, v in run.classes.items()},
        interactions=written,
        absent=len(absent_cases(run, ids)),
        dropped=run.dropped,
        templates=str(templates),
        model=the_model,
    )
