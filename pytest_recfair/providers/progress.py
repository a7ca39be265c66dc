"""A one-line progress meter for live runs: done/total, rate, ETA, on stderr.

It redraws in place with ``\\r`` and only when the stream is a terminal (unless forced),
so captured output, CI logs and xdist workers stay clean.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """``enabled=None`` means: draw only if ``stream`` is a terminal."""

    # Redrawing more often than this only costs time; the eye cannot follow it.
    min_interval = 0.1

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
        self.total = total
        self.label = label
        self.done = 0
        self.failed = 0
        self._start = time.monotonic()
        self._last_draw = 0.0
        self._width = 0

    def line(self, now: float | None = None) -> str:
        elapsed = (now if now is not None else time.monotonic()) - self._start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        pct = 100 * self.done // self.total if self.total else 100
        text = f"{self.label}: {self.done}/{self.total} prompts ({pct}%)  {rate:.1f}/s"
        if self.failed:
            text += f"  {self.failed} failed"
        if self.done < self.total:
            eta = (self.total - self.done) / rate if rate > 0 else None
            text += f"  ETA {_clock(eta)}" if eta is not None else "  ETA --:--"
        else:
            text += f"  in {_clock(elapsed)}"
        return text

    def advance(self, *, failed: bool = False) -> None:
        self.done += 1
        self.failed += failed
        if not self.enabled:
            return
        now = time.monotonic()
        if self.done < self.total and now - self._last_draw < self.min_interval:
            return
        self._last_draw = now
        self._draw(self.line(now))

    def _draw(self, text: str) -> None:
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._width:
            self._draw(self.line())
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0
