"""The session-wide options of a pytest run (shard, merge, prune, history, reports,
compare), resolved once at configure time into a :class:`RunSettings`.

Pure data: nothing here reads a file; the plugin's session set-up loads the reference
of --fairness-compare and checks the report and history paths.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pytest_recfair.errors import ConfigError

if TYPE_CHECKING:
    from pytest_recfair.settings.declared import AuditSettings

__all__ = ["RUN_OPTIONS", "RunSettings", "Shard", "parse_shard", "resolve_run"]

_SHARD_RE = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard ``index`` (1-based) of ``count`` (``--fairness-shard=I/N``)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str, *, source: str = "--fairness-shard") -> Shard:
    """``"2/4"`` -> Shard(2, 4), with a one-line error naming ``source`` otherwise."""
    match = _SHARD_RE.fullmatch(str(text))
    if match is None:
        raise ConfigError(
            f"{source}: expected I/N with 1 <= I <= N (e.g. 2/4 for the second of four CI "
            f"jobs), got {text!r}."
        )
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= index <= count:
        raise ConfigError(
            f"{source}: expected I/N with 1 <= I <= N, got {text!r}; shards are numbered "
            f"1..{max(count, 1)}."
        )
    return Shard(index, count)


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
    compare: str | None = None  # --fairness-compare=REF (the plugin loads it)
    compare_fail: str | None = None  # --fairness-compare-fail=EXPR

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
    shard = parse_shard(shard_text) if shard_text else None
    reports_cli: Sequence[str] = cli.get("fairness_report") or ()
    if reports_cli:  # the command line replaces the ini list
        reports = [cwd / p for p in reports_cli]
    else:
        reports = [rootdir / p for p in run.report or ()]
    history = cli.get("fairness_history") or None
    history_dir = None if history is None else cwd / history
    return RunSettings(
        shard=shard,
        merge=tuple(cwd / p for p in merge),
        prune=bool(cli.get("fairness_prune")),
        history=history,
        history_dir=history_dir,
        reports=tuple(dict.fromkeys(reports)),
        compare=cli.get("fairness_compare") or None,
        compare_fail=cli.get("fairness_compare_fail") or None,
    )
