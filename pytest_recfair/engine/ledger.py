"""The run's budget ledger shared by pytest-xdist workers: one file, locked.

Why a file and not the controller: xdist's channel runs one way while tests run (workers
send reports, the controller cannot answer a worker's question before it sends a
request), so the controller creates the ledger in a temp directory of its own, hands its
path to every worker (``workerinput``), and each worker, under an exclusive lock, reads
every plan recorded so far, checks its own against the budget and appends it. The
controller reads the ledger back at the end for the plan summary. JSON lines, one plan
each; no pytest here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path

from pytest_recfair.engine import budget as plan
from pytest_recfair.errors import ConfigError

__all__ = ["Ledger"]


@dataclasses.dataclass(frozen=True)
class Ledger:
    """The plans of one run, shared by its processes."""

    path: Path

    def reserve(self, limits: plan.Budget | None, planned: plan.Plan) -> None:
        """Check ``planned`` against ``limits`` on top of every plan of the run (every
        worker's), then record it; BudgetExceeded (nothing recorded) past the budget.
        ``limits`` None: record only (--fairness-plan)."""
        with self._locked():
            if limits is not None:
                plan.check_budget(limits, self.plans(), planned)
            line = json.dumps(dataclasses.asdict(planned), sort_keys=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")
                fh.flush()
                os.fsync(fh.fileno())

    def plans(self) -> list[plan.Plan]:
        """Every plan recorded so far, in order."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out = []
        for number, line in enumerate(text.splitlines(), 1):
            try:
                out.append(plan.Plan(**json.loads(line)))
            except (ValueError, TypeError) as exc:
                raise ConfigError(
                    f"budget ledger {self.path} line {number} is not a plan ({exc}); it is "
                    "this run's own file: re-run."
                ) from None
        return out

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                import fcntl
            except ImportError:  # pragma: no cover - Windows: workers not serialised
                yield
                return
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)
