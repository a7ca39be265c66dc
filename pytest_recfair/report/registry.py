"""Report formats by file extension, and writing a report file.

Adding a format is one module with a ``to_<format>(results, baselines) -> str`` function
plus one row here (and its extension in ``kinds.ReportFormat``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, TypeAlias

from pytest_recfair.errors import ConfigError
from pytest_recfair.fileio import atomic_write_text
from pytest_recfair.kinds import REPORT_FORMATS, ReportFormat
from pytest_recfair.report.html_report import to_html
from pytest_recfair.report.json_report import to_json
from pytest_recfair.report.markdown import to_markdown
from pytest_recfair.report.status import Baselines
from pytest_recfair.results import AuditResult

__all__ = ["RENDERERS", "Renderer", "write_report"]

Renderer: TypeAlias = Callable[[Sequence[AuditResult], Baselines], str]

RENDERERS: Final[dict[ReportFormat, Renderer]] = {
    ".json": to_json,
    ".md": to_markdown,
    ".html": to_html,
}


def write_report(path: Path, results: Sequence[AuditResult], baselines: Baselines = None) -> None:
    """Write a report whose format follows the extension of ``path`` (atomic write)."""
    suffix = Path(path).suffix.lower()
    render = next((r for ext, r in RENDERERS.items() if ext == suffix), None)
    if render is None:
        raise ConfigError(
            f"--fairness-report (ini recfair_report) must end in one of "
            f"{', '.join(REPORT_FORMATS)}; got {str(path)!r}. Pick the format by the file "
            f"name, e.g. --fairness-report=fairness.html."
        )
    atomic_write_text(path, render(results, baselines))
