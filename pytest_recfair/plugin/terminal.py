"""What the plugin writes to pytest's terminal: the header, progress lines through the
output capture, the live line of a run that sends requests, and the closing sections."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_recfair import __version__
from pytest_recfair.plugin.state import run_state

if TYPE_CHECKING:
    from pytest_recfair import engine as audit
    from pytest_recfair.engine import budget as plan

__all__ = ["live_line", "plan_summary", "report_header", "summary", "terminal_line"]


def report_header(config: pytest.Config) -> list[str] | None:
    if not config.getoption("fairness"):
        return None
    s = run_state(config).settings
    return [
        f"recfair {__version__}: seed={s.seed} (--fairness-seed), record mode={s.record_mode}, "
        f"baselines={config.rootpath / s.baseline_dir}" + (" (updating)" if s.update else ""),
    ]


def terminal_line(config: pytest.Config) -> Callable[[str], None]:
    """A writer of progress lines that shows through pytest's output capture."""
    from pytest_recfair.secrets import scrub

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")

    def write(line: str) -> None:
        if reporter is None:
            return
        line = scrub(line)
        if capture is None:
            _own_line(reporter, line)
            return
        with capture.global_and_fixture_disabled():
            _own_line(reporter, line)

    return write


def _own_line(reporter: Any, line: str) -> None:
    """``line`` on a line of its own: under ``-q`` pytest's progress letters ("s", ".")
    leave the cursor mid-line, and ``write_line`` only breaks lines after a file path."""
    if getattr(getattr(reporter, "_tw", None), "width_of_current_line", 0):
        reporter.write("\n")
    reporter.write_line(line)


def live_line(config: pytest.Config, planned: plan.Plan | None) -> Any:
    """The progress line of a run that sends requests, drawn through pytest's terminal
    (shown without -s): redrawn in place on a terminal, a line per tenth elsewhere."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if planned is None or not planned.to_ask or reporter is None:
        return None
    from pytest_recfair.providers.progress import LiveLine

    capture = config.pluginmanager.get_plugin("capturemanager")
    fresh = [True]

    def shown(draw: Callable[[], None]) -> None:
        if capture is None:
            draw()
            return
        with capture.global_and_fixture_disabled():
            draw()

    def rewrite(text: str) -> None:
        def draw() -> None:
            if fresh[0]:  # off the "test_file.py " line pytest is writing
                reporter.ensure_newline()
                fresh[0] = False
            reporter.rewrite(text, erase=True)

        shown(draw)

    return LiveLine(
        planned.to_ask,
        tty=bool(reporter.isatty()),
        rewrite=rewrite,
        write_line=lambda text: shown(lambda: reporter.write_line(text)),
        cost_known=planned.cost is not None,
    )


def plan_summary(config: pytest.Config, terminalreporter: Any) -> None:
    """The run's total plan, when any audit printed one; under xdist (the workers'
    lines never reach this terminal) every plan line from the run's ledger first."""
    from pytest_recfair.secrets import scrub

    state = run_state(config)
    plans = state.plans
    shared = state.ledger.plans() if state.ledger is not None else []
    if not (plans or shared):
        return
    from pytest_recfair.engine import budget as plan

    terminalreporter.write_sep("=", "fairness plan")
    for each in shared:
        terminalreporter.write_line(scrub(f"recfair plan: {each.line()}"))
    terminalreporter.write_line(scrub(plan.total_line(plans + shared)))


def summary(
    config: pytest.Config, terminalreporter: Any, collector: audit.RunCollector | None
) -> None:
    """The fairness summary: each audit's figures and the run's notes."""
    if collector is None or not (collector.results or collector.notes):
        return
    explore = run_state(config).settings.explore  # --fairness-explore: said up front
    title = "fairness summary" + (" (explore mode: nothing gated)" if explore else "")
    terminalreporter.write_sep("=", title)
    # the terminal's width (COLUMNS, or 80 when not a terminal), as pytest's own lines
    width = config.get_terminal_writer().fullwidth
    from pytest_recfair import secrets
    from pytest_recfair.report.channels import summary_lines

    for line in summary_lines(collector, width, verbose=config.get_verbosity() > 0):
        terminalreporter.write_line(secrets.scrub(line))


def scrub_report(report: pytest.TestReport) -> None:
    """No API key in what pytest prints or writes to JUnit XML: a traceback or captured
    output quoting a URL or an error body, a property with the reply's model name."""
    from pytest_recfair import secrets

    if not secrets.registered():
        return
    if report.longrepr is not None:
        text = str(report.longrepr)
        clean = secrets.scrub(text)
        if clean != text:
            report.longrepr = clean
    report.sections = [(k, secrets.scrub(v)) for k, v in report.sections]
    report.user_properties = [
        (k, secrets.scrub(v) if isinstance(v, str) else v) for k, v in report.user_properties
    ]
