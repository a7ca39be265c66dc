"""The session-wide options of a pytest run (shard, merge, prune, history, reports),
resolved once at configure time into a :class:`RunSettings`.

Pure: the shard parser and the report checks are imported on use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pytest_recfair.errors import ConfigError

if TYPE_CHECKING:
    from pytest_recfair.compare.reference import Reference, Rule
    from pytest_recfair.engine.base import Shard
    from pytest_recfair.settings import AuditSettings

__all__ = ["RUN_OPTIONS", "RunSettings", "resolve_run"]

#: command-line dests of the run-level options (each acts on audits only)
RUN_OPTIONS: Final[tuple[str, ...]] = (
    "fairness_history",
    "fairness_report",
    "fairness_shard",
    "fairness_merge",
    "fairness_prune",
    "fairness_compare",
    "fairness_compare_fail",
)


@dataclass(frozen=True, slots=True)
class RunSettings:
    """What a whole pytest run does beside its audits, resolved once at configure time."""

    shard: Shard | None = None  # --fairness-shard=I/N
    merge: tuple[Path, ...] = ()  # --fairness-merge: shard results to gate
    prune: bool = False  # --fairness-prune
    history: str | None = None  # --fairness-history as given (the notes name it)
    history_dir: Path | None = None  # ... resolved against the invocation directory
    reports: tuple[Path, ...] = ()  # --fairness-report, else ini recfair_report
    reference: Reference | None = None  # --fairness-compare=REF, loaded at configure time
    compare_fail: tuple[Rule, ...] = ()  # --fairness-compare-fail=EXPR

    def check(self) -> None:
        """Fail before any prompt is sent when a report or the history directory cannot
        be written (a lost report at the end would waste the run)."""
        from pytest_recfair import report

        for path in self.reports:
            report.check_report_path(path)
        if self.history_dir is not None:
            from pytest_recfair.report.history import check_history_dir

            check_history_dir(self.history_dir)

    @property
    def html(self) -> bool:
        """Whether an HTML report is written (it plots the history)."""
        return any(p.suffix.lower() == ".html" for p in self.reports)


def resolve_run(
    cli: Mapping[str, Any], run: AuditSettings, *, cwd: Path, rootdir: Path
) -> RunSettings:
    """The run-level options (``cli`` keyed by dest; ``run``: the settings without a
    marker, for ``recfair_report``); paths on the command line are relative to ``cwd``,
    ini paths to ``rootdir``. Raises ConfigError for a usage error."""
    shard_text = cli.get("fairness_shard")
    merge: Sequence[str] = cli.get("fairness_merge") or ()
    if shard_text and merge:
        raise ConfigError(
            "--fairness-shard and --fairness-merge: give one; the shard jobs audit with "
            "--fairness-shard=I/N, then one job gates their results with --fairness-merge."
        )
    shard = None
    if shard_text:
        from pytest_recfair.engine.sharding import parse_shard

        shard = parse_shard(shard_text)
    reports_cli: Sequence[str] = cli.get("fairness_report") or ()
    if reports_cli:  # the command line replaces the ini list
        reports = [cwd / p for p in reports_cli]
    else:
        reports = [rootdir / p for p in run.report or ()]
    history = cli.get("fairness_history") or None
    history_dir = None if history is None else cwd / history
    reference, rules = _compare(cli, history_dir, cwd)
    return RunSettings(
        shard=shard,
        merge=tuple(cwd / p for p in merge),
        prune=bool(cli.get("fairness_prune")),
        history=history,
        history_dir=history_dir,
        reports=tuple(dict.fromkeys(reports)),
        reference=reference,
        compare_fail=rules,
    )


def _compare(
    cli: Mapping[str, Any], history_dir: Path | None, cwd: Path
) -> tuple[Reference | None, tuple[Rule, ...]]:
    """--fairness-compare=REF (loaded now: a bad one fails before any prompt is sent) and
    --fairness-compare-fail=EXPR (which needs a reference)."""
    ref, expr = cli.get("fairness_compare"), cli.get("fairness_compare_fail")
    if not ref:
        if expr:
            raise ConfigError(
                "--fairness-compare-fail needs the run to compare with: add "
                "--fairness-compare=REF (a JSON report, or a --fairness-history entry)."
            )
        return None, ()
    from pytest_recfair.compare.reference import load_reference, parse_rules

    rules = parse_rules(expr) if expr else ()
    # a run stored in the history is compared with the entries before it
    return load_reference(ref, history_dir=history_dir, cwd=cwd), rules
