"""A history directory of runs (``--fairness-history=DIR``), like pytest-benchmark's
autosave: each run adds one JSON report under a new name, never overwriting an older run.

Names are ``NNNN_<UTC timestamp>.json``: the counter keeps them in run order for ``ls`` and
for a later plot, the timestamp says when. The file is reserved with ``O_EXCL`` (two runs
finishing at once get different names) and then filled by an atomic rename.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pytest_recfair.compare.models import ModelComparison
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.fileio import atomic_write_text
from pytest_recfair.report.json_report import to_json
from pytest_recfair.report.status import Baselines
from pytest_recfair.report.stored import load_run
from pytest_recfair.results import AuditResult, Stat

__all__ = ["HistoryRun", "append_run", "check_history_dir", "history_runs", "load_history"]

_NAME = re.compile(r"^(\d{4,})_([0-9TZ]+)\.json$")
_STAMP = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True)
class HistoryRun:
    """One stored run, as the history plot needs it."""

    number: int
    when: str  # "2026-01-02 03:04:05 UTC", or the name's stamp as written
    #: SNSR by (test id, attribute casefolded, metric)
    snsr: Mapping[tuple[str, str, str], Stat]


def check_history_dir(directory: Path) -> None:
    """Fail before any prompt is sent when ``directory`` is a file or cannot be created."""
    if directory.exists() and not directory.is_dir():
        raise ConfigError(
            f"--fairness-history {str(directory)!r} is a file; give a directory that keeps "
            f"one JSON report per run, e.g. --fairness-history=.fairness-history."
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"--fairness-history {str(directory)!r}: cannot create it "
            f"({exc.strerror or exc}); give a directory this process can write."
        ) from None


def history_runs(directory: Path) -> list[Path]:
    """The stored runs of ``directory`` in run order (other files are ignored)."""
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def _reserve(directory: Path, now: datetime) -> Path:
    """A new, unused name in ``directory``, created empty so no other run can take it."""
    runs = history_runs(directory)
    number = int(_NAME.match(runs[-1].name).group(1)) + 1 if runs else 1  # type: ignore[union-attr]
    stamp = now.astimezone(UTC).strftime(_STAMP)
    while True:
        path = directory / f"{number:04d}_{stamp}.json"
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        except FileExistsError:
            number += 1
            continue
        return path


def append_run(
    directory: Path,
    results: Sequence[AuditResult],
    baselines: Baselines = None,
    now: datetime | None = None,
    *,
    models: Sequence[ModelComparison] = (),
) -> Path:
    """Store this run's JSON report as the next entry of ``directory``; return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = _reserve(directory, now or datetime.now(UTC))
    try:
        atomic_write_text(path, to_json(results, baselines, models=models))
    except BaseException:
        path.unlink(missing_ok=True)  # never leave an empty entry behind
        raise
    return path


def _when(stamp: str) -> str:
    try:
        return datetime.strptime(stamp, _STAMP).strftime("%Y-%m-%d %H:%M:%S UTC")
    except ValueError:
        return stamp


def load_history(directory: Path) -> list[HistoryRun]:
    """Every stored run of ``directory``, oldest first; a broken entry is a DataError
    naming it. An empty entry is a run still being written (its name is reserved before
    its content lands) and is left out."""
    if not directory.is_dir():
        raise DataError(
            f"{directory} is not a directory; give the DIR a run wrote with --fairness-history=DIR."
        )
    out = []
    for path in history_runs(directory):
        if path.stat().st_size == 0:
            continue
        run = load_run(path)
        m = _NAME.match(path.name)
        if m is None:  # history_runs lists matching names only
            continue
        snsr = {
            (r.meta.test_id, a.attribute.casefold(), a.metric): a.snsr
            for r in run.results
            for a in r.attributes
        }
        out.append(HistoryRun(int(m.group(1)), _when(m.group(2)), snsr))
    return out
