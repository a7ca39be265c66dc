"""The progress meter of a run: done/total, rate, ETA, failures, tokens, cost; one line.

:class:`LiveLine` holds the counts and renders the line. It writes through two callables
the caller gives it -- ``rewrite(text)`` (redraw the current terminal line) and
``write_line(text)`` (print a whole line) -- so the pytest plugin can route it through its
terminal reporter, which shows it without ``-s``. On a terminal the line is redrawn at
most every :attr:`LiveLine.min_interval` seconds; elsewhere (CI logs, pipes) it prints one
line per tenth of the work, so logs stay short.

:class:`Progress` is the same meter drawn on a stream (stderr by default) with ``\\r``, for
runs outside pytest (``run_cases(progress=...)``). It draws only when the stream is a
terminal (unless forced), so captured output, CI logs and xdist workers stay clean.

Pure: stdlib only.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Final, TextIO

__all__ = ["LiveLine", "Progress", "clock"]

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
    #: The word after the counts ("20/40 prompts"); none by default.
    unit = ""

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

    def render(self, now: float | None = None) -> str:
        elapsed = (self._now() if now is None else now) - self._start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        pct = 100 * self.done // self.total if self.total else 100
        unit = f" {self.unit}" if self.unit else ""
        parts = [f"{self.label}: {self.done:,}/{self.total:,}{unit} ({pct}%)", f"{rate:.1f}/s"]
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
        self.advance_many(int(failed), int(not failed), tokens, cost)

    def advance_many(self, failed: int, answered: int, tokens: int, cost: float | None) -> None:
        """Prompts done at once (a replay served from the cache)."""
        with self._lock:
            self.done += failed + answered
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
            self._rewrite(self.render(now))
            self._drawn = True
            return
        tenth = _TENTHS * self.done // self.total if self.total else _TENTHS
        if tenth > self._tenth and self._now() - self._start >= self.log_after:
            self._tenth = tenth
            self._write_line(self.render())

    def note(self, text: str) -> None:
        """One line of its own for the run's output (the progress line ends first)."""
        with self._lock:
            if self.tty and self._drawn:
                self._write_line("")
                self._drawn = False
            self._write_line(text)

    def close(self) -> None:
        """Leave the final line on screen (a terminal) and end it."""
        with self._lock:
            if self.tty and self._drawn:
                self._rewrite(self.render())
                self._write_line("")
                self._drawn = False


class Progress(LiveLine):
    """The meter drawn on ``stream`` (stderr by default) with ``\\r``, or not at all.

    ``enabled=None`` means: draw only if ``stream`` is a terminal. Disabled, it counts and
    writes nothing (no line per tenth either: that is for the pytest terminal).
    """

    # Redrawing more often than this only costs time; the eye cannot follow it.
    min_interval = 0.1
    unit = "prompts"

    def __init__(
        self,
        total: int,
        *,
        enabled: bool | None = None,
        stream: TextIO | None = None,
        label: str = "recfair",
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled and total > 0
        self._width = 0
        super().__init__(
            total, tty=self.enabled, rewrite=self._draw, write_line=self._end, label=label
        )

    def line(self, now: float | None = None) -> str:
        """The line as drawn at time ``now`` (``time.monotonic()``; default: now)."""
        return self.render(now)

    def advance(self, *, failed: bool = False, tokens: int = 0, cost: float | None = None) -> None:
        if not self.enabled:  # the replay fast path: count, nothing else
            self.done += 1
            self.failed += failed
            return
        super().advance(failed=failed, tokens=tokens, cost=cost)

    def note(self, text: str) -> None:
        """Written on ``stream`` even when the meter is not drawn: it is not progress."""
        with self._lock:
            if self._width:
                self.stream.write("\n")
                self._width = 0
            self.stream.write(text + "\n")
            self.stream.flush()

    def _draw(self, text: str) -> None:
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()

    def _end(self, text: str) -> None:
        if self.enabled:
            self.stream.write(text + "\n")
            self.stream.flush()
        self._width = 0
