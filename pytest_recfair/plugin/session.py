"""The run as a whole: the :data:`RUN` and :data:`AUDIT` stash keys, configure time, each
audit shipped to the controller, the end of run and --fairness-prune."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_recfair import secrets, settings
from pytest_recfair.errors import ConfigError, RecfairError
from pytest_recfair.plugin import options
from pytest_recfair.settings import AuditSettings
from pytest_recfair.settings.values import RunSettings, resolve_run
from pytest_recfair.vocab import PLUGIN_VERSION

if TYPE_CHECKING:
    # the engine loads numpy: never imported at pytest start-up
    from pytest_recfair.compare.models import ModelSlot
    from pytest_recfair.compare.runs import Reference, Rule
    from pytest_recfair.engine import plan
    from pytest_recfair.engine.plan import Ledger
    from pytest_recfair.engine.sharding import MergeSource
    from pytest_recfair.engine.verdict import BaselineCheck, RunCollector, TestRecord


@dataclass
class RunState:
    """One pytest run, as the plugin's hooks and fixtures share it."""

    run: RunSettings  # the session-wide options (shard, merge, prune, history, reports)
    settings: AuditSettings  # the settings without a marker (header, notes, fallback)
    audited: set[str] | None = None  # @fairness tests collected; None: none here (xdist)
    plans: list[plan.Plan] = field(default_factory=list)  # the run's plans, in order
    pruner: Pruner | None = None  # --fairness-prune's bookkeeping
    rewritten: set[Path] = field(default_factory=set)  # cassette files rewritten
    fixture_errors: set[int] = field(default_factory=set)  # ids of errors said already
    merge_source: MergeSource | None = None  # --fairness-merge, made on first use
    ledger: Ledger | None = None  # under xdist the run's one budget count (else: plans)
    reference: Reference | None = None  # --fairness-compare=REF, loaded at configure time
    compare_fail: tuple[Rule, ...] = ()  # --fairness-compare-fail=EXPR


@dataclass
class AuditState:
    """One @fairness test: its settings from collection on, then its audit."""

    settings: AuditSettings
    slot: tuple[str, str, int] | None = None  # its place in a comparison of models, if any
    comparison: BaselineCheck | None = None  # set by fairness_result
    record: TestRecord | None = None  # shipped to the controller

    def model_slot(self) -> ModelSlot | None:
        """The slot with the resampling settings the comparison of models uses."""
        if self.slot is None:
            return None
        from pytest_recfair.compare.models import ModelSlot

        s = self.settings
        group, label, index = self.slot
        return ModelSlot(group, label, index, s.alpha, s.n_resamples, s.resample_seed)


RUN = pytest.StashKey[RunState]()
AUDIT = pytest.StashKey[AuditState]()


def run_state(config: pytest.Config) -> RunState:
    return config.stash[RUN]


def audit_state(node: Any) -> AuditState | None:
    """The audit of a collected item, or None when it is not a @fairness test."""
    found: AuditState | None = node.stash.get(AUDIT, None)
    return found


def report_header(config: pytest.Config) -> list[str] | None:
    if not config.getoption("fairness"):
        return None
    s = run_state(config).settings
    return [
        f"recfair {PLUGIN_VERSION}: seed={s.seed} (--fairness-seed), record mode={s.record_mode}, "
        f"baselines={config.rootpath / s.baseline_dir}" + (" (updating)" if s.update else "")
    ]


def terminal_line(config: pytest.Config) -> Callable[[str], None]:
    """A writer of progress lines that shows through pytest's output capture."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def write(line: str) -> None:
        if reporter is None:
            return
        with _uncaptured(config):
            # on a line of its own: under -q pytest's progress letters leave the cursor
            # mid-line, and write_line only breaks lines after a file path
            if getattr(getattr(reporter, "_tw", None), "width_of_current_line", 0):
                reporter.write("\n")
            reporter.write_line(secrets.scrub(line))

    return write


def _uncaptured(config: pytest.Config) -> contextlib.AbstractContextManager[Any]:
    """pytest's output capture suspended (shown without -s)."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    return contextlib.nullcontext() if capture is None else capture.global_and_fixture_disabled()


