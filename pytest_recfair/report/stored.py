"""A stored JSON run report (what ``--fairness-report=run.json`` and ``--fairness-history``
write), read back: to render it again, compare two runs, or plot a history.

Every problem is one :class:`~pytest_recfair.errors.DataError` naming the file, what was
expected and what to do; a report that loads gives the same ``AuditResult`` objects (and
baselines) the plugin rendered, so a re-render is byte-identical to the plugin's own.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import jsonschema

from pytest_recfair.compare.models import ModelComparison
from pytest_recfair.errors import DataError
from pytest_recfair.gate import baselines
from pytest_recfair.results import AuditResult

__all__ = ["FORMAT", "VERSION", "StoredRun", "load_run", "parse_run"]

FORMAT: Final = "pytest-recfair report"
VERSION: Final = 1
_HINT = "give a JSON report written by --fairness-report=run.json or --fairness-history=DIR"


@dataclass(frozen=True)
class StoredRun:
    """The results of one stored run, and the baselines they were compared against."""

    path: Path
    results: tuple[AuditResult, ...]
    baselines: Mapping[str, AuditResult]
    models: tuple[ModelComparison, ...] = ()  # the side-by-side section, when there is one
    #: a history entry's commit, branch, date, machine, settings ({}: a plain report, or an
    #: entry written before they were recorded)
    entry: Mapping[str, Any] = field(default_factory=dict)


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    # a result is a baseline plus its gate outcome: the baseline schema checks its shape
    return jsonschema.Draft202012Validator(baselines.schema())


def _skeleton(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with each matrix cut to its first entity: jsonschema is slow on big ones,
    and ``from_dict`` checks the rest (shapes, numbers)."""
    out = {**doc, "schema_version": baselines.SCHEMA_VERSION}
    attrs = doc.get("attributes")
    if isinstance(attrs, list):
        out["attributes"] = [_cut(a) for a in attrs]
    return out


def _cut(attr: Any) -> Any:
    m = attr.get("matrix") if isinstance(attr, dict) else None
    if not isinstance(m, dict):
        return attr
    cut = {k: v[:1] if isinstance(v, list) and k != "values" else v for k, v in m.items()}
    return {**attr, "matrix": cut}


def _result(doc: Any, path: Path, where: str) -> AuditResult:
    if not isinstance(doc, dict):
        raise DataError(f"{path}: {where} is not an audit result (a JSON object); {_HINT}.")
    errors = list(_validator().iter_errors(_skeleton(doc)))
    if errors:
        err = jsonschema.exceptions.best_match(errors)
        at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        raise DataError(f"{path}: {where}{at} is invalid: {err.message}; {_HINT}.")
    try:
        return AuditResult.from_dict(doc)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise DataError(
            f"{path}: {where} is invalid ({type(exc).__name__}: {exc}); {_HINT}."
        ) from None


def _envelope(doc: Any, path: Path) -> dict[str, Any]:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DataError(
            f'{path} is not a pytest-recfair run report (expected "format": "{FORMAT}"); {_HINT}.'
        )
    version = doc.get("version")
    if version != VERSION:
        raise DataError(
            f"{path} is a version {version!r} report (written by pytest-recfair "
            f"{doc.get('plugin_version', '?')}); this pytest-recfair reads version {VERSION}. "
            f"Use the pytest-recfair that wrote it, or re-run the audit."
        )
    if not isinstance(doc.get("results"), list):
        raise DataError(f'{path}: "results" must be a list of audit results; {_HINT}.')
    if not isinstance(doc.get("baselines", {}), dict):
        raise DataError(f'{path}: "baselines" must map test ids to results; {_HINT}.')
    return doc


def parse_run(text: str, path: Path) -> StoredRun:
    """A stored run from the text of ``path`` (the path only names it in errors)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{path} is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); {_HINT}."
        ) from None
    except RecursionError:  # thousands of nested brackets: no report is shaped so
        raise DataError(f"{path} is JSON nested too deeply to be a run report; {_HINT}.") from None
    env = _envelope(doc, path)
    results = tuple(_result(r, path, f"results[{i}]") for i, r in enumerate(env["results"]))
    base = {
        str(k): _result(v, path, f"baselines[{json.dumps(k)}]")
        for k, v in (env.get("baselines") or {}).items()
    }
    entry = env.get("entry")
    return StoredRun(
        path,
        results,
        base,
        _models(env.get("models") or [], path),
        entry if isinstance(entry, dict) else {},
    )


def _models(docs: Any, path: Path) -> tuple[ModelComparison, ...]:
    """The run's "models" section (several models audited by one test), checked."""
    if not isinstance(docs, list):
        raise DataError(f'{path}: "models" must be a list of model comparisons; {_HINT}.')
    out = []
    for i, doc in enumerate(docs):
        try:
            out.append(ModelComparison.from_dict(doc))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise DataError(
                f"{path}: models[{i}] is invalid ({type(exc).__name__}: {exc}); {_HINT}."
            ) from None
    return tuple(out)


def load_run(path: Path | str) -> StoredRun:
    """Read and check the JSON run report at ``path``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{p}: no such file; {_HINT}.") from None
    except IsADirectoryError:
        raise DataError(f"{p} is a directory; {_HINT}.") from None
    except UnicodeDecodeError:
        raise DataError(f"{p} is not UTF-8 text; {_HINT}.") from None
    except OSError as exc:
        why = exc.strerror or exc
        raise DataError(f"cannot read {p} ({why}); check its permissions.") from None
    return parse_run(text, p)
