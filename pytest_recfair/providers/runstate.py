"""A run's options (:class:`RunOptions`), outcome (:class:`RunOutcome`), shared state
(:class:`Run`) and progress meter (:class:`LiveLine` through the plugin's terminal
reporter, so it shows without ``-s``; :class:`Progress` on a stream).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TextIO

import httpx

from pytest_recfair.errors import RecfairError
from pytest_recfair.providers import base as replycap
from pytest_recfair.providers.base import Completion, Provider, Usage
from pytest_recfair.providers.pacing import CaseText, Pacer
from pytest_recfair.providers.pipeline import Allowance
from pytest_recfair.providers.retry import Retryable
from pytest_recfair.providers.transport import CaseRef, case_extensions

if TYPE_CHECKING:
    from pytest_recfair.cassettes.store import CassetteStore


class CaseLike(CaseRef, CaseText, Protocol):
    """What the runner reads from a ``prompts.PromptCase``."""


@dataclass(frozen=True)
class RunOutcome:
    """What one run produced. ``completions`` and ``errors`` are keyed by case id and
    together cover every case; ``cost`` is None unless prices were given."""

    completions: dict[str, Completion]
    errors: dict[str, str]
    usage: Usage
    cost: float | None = None
    requests: int = 0  # HTTP requests sent (or callable calls), retries included
    retries: int = 0
    elapsed: float = 0.0  # seconds, wall clock
    unknown_usage: int = 0  # completions whose reply reported no usage


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How ``run_cases`` sends the cases. ``progress=None``: a progress line only on a
    terminal; ``prices``: USD per 1M prompt, completion tokens. ``transport``, ``sleep``
    and ``progress_stream`` replace the network, ``asyncio.sleep`` and stderr (tests)."""

    concurrency: int = 8
    timeout: float = 60.0
    max_retries: int = 5
    cassettes: CassetteStore | None = None
    test_id: str = ""
    progress: bool | None = None
    prices: tuple[float, float] | None = None
    transport: httpx.AsyncBaseTransport | None = None
    backoff: float = 0.5
    max_backoff: float = 30.0
    max_retry_after: float = 120.0
    sleep: Callable[[float], Awaitable[None]] | None = None
    progress_stream: TextIO | None = None
    live: LiveLine | None = None  # pytest's progress line: advanced per case sent live
    max_reply_chars: int | None = None  # longer replies are cut, with a note (replycap)
    # per minute (recfair_rpm / recfair_tpm); None: what the replies' headers say, if anything
    rpm: float | None = None
    tpm: float | None = None
    allowance: Allowance | None = None  # what a pipeline's live calls may still spend
    intercept: str = "none"  # "vcr": a pipeline's calls through vcrpy, a prompt at a time


# Its own generator: the retries' jitter must not disturb (or depend on) the global state.
_JITTER = random.Random()


class Run:
    """Shared state of one run: counters, results, the retry policy."""

    def __init__(self, opts: RunOptions, progress: Progress) -> None:
        self.opts, self.progress = opts, progress
        self.timeout = opts.timeout
        # The transport reads each request's timeouts from its extensions.
        self.timeout_ext = httpx.Timeout(opts.timeout).as_dict()
        self.completions: dict[str, Completion] = {}
        self.errors: dict[str, str] = {}
        self.requests = self.retries = 0
        self.abort: RecfairError | None = None  # set by the first case that stops the run
        self.pacer: Pacer | None = None  # set by the runner (pacing.Pacer)
        self.max_tokens: int | None = None  # the provider's, for the plan's tokens estimate

    async def pause(self, retry: int, failure: Retryable) -> None:
        """Wait before retry ``retry`` (1 = the first): the server's Retry-After when it gave
        one (capped), else ``min(max_backoff, backoff * 2**(retry-1)) + uniform(0, backoff)``."""
        opts, backoff = self.opts, self.opts.backoff
        if failure.retry_after is not None:
            wait = min(failure.retry_after, opts.max_retry_after)
        else:  # the exponent capped: no float overflow
            wait = min(opts.max_backoff, backoff * 2.0 ** min(retry - 1, 60))
            wait += _JITTER.uniform(0, backoff)
        await (opts.sleep or asyncio.sleep)(wait)

    def request(self, provider: Provider, case: CaseLike) -> httpx.Request:
        """The request for ``case``, tagged for the cassette transport, with its timeouts."""
        request = provider.build_request(case.system, case.prompt)
        request.extensions = dict(
            request.extensions, timeout=self.timeout_ext, **case_extensions(case)
        )
        return request

    def finish(self, case: CaseLike, result: Completion | str) -> None:
        limit = self.opts.max_reply_chars
        if isinstance(result, Completion):
            # Cut once: a replayed cut reply already ends with its note.
            if limit is not None and len(result.text) > limit and not replycap.was_cut(result.text):
                result = dataclasses.replace(result, text=replycap.cut_text(result.text, limit)[0])
            self.completions[case.id] = result
            usage = result.usage
            self.progress.advance(tokens=usage.total_tokens if usage is not None else 0)
        else:
            self.errors[case.id] = result
            self.progress.advance(failed=True)


def clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class LiveLine:
    """Progress of one live run (thread-safe: workers may report from other threads)."""

    min_interval = 0.2
    #: Off a terminal, a shorter run writes nothing (a line per tenth of 0.1 s is noise);
    #: a longer one a line per tenth after it.
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
        self.total, self.tty, self.label = total, tty, label
        self.done = self.failed = self.tokens = 0
        self.cost, self._cost_known = 0.0, cost_known
        self._rewrite, self._write_line, self._now = rewrite, write_line, now
        self._start, self._last, self._tenth, self._drawn = now(), float("-inf"), 0, False
        self._lock = threading.Lock()

    def render(self, now: float | None = None) -> str:
        elapsed = (self._now() if now is None else now) - self._start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        pct = 100 * self.done // self.total if self.total else 100
        unit = f" {self.unit}" if self.unit else ""
        parts = [f"{self.label}: {self.done:,}/{self.total:,}{unit} ({pct}%)", f"{rate:.1f}/s"]
        if self.done >= self.total:
            parts.append(f"in {clock(elapsed)}")
        else:
            parts.append(f"ETA {clock((self.total - self.done) / rate)}" if rate else "ETA --:--")
        parts += [f"{self.failed:,} failed", f"{self.tokens:,} tokens"]
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
        tenth = 10 * self.done // self.total if self.total else 10
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
    """The meter drawn on ``stream`` (stderr) with ``\\r``; ``enabled=None``: only on a
    terminal. Disabled, it only counts and notes (a line per tenth is for pytest's terminal)."""

    min_interval = 0.1  # redrawing more often only costs time: the eye cannot follow it
    unit = "prompts"

    def __init__(
        self, total: int, *, enabled: bool | None = None, stream: TextIO | None = None
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled and total > 0
        self._width = 0
        super().__init__(total, tty=self.enabled, rewrite=self._draw, write_line=self._end)

    def advance(self, *, failed: bool = False, tokens: int = 0, cost: float | None = None) -> None:
        if not self.enabled:  # the replay fast path: count, nothing else
            self.done += 1
            self.failed += failed
            return
        super().advance(failed=failed, tokens=tokens, cost=cost)

    def _draw(self, text: str) -> None:
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()

    def _end(self, text: str) -> None:  # a note is written even when no meter is drawn
        self.stream.write(text + "\n")
        self.stream.flush()
        self._width = 0