def live_line(config: pytest.Config, planned: plan.Plan | None) -> Any:
    """The progress line of a run that sends requests, drawn through pytest's terminal
    (shown without -s): redrawn in place on a terminal, a line per tenth elsewhere."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if planned is None or not planned.to_ask or reporter is None:
        return None
    from pytest_recfair.providers.runstate import LiveLine

    def rewrite(text: str) -> None:
        with _uncaptured(config):
            reporter.ensure_newline()  # off the "test_file.py " line pytest is writing, once
            reporter.rewrite(text, erase=True)

    def write_line(text: str) -> None:
        with _uncaptured(config):
            reporter.write_line(text)

    return LiveLine(planned.to_ask, tty=bool(reporter.isatty()), rewrite=rewrite,
                    write_line=write_line, cost_known=planned.cost is not None)  # fmt: skip


def scrub_report(report: pytest.TestReport) -> None:
    """No API key in what pytest prints or writes to JUnit XML: a traceback or captured
    output quoting a URL or an error body, a property with the reply's model name."""
    if not secrets.registered():
        return
    text = str(report.longrepr)
    if report.longrepr is not None and (clean := secrets.scrub(text)) != text:
        report.longrepr = clean
    report.sections = [(k, secrets.scrub(v)) for k, v in report.sections]
    report.user_properties = [
        (k, secrets.scrub(v) if isinstance(v, str) else v) for k, v in report.user_properties
    ]


LEDGER_KEY = "recfair_ledger"  # workerinput: the path of the run's budget ledger


def configure(config: pytest.Config) -> None:
    """The run's settings resolved once: every usage error before any prompt is sent."""
    config.addinivalue_line(
        "markers",
        "fairness(**kwargs): a fairness audit of the recommender (run with --fairness); "
        "arguments: " + ", ".join(settings.MARKER_KEYS) + ". See docs/configuration.md.",
    )
    if not hasattr(config, "workerinput"):  # xdist workers only ship results
        config.pluginmanager.register(Controller(config), "recfair-controller")
    try:  # every bad option or ini value: a usage error, one line
        options.check_strictness(config)
        run_settings = options.resolve(config, {})
        cli = {dest: config.getoption(dest, None) for dest in options.RUN_OPTIONS}
        where = {"cwd": config.invocation_params.dir, "rootdir": config.rootpath}
        run = resolve_run(cli, run_settings, **where)
        reference, rules = _reference(config, run)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    state = config.stash[RUN] = RunState(run, run_settings, reference=reference, compare_fail=rules)
    shared = getattr(config, "workerinput", {}).get(LEDGER_KEY)
    if shared:  # an xdist worker: the controller's ledger counts the budget for all
        from pytest_recfair.engine.plan import Ledger

        state.ledger = Ledger(Path(shared))
    if run.prune or run.prune_dry_run:
        state.pruner = Pruner(config)
        config.pluginmanager.register(state.pruner, "recfair-prune")


