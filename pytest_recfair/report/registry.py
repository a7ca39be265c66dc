"""Report formats by file extension, and a whole run's channels: the terminal summary
lines, the report files, the history entry.

Adding a format is one module with a ``to_<format>(results, baselines, *, models) -> str``
plus one row in :data:`RENDERERS` (and its extension in ``vocab.ReportFormat``). The
engine's ``RunCollector`` gathers a run's results and this module words and writes them
(:class:`RunView` is what is read of it), so the engine never imports the report.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final, Protocol

from pytest_recfair.compare.models import ModelComparison
from pytest_recfair.errors import ConfigError
from pytest_recfair.fileio import atomic_write_text
from pytest_recfair.report.history import HistoryRun, append_run
from pytest_recfair.report.html_report import to_html
from pytest_recfair.report.markdown import to_json, to_markdown
from pytest_recfair.report.status import Baselines
from pytest_recfair.report.terminal import terminal_lines, terminal_summary
from pytest_recfair.results import AuditResult
from pytest_recfair.vocab import REPORT_FORMATS, ReportFormat

#: ``to_<format>(results, baselines, *, models=())``; ``models``: the side-by-side comparisons
RENDERERS: Final[dict[ReportFormat, Callable[..., str]]] = {
    ".json": to_json,
    ".md": to_markdown,
    ".html": to_html,
}


def _format(path: Path) -> ReportFormat:
    suffix = Path(path).suffix.lower()
    fmt = next((ext for ext in RENDERERS if ext == suffix), None)
    if fmt is None:
        raise ConfigError(
            f"--fairness-report (ini recfair_report) must end in one of "
            f"{', '.join(REPORT_FORMATS)}; got {str(path)!r}. Pick the format by the file "
            f"name, e.g. --fairness-report=fairness.html."
        )
    return fmt


def render(
    fmt: ReportFormat,
    results: Sequence[AuditResult],
    baselines: Baselines = None,
    *,
    models: Sequence[ModelComparison] = (),
    history: Sequence[HistoryRun] = (),
) -> str:
    """The report of ``results`` in ``fmt`` (an extension of ``vocab.REPORT_FORMATS``);
    ``history`` (``--fairness-history``) is plotted by the HTML report only."""
    if fmt == ".html":
        return to_html(results, baselines, models=models, history=history)
    return RENDERERS[fmt](results, baselines, models=models)


def check_report_path(path: Path) -> None:
    """Fail before any prompt is sent when ``path`` cannot take a report: an unknown
    extension, a directory, or a place no directory can be created in."""
    _format(path)
    if path.is_dir():
        raise ConfigError(
            f"--fairness-report {str(path)!r} is a directory; give a file name such as "
            f"{str(path / 'fairness.html')!r}."
        )
    try:  # a real try: permission bits say nothing for root or on /proc-like mounts
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as exc:
        raise ConfigError(
            f"--fairness-report {str(path)!r}: cannot create files in {str(path.parent)!r} "
            f"({exc.strerror or exc}); write the report somewhere this process can."
        ) from None


def write_report(
    path: Path,
    results: Sequence[AuditResult],
    baselines: Baselines = None,
    *,
    models: Sequence[ModelComparison] = (),
    history: Sequence[HistoryRun] = (),
) -> None:
    """Write a report whose format follows the extension of ``path`` (atomic write)."""
    text = render(_format(path), results, baselines, models=models, history=history)
    atomic_write_text(path, text)


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
