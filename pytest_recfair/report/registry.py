"""Report formats by file extension, and a whole run's channels (terminal summary lines,
report files, history entry): the engine gathers a run, this module words and writes it."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from pytest_recfair.compare.models import ModelComparison
from pytest_recfair.errors import ConfigError
from pytest_recfair.fileio import atomic_write_text
from pytest_recfair.report.markdown import to_json, to_markdown
from pytest_recfair.report.status import Baselines
from pytest_recfair.report.terminal import terminal_lines, terminal_summary
from pytest_recfair.results import AuditResult
from pytest_recfair.vocab import REPORT_FORMATS, ReportFormat

if TYPE_CHECKING:
    from pytest_recfair.report.history import HistoryRun


def _html(*args: Any, **kwargs: Any) -> str:
    """``html_report.to_html``: it and the history's module load for an HTML report only."""
    from pytest_recfair.report.html_report import to_html

    return to_html(*args, **kwargs)


#: ``to_<format>(results, baselines, *, models=())``; ``models``: the side-by-side comparisons
RENDERERS: Final[dict[ReportFormat, Callable[..., str]]] = {
    ".json": to_json,
    ".md": to_markdown,
    ".html": _html,
}


def _format(path: Path) -> ReportFormat:
    if (fmt := next((x for x in RENDERERS if x == Path(path).suffix.lower()), None)) is None:
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
    """The report in ``fmt``; ``history`` is plotted by the HTML report only."""
    extra = {"history": history} if fmt == ".html" else {}
    return RENDERERS[fmt](results, baselines, models=models, **extra)


def check_report_path(path: Path) -> None:
    """Fail before any prompt is sent when ``path`` cannot take a report."""
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
    atomic_write_text(
        path, render(_format(path), results, baselines, models=models, history=history)
    )


class RunView(Protocol):
    """The parts of a run's collector the summary reads."""

    @property
    def written(self) -> Sequence[Path]: ...
    @property
    def changes(self) -> Mapping[Path, Sequence[str]]: ...
    @property
    def notes(self) -> Sequence[str]: ...
    def ordered(self) -> list[AuditResult]: ...
    def models(self) -> list[ModelComparison]: ...


def summary_lines(run: RunView, width: int = 100, *, verbose: bool = False) -> list[str]:
    """The fairness summary: audits, models side by side, baselines written, notes."""
    lines = list(terminal_summary(run.ordered(), width, verbose=verbose))
    lines += terminal_lines(run.models(), width)
    # one line each, unwrapped: a file path stays whole and easy to copy
    for p in sorted(run.written):
        lines.append(f"fairness baseline written: {p}")
        lines.extend(f"  {change}" for change in run.changes.get(p, []))
    lines.extend(run.notes)
    return lines