def ship(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """The call phase's audit record to the controller (from an xdist worker: a payload
    on the report, which survives serialisation); the report scrubbed."""
    its = audit_state(item) if call.when == "call" else None
    record = None if its is None else its.record
    if record is not None:
        controller = item.config.pluginmanager.get_plugin("recfair-controller")
        if controller is not None:  # one process: no dict round trip
            controller.take(record)
        else:  # an xdist worker: the payload survives serialisation
            report.recfair = record.payload()  # type: ignore[attr-defined]
    scrub_report(report)


def xdist_advice(workers: int, audits: int, ledger: Ledger) -> list[str]:
    """Once per run: xdist cannot pay (more workers than audits, or a replay)."""
    if workers > audits:
        return [
            f"xdist: {workers} workers for {audits} audit(s): an audit runs in one worker, "
            f"so the others only start up; use -n {audits} or fewer (docs/github-actions.md)"
        ]
    if not any(p.to_ask for p in ledger.plans()):
        return [
            f"xdist: {workers} workers on a replay (no prompt sent live): each starts and "
            "collects the suite anew, which a replay does not win back (the demo runs "
            "slower with -n 2 than without); replay without -n (docs/github-actions.md)"
        ]
    return []


def _unused_notes(config: pytest.Config) -> list[str]:
    """Under --fairness-update, the stored baselines no collected test owns. Not after -k
    or -m (their tests were only deselected), nor under xdist (workers collect)."""
    state = run_state(config)
    narrowed = config.getoption("keyword", "") or config.getoption("markexpr", "")
    narrowed = narrowed or any("::" in arg for arg in config.args)
    s = state.settings
    if not s.update or state.audited is None or narrowed:
        return []
    from pytest_recfair.engine.verdict import unused_baselines

    root = config.rootpath / s.baseline_dir
    unused = unused_baselines(root, config.rootpath, state.audited)
    return [
        f"fairness baseline not used by any test of this run: {path} ({test_id}); delete it "
        f"if that test is gone"
        for path, test_id in unused
    ]


def _add_to_history(config: pytest.Config, collector: RunCollector) -> list[Any]:
    """--fairness-history: add this run to DIR; then, for an HTML report, read DIR back
    (the runs to plot, this one last). A failure is a note, never a lost report."""
    run = run_state(config).run
    if run.history_dir is None:
        return []
    try:
        from pytest_recfair.report.history import append_run, load_history

        entry = append_run(
            run.history_dir, collector.ordered(), collector.baselines, models=collector.models(),
            settings=run_state(config).settings, cwd=config.rootpath,
        )  # fmt: skip
    except (OSError, RecfairError) as exc:
        collector.notes.append(f"could not add the run to {run.history}: {exc}")
        return []
    collector.notes.append(f"fairness history entry written: {entry}")
    if not run.html:
        return []
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
        self.collector: RunCollector | None = None
        self.ledger_dir: str | None = None  # under xdist: the run's budget ledger's home
        self.workers = 0  # xdist workers started

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: every worker gets the path of the one budget ledger of the run."""
        self.workers += 1
        if self.ledger_dir is None:
            self.ledger_dir = tempfile.mkdtemp(prefix="recfair-run-")
            from pytest_recfair.engine.plan import Ledger

            run_state(self.config).ledger = Ledger(Path(self.ledger_dir) / "plans.jsonl")
        node.workerinput[LEDGER_KEY] = str(Path(self.ledger_dir) / "plans.jsonl")

    def pytest_unconfigure(self) -> None:
        if self.ledger_dir is not None:
            shutil.rmtree(self.ledger_dir, ignore_errors=True)

    def _collector(self) -> RunCollector:
        if self.collector is None:
            from pytest_recfair.engine.verdict import RunCollector

            self.collector = RunCollector()
        return self.collector

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, "recfair", None)
        if payload is not None and report.when == "call":
            self._collector().add(payload)

    def take(self, record: TestRecord) -> None:
        """A test judged in this process (no xdist): its result objects as they are."""
        self._collector().add_record(record)

    def pytest_sessionfinish(self) -> None:
        collector = self.collector
        if collector is None or not collector.results:
            return
        collector.notes.extend(_unused_notes(self.config))
        ledger = run_state(self.config).ledger
        if ledger is not None and self.workers:
            collector.notes.extend(xdist_advice(self.workers, len(collector.results), ledger))
        plotted = _add_to_history(self.config, collector)  # first: the plot shows this run
        from pytest_recfair.report.registry import write_report

        for path in run_state(self.config).run.reports:
            try:
                write_report(
                    path, collector.ordered(), collector.baselines, models=collector.models(),
                    history=plotted,
                )  # fmt: skip
            except (OSError, RecfairError) as exc:
                collector.notes.append(f"could not write fairness report {path}: {exc}")
            else:
                collector.notes.append(f"fairness report written: {path}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """The run's total plan, under xdist after every plan line of the run's ledger (the
        workers' lines never reach this terminal); then each audit's figures and notes."""
        config, state, write = self.config, run_state(self.config), terminalreporter.write_line
        shared = state.ledger.plans() if state.ledger is not None else []
        if state.plans or shared:
            from pytest_recfair.engine.plan import total_line

            terminalreporter.write_sep("=", "fairness plan")
            lines = [f"recfair plan: {p.line()}" for p in shared]
            for line in [*lines, total_line(state.plans + shared)]:
                write(secrets.scrub(line))
        collector = self.collector
        if collector is None or not (collector.results or collector.notes):
            return
        explore = " (explore mode: nothing gated)" if state.settings.explore else ""
        terminalreporter.write_sep("=", "fairness summary" + explore)
        from pytest_recfair.report.registry import summary_lines

        # the terminal's width (COLUMNS, or 80 when not a terminal), as pytest's own lines
        width = config.get_terminal_writer().fullwidth
        for line in summary_lines(collector, width, verbose=config.get_verbosity() > 0):
            write(secrets.scrub(line))


class Pruner:
    """--fairness-prune: what the run used; at the end, what it did not (docs/cassettes.md)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
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
            (run.prune_dry_run, "--fairness-prune-dry-run"),
            (config.getoption("numprocesses", None) not in (None, 0), "run with xdist (-n)"),
            (run.shard is not None, "a shard"),
            (bool(run.merge), "a merge"),
            (bool(config.getoption("keyword") or config.getoption("markexpr")), "-k/-m given"),
            (config.args_source == pytest.Config.ArgsSource.ARGS, "test paths given"),
            (self.deselected > 0, f"{self.deselected} test(s) deselected"),
            # what the tests ask, narrowed (or moved: another seed draws other entities)
            *(
                (config.getoption(dest, None) is not None, f"--{dest.replace('_', '-')} given")
                for dest in ("fairness_entities", "fairness_repeats", "fairness_seed")
            ),
            (session.testsfailed > 0, f"{session.testsfailed} test(s) failed"),
            (bool(stats.get("skipped")), "test(s) skipped"),
            (bool(stats.get("error")), "errors"),
        ]
        found = [why for cond, why in reasons if cond]
        return ", ".join(found) if found else None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from pytest_recfair.engine.verdict import prune, prune_plan

        if not self.roots:  # no audit asked for its cassettes
            self.roots.add((settings.DEFAULTS["cassette_dir"], settings.DEFAULTS["baseline_dir"]))
        partial = self._partial(session)
        root = self.config.rootpath
        for cassettes, baselines in sorted(self.roots):
            found = prune_plan(
                root / cassettes, self.usage, root / baselines, self.baselines, migrate=not partial
            )
            self.lines.extend(found.lines(root))
            if partial is None and not found.empty:
                prune(found)
        if not self.lines:
            self.lines.append("nothing unused: every cassette interaction and baseline was used")
        elif run_state(self.config).run.prune_dry_run:
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


def _reference(
    config: pytest.Config, run: RunSettings
) -> tuple[Reference | None, tuple[Rule, ...]]:
    """--fairness-compare(-fail), loaded now, and the report and history paths checked:
    a bad one fails before any prompt is sent."""
    if config.getoption("fairness"):  # without it no report is written: no cost
        from pytest_recfair.report.registry import check_report_path

        for path in run.reports:
            check_report_path(path)
        if run.history_dir is not None:  # the history's module loads for a history only
            from pytest_recfair.report.history import check_history_dir

            check_history_dir(run.history_dir)
    if not run.compare:
        if run.compare_fail:
            raise ConfigError(
                "--fairness-compare-fail needs the run to compare with: add "
                "--fairness-compare=REF (a JSON report, or a --fairness-history entry)."
            )
        return None, ()
    from pytest_recfair.compare.runs import load_reference, parse_rules

    rules = parse_rules(run.compare_fail) if run.compare_fail else ()
    # a run stored in the history is compared with the entries before it
    cwd = config.invocation_params.dir
    return load_reference(run.compare, history_dir=run.history_dir, cwd=cwd), rules
