"""A whole run's channels: the terminal summary lines, the report files, the history entry.

The engine's ``RunCollector`` gathers a run's results; this module words and writes them,
so the engine never imports the report. :class:`RunView` is what is read of a collector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from pytest_recfair.compare.models import ModelComparison
from pytest_recfair.report.history import HistoryRun, append_run
from pytest_recfair.report.registry import write_report
from pytest_recfair.report.sidebyside import terminal_lines
from pytest_recfair.report.terminal import terminal_summary
from pytest_recfair.results import AuditResult

__all__ = ["RunView", "add_to_history", "summary_lines", "write_run_report"]


class RunView(Protocol):
    """The parts of a run's collector the channels read."""

    @property
    def baselines(self) -> Mapping[str, AuditResult]: ...
    @property
    def written(self) -> Sequence[Path]: ...
    @property
    def changes(self) -> Mapping[Path, Sequence[str]]: ...
    @property
    def notes(self) -> Sequence[str]: ...
    def ordered(self) -> list[AuditResult]: ...
    def models(self) -> list[ModelComparison]: ...


def summary_lines(run: RunView, width: int = 100, *, verbose: bool = False) -> list[str]:
    """The fairness summary: each audit's figures (with ``verbose``, the evidence of each
    failing attribute), the models side by side, the written baselines with their
    changes, and the run's notes."""
    lines = list(terminal_summary(run.ordered(), width, verbose=verbose))
    if run.models():
        lines += terminal_lines(run.models(), width)
    # one line each, unwrapped: a file path stays whole and easy to copy
    for p in sorted(run.written):
        lines.append(f"fairness baseline written: {p}")
        lines.extend(f"  {change}" for change in run.changes.get(p, []))
    lines.extend(run.notes)
    return lines


def write_run_report(run: RunView, path: Path, history: Sequence[HistoryRun] = ()) -> None:
    """Write the run's report to ``path`` (format by extension)."""
    write_report(path, run.ordered(), run.baselines, models=run.models(), history=history)


def add_to_history(
    run: RunView, directory: Path, *, settings: object = None, cwd: Path | None = None
) -> Path:
    """Append the run to the ``--fairness-history`` directory; the entry's path
    (``settings`` and the git commit read in ``cwd`` go into its ``"entry"``)."""
    return append_run(
        directory, run.ordered(), run.baselines, models=run.models(), settings=settings, cwd=cwd
    )
