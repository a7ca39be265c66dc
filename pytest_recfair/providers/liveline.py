"""The live progress line: done/total, rate, ETA, failures, tokens, cost.

:class:`LiveLine` holds the counts and renders one line. It writes through two callables
the caller gives it -- ``rewrite(text)`` (redraw the current terminal line) and
``write_line(text)`` (print a whole line) -- so the pytest plugin can route it through its
terminal reporter, which shows it without ``-s``. On a terminal the line is redrawn at
most every :attr:`LiveLine.min_interval` seconds; elsewhere (CI logs, pipes) it prints one
line per tenth of the work, so logs stay short.

Pure: stdlib only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

__all__ = ["LiveLine", "clock"]

_TENTHS: Final = 10


def clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class LiveLine:
    """Progress of one live run (thread-safe: workers may report from other threads)."""

    min_interval = 0.2
    #: Off a terminal, a run shorter than this writes nothing (a log line per tenth of an
    #: in-process audit that takes 0.1 s is noise); a longer one a line per tenth after it.
    log_after = 2.0

    def __init__(
        self,
        total: int,
        *,
        tty: bool,
        rewrite: Callable[[str], None],
        write_line: Callable[[str], None],
        label: str = "recfair",
        cost_known: bool = False,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.tty = tty
        self.label = label
        self.done = self.failed = self.tokens = 0
        self.cost = 0.0
        self._cost_known = cost_known
        self._rewrite = rewrite
        self._write_line = write_line
        self._now = now
        self._start = now()
        self._last = float("-inf")
        self._tenth = 0
        self._drawn = False
        self._lock = threading.Lock()

    def render(self) -> str:
        elapsed = self._now() - self._start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        pct = 100 * self.done // self.total if self.total else 100
        parts = [f"{self.label}: {self.done:,}/{self.total:,} ({pct}%)", f"{rate:.1f}/s"]
        if self.done < self.total:
            eta = (self.total - self.done) / rate if rate > 0 else None
            parts.append(f"ETA {clock(eta)}" if eta is not None else "ETA --:--")
        else:
            parts.append(f"in {clock(elapsed)}")
        parts.append(f"{self.failed:,} failed")
        parts.append(f"{self.tokens:,} tokens")
        if self._cost_known:
            parts.append(f"${self.cost:,.4f}")
        return "  ".join(parts)

    def advance(self, *, failed: bool = False, tokens: int = 0, cost: float | None = None) -> None:
        """One prompt is done (answered, or failed after its retries)."""
        with self._lock:
            self.done += 1
            self.failed += failed
            self.tokens += tokens
            if cost is not None:
                self.cost += cost
                self._cost_known = True
            self._maybe_draw()

    def _maybe_draw(self) -> None:
        if self.tty:
            now = self._now()
            if self.done < self.total and now - self._last < self.min_interval:
                return
            self._last = now
            self._rewrite(self.render())
            self._drawn = True
            return
        tenth = _TENTHS * self.done // self.total if self.total else _TENTHS
        if tenth > self._tenth and self._now() - self._start >= self.log_after:
            self._tenth = tenth
            self._write_line(self.render())

    def close(self) -> None:
        """Leave the final line on screen (a terminal) and end it."""
        with self._lock:
            if self.tty and self._drawn:
                self._rewrite(self.render())
                self._write_line("")
                self._drawn = False
