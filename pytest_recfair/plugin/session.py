"""The run as a whole: configure time, shipping each audit to the controller, and the
controller's end of run (history, report files, summary), plus --fairness-prune.

Workers of pytest-xdist ship each audit's result to the controller on the call-phase
report (an extra report attribute survives xdist's serialisation), so the summary, the
report file and the JUnit properties are produced once, on the controller.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_recfair import settings
from pytest_recfair.errors import RecfairError
from pytest_recfair.plugin import options, terminal
from pytest_recfair.plugin.state import RUN, RunState, audit_state, run_state

if TYPE_CHECKING:
    from pytest_recfair import engine as audit

__all__ = ["LEDGER_KEY", "Controller", "Pruner", "configure", "ship"]

LEDGER_KEY = "recfair_ledger"  # workerinput: the path of the run's budget ledger


def configure(config: pytest.Config) -> None:
    """Register the controller (and pruner) and resolve the run's settings once: every
    usage error is raised here, before any prompt is sent."""
    config.addinivalue_line(
        "markers",
        "fairness(**kwargs): a fairness audit of the recommender (run with --fairness); "
        "arguments: " + ", ".join(settings.MARKER_KEYS) + ". See docs/configuration.md.",
    )
    if not hasattr(config, "workerinput"):  # xdist workers only ship results
        config.pluginmanager.register(Controller(config), "recfair-controller")
    options.check_strictness(config)
    run_settings = options.resolve(config, {})
    run = options.resolve_run(config, run_settings)
    pruner = None
    ledger = None
    shared = getattr(config, "workerinput", {}).get(LEDGER_KEY)
    if shared:  # an xdist worker: the controller's ledger counts the budget for all
        from pytest_recfair.engine.ledger import Ledger

        ledger = Ledger(Path(shared))
    dry_run = bool(config.getoption("fairness_prune_dry_run", False))
    if run.prune or dry_run:
        pruner = Pruner(config, dry_run=dry_run)
        config.pluginmanager.register(pruner, "recfair-prune")
    config.stash[RUN] = RunState(run=run, settings=run_settings, pruner=pruner, ledger=ledger)


def ship(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """Hand the call phase's audit record to the controller: as it is in one process, as
    a payload on the report from an xdist worker. Scrub the report either way."""
    its = audit_state(item) if call.when == "call" else None
    record = None if its is None else its.record
    if record is not None:
        controller = item.config.pluginmanager.get_plugin("recfair-controller")
        if controller is not None:  # one process: no dict round trip
            controller.take(record)
        else:  # an xdist worker: the payload survives serialisation
            report.recfair = record.payload()  # type: ignore[attr-defined]
    terminal.scrub_report(report)


def _unused_notes(config: pytest.Config) -> list[str]:
    """Under --fairness-update, the stored baselines no collected test owns. Not after -k
    or -m (their tests were only deselected), nor under xdist (workers collect)."""
    state = run_state(config)
    narrowed = config.getoption("keyword", "") or config.getoption("markexpr", "")
    narrowed = narrowed or any("::" in arg for arg in config.args)
    s = state.settings
    if not s.update or state.audited is None or narrowed:
        return []
    from pytest_recfair import engine as audit

    root = config.rootpath / s.baseline_dir
    unused = audit.unused_baselines(root, config.rootpath, state.audited)
    return [
        f"fairness baseline not used by any test of this run: {path} ({test_id}); delete it "
        f"if that test is gone"
        for path, test_id in unused
    ]


def _add_to_history(config: pytest.Config, collector: audit.RunCollector) -> list[Any]:
    """--fairness-history: add this run to DIR; then, for an HTML report, read DIR back
    (the runs to plot, this one last). A failure is a note, never a lost report."""
    run = run_state(config).run
    if run.history_dir is None:
        return []
    try:
        from pytest_recfair.report.channels import add_to_history

        entry = add_to_history(
            collector, run.history_dir, settings=run_state(config).settings, cwd=config.rootpath
        )
    except (OSError, RecfairError) as exc:
        collector.notes.append(f"could not add the run to {run.history}: {exc}")
        return []
    collector.notes.append(f"fairness history entry written: {entry}")
    if not run.html:
        return []
    from pytest_recfair.report.history import load_history

    try:
        return list(load_history(run.history_dir))
    except (OSError, RecfairError) as exc:
        collector.notes.append(f"the HTML report plots no history: {exc}")
        return []


class Controller:
    """Per-run reporting on the controller (or the only process): summary and report file."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        # created with the first audit result: a run without audits never imports audit
        self.collector: audit.RunCollector | None = None
        self.ledger_dir: str | None = None  # under xdist: the run's budget ledger's home

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: every worker gets the path of the one budget ledger of the run."""
        import tempfile

        if self.ledger_dir is None:
            self.ledger_dir = tempfile.mkdtemp(prefix="recfair-run-")
            from pytest_recfair.engine.ledger import Ledger

            run_state(self.config).ledger = Ledger(Path(self.ledger_dir) / "plans.jsonl")
        node.workerinput[LEDGER_KEY] = str(Path(self.ledger_dir) / "plans.jsonl")

    def pytest_unconfigure(self) -> None:
        if self.ledger_dir is not None:
            import shutil

            shutil.rmtree(self.ledger_dir, ignore_errors=True)

    def _collector(self) -> audit.RunCollector:
        if self.collector is None:
            from pytest_recfair import engine as audit

            self.collector = audit.RunCollector()
        return self.collector

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, "recfair", None)
        if payload is not None and report.when == "call":
            self._collector().add(payload)

    def take(self, record: audit.TestRecord) -> None:
        """A test judged in this process (no xdist): its result objects as they are."""
        self._collector().add_record(record)

    def pytest_sessionfinish(self) -> None:
        collector = self.collector
        if collector is None or not collector.results:
            return
        collector.notes.extend(_unused_notes(self.config))
        plotted = _add_to_history(self.config, collector)  # first: the plot shows this run
        from pytest_recfair.report.channels import write_run_report

        for path in run_state(self.config).run.reports:
            try:
                write_run_report(collector, path, plotted)
            except (OSError, RecfairError) as exc:
                collector.notes.append(f"could not write fairness report {path}: {exc}")
            else:
                collector.notes.append(f"fairness report written: {path}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminal.plan_summary(self.config, terminalreporter)
        terminal.summary(self.config, terminalreporter, self.collector)


# options that change which prompts the tests ask: a run with one of them does not ask
# everything the recordings hold, so it never prunes
_NARROWING = ("fairness_entities", "fairness_repeats", "fairness_seed")


class Pruner:
    """--fairness-prune: what the run used; at the end, what it did not (docs/cassettes.md)."""

    def __init__(self, config: pytest.Config, *, dry_run: bool = False) -> None:
        self.config = config
        self.dry_run = dry_run  # --fairness-prune-dry-run: list only
        self.usage: set[Any] = set()
        self.baselines: set[Path] = set()
        self.roots: set[tuple[str, str]] = set()
        self.deselected = 0
        self.lines: list[str] = []

    def use(self, s: settings.AuditSettings) -> set[Any]:
        self.roots.add((s.cassette_dir, s.baseline_dir))
        return self.usage

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    def _partial(self, session: pytest.Session) -> str | None:
        """Why this run may not have used everything that is still needed, or None."""
        config = self.config
        run = run_state(config).run
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        stats = getattr(reporter, "stats", {}) if reporter is not None else {}
        reasons = [
            (config.getoption("numprocesses", None) not in (None, 0), "run with xdist (-n)"),
            (run.shard is not None, "a shard"),
            (bool(run.merge), "a merge"),
            (bool(config.getoption("keyword") or config.getoption("markexpr")), "-k/-m given"),
            (config.args_source == pytest.Config.ArgsSource.ARGS, "test paths given"),
            (self.deselected > 0, f"{self.deselected} test(s) deselected"),
            # what the tests ask, narrowed (or moved: another seed draws other entities)
            *(
                (config.getoption(dest, None) is not None, f"--{dest.replace('_', '-')} given")
                for dest in _NARROWING
            ),
            (session.testsfailed > 0, f"{session.testsfailed} test(s) failed"),
            (bool(stats.get("skipped")), "test(s) skipped"),
            (bool(stats.get("error")), "errors"),
        ]
        found = [why for cond, why in reasons if cond]
        return ", ".join(found) if found else None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from pytest_recfair.cassettes import prune

        if not self.roots:  # no audit asked for its cassettes
            self.roots.add((settings.DEFAULTS["cassette_dir"], settings.DEFAULTS["baseline_dir"]))
        partial = self._partial(session)
        if self.dry_run:
            partial = "--fairness-prune-dry-run" + (f"; {partial}" if partial else "")
        root = self.config.rootpath
        for cassette_dir, baseline_dir in sorted(self.roots):
            found = prune.plan(
                root / cassette_dir,
                self.usage,
                root / baseline_dir,
                self.baselines,
                migrate=partial is None,
            )
            self.lines.extend(found.lines(root))
            if partial is None and not found.empty:
                prune.apply(found)
        if not self.lines:
            self.lines.append("nothing unused: every cassette interaction and baseline was used")
        elif self.dry_run:
            self.lines.append(
                f"listed only, nothing deleted ({partial}); a full run with --fairness "
                "--fairness-prune deletes them"
            )
        elif partial is not None:
            self.lines.append(
                f"listed only, nothing deleted: not a full run ({partial}); run the whole "
                "suite with --fairness --fairness-prune to delete them"
            )
        else:
            self.lines.append("deleted (a full run used none of them)")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_sep("=", "fairness prune")
        for line in self.lines:
            terminalreporter.write_line(line)
