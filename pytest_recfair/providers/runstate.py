"""What a run of the provider runner is given (:class:`RunOptions`, the cases), what it
gives back (:class:`RunOutcome`), and the state its parts share (:class:`Run`)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import httpx

from pytest_recfair.errors import ConfigError, RecfairError
from pytest_recfair.providers import base as replycap
from pytest_recfair.providers.adapter import CallableProvider
from pytest_recfair.providers.base import Completion, Provider, Usage
from pytest_recfair.providers.pacing import Pacer
from pytest_recfair.providers.progress import Progress
from pytest_recfair.providers.retry import Backoff, Retryable
from pytest_recfair.providers.transport import CaseRef, case_extensions

if TYPE_CHECKING:
    from pytest_recfair.cassettes.store import CassetteStore

__all__ = [
    "CaseLike",
    "LiveLike",
    "Run",
    "RunOptions",
    "RunOutcome",
    "as_provider",
    "check_args",
    "outcome",
    "unique_ids",
]


class CaseLike(CaseRef, Protocol):
    """What the runner reads from a ``prompts.PromptCase``: what replay reads (id,
    entity_id, repeat) and the prompt itself."""

    @property
    def system(self) -> str | None: ...
    @property
    def prompt(self) -> str: ...


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
    unknown_usage: int = field(default=0)  # completions whose reply reported no usage


class LiveLike(Protocol):
    """What the runner calls on the progress line of a live run."""

    def advance(
        self, *, failed: bool = False, tokens: int = 0, cost: float | None = None
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How :func:`~pytest_recfair.providers.runner.run_cases` sends the cases (one object
    instead of a long signature).

    ``transport``, ``backoff``/``max_backoff``, ``max_retry_after``, ``sleep`` and
    ``progress_stream`` are for tests and benchmarks (see ``run_cases``).
    """

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
    # the pytest progress line (progress.LiveLine): advanced once per case sent live
    live: LiveLike | None = None
    max_reply_chars: int | None = None  # longer replies are cut, with a note (replycap)
    # requests / tokens per minute to pace to (recfair_rpm / recfair_tpm); None: what the
    # replies' rate-limit headers say, if anything (pacing)
    rpm: float | None = None
    tpm: float | None = None

    @classmethod
    def of(cls, options: RunOptions | None, overrides: Mapping[str, Any]) -> RunOptions:
        """``options`` (or the defaults) with keyword ``overrides`` applied."""
        base = options if options is not None else cls()
        return dataclasses.replace(base, **overrides) if overrides else base


class Run:
    """Shared state of one run: counters, results, the retry policy."""

    def __init__(self, cases: Sequence[CaseLike], opts: RunOptions, progress: Progress) -> None:
        self.cases = cases
        self.concurrency = opts.concurrency
        self.timeout = opts.timeout
        self.max_retries = opts.max_retries
        self.wait = Backoff(opts.backoff, opts.max_backoff, opts.max_retry_after)
        # The transport reads each request's timeouts from its extensions.
        self.timeout_ext = httpx.Timeout(opts.timeout).as_dict()
        self.sleep = opts.sleep
        self.progress = progress
        self.completions: dict[str, Completion] = {}
        self.errors: dict[str, str] = {}
        self.requests = 0
        self.retries = 0
        self.abort: RecfairError | None = None  # set by the first case that stops the run
        self.max_reply_chars = opts.max_reply_chars
        self.pacer: Pacer | None = None  # set by the runner (pacing.Pacer)
        self.max_tokens: int | None = None  # the provider's, for the tokens estimate

    def tokens_of(self, case: CaseLike) -> float:
        """Tokens ``case`` may use, estimated before it is sent (the plan's estimate)."""
        from pytest_recfair.providers.pacing import request_tokens

        return float(request_tokens(case, self.max_tokens))

    async def pause(self, retry: int, failure: Retryable) -> None:
        """Wait before retry number ``retry`` (1 = the first retry)."""
        await (self.sleep or asyncio.sleep)(self.wait(retry, failure))

    def request(self, provider: Provider, case: CaseLike) -> httpx.Request:
        """The request for ``case``, tagged for the cassette transport, with this run's
        timeouts."""
        request = provider.build_request(case.system, case.prompt)
        request.extensions = {
            **request.extensions,
            "timeout": self.timeout_ext,
            **case_extensions(case),
        }
        return request

    def finish(self, case: CaseLike, result: Completion | str) -> None:
        if isinstance(result, Completion):
            if self.max_reply_chars is not None:
                result = _capped(result, self.max_reply_chars)
            self.completions[case.id] = result
            usage = result.usage
            self.progress.advance(tokens=usage.total_tokens if usage is not None else 0)
        else:
            self.errors[case.id] = result
            self.progress.advance(failed=True)


def _capped(completion: Completion, limit: int) -> Completion:
    """The reply cut to ``limit`` characters, with a note (once: a replayed cut reply
    already ends with its note)."""
    if len(completion.text) <= limit or replycap.was_cut(completion.text):
        return completion
    text, _ = replycap.cut_text(completion.text, limit)
    return dataclasses.replace(completion, text=text)


def check_args(concurrency: int, timeout: float, max_retries: int, prices: Any) -> None:
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ConfigError(
            f"concurrency: expected an integer >= 1 (requests in flight), got {concurrency!r}."
        )
    if not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ConfigError(f"timeout: expected seconds > 0 per request, got {timeout!r}.")
    if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
        raise ConfigError(
            f"max_retries: expected an integer >= 0 (0 = no retries), got {max_retries!r}."
        )
    if prices is not None and (
        not isinstance(prices, (tuple, list))
        or len(prices) != 2
        or not all(isinstance(p, (int, float)) and p >= 0 for p in prices)
    ):
        raise ConfigError(
            "prices: expected (USD per 1M prompt tokens, USD per 1M completion tokens), "
            f"e.g. (0.15, 0.60); got {prices!r}."
        )


def as_provider(provider: Any) -> Provider | CallableProvider:
    if isinstance(provider, CallableProvider):
        return provider
    if callable(getattr(provider, "build_request", None)) and callable(
        getattr(provider, "parse_response", None)
    ):
        return provider  # type: ignore[no-any-return]
    return CallableProvider(provider)


def unique_ids(cases: Sequence[CaseLike]) -> list[str]:
    ids = [case.id for case in cases]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ConfigError(
            f"cases: every case needs its own id, but {dup!r} occurs more than once; "
            "build them with prompts.build_cases."
        )
    return ids


def outcome(
    run: Run, ids: list[str], prices: tuple[float, float] | None, elapsed: float
) -> RunOutcome:
    usage = Usage()
    unknown = 0
    for completion in run.completions.values():
        if completion.usage is None:
            unknown += 1
        else:
            usage = usage + completion.usage
    # Keep the cases' order, not completion order, so outcomes compare and print stably.
    order = {case_id: i for i, case_id in enumerate(ids)}
    return RunOutcome(
        completions=dict(sorted(run.completions.items(), key=lambda kv: order[kv[0]])),
        errors=dict(sorted(run.errors.items(), key=lambda kv: order[kv[0]])),
        usage=usage,
        cost=usage.cost((float(prices[0]), float(prices[1]))) if prices is not None else None,
        requests=run.requests,
        retries=run.retries,
        elapsed=elapsed,
        unknown_usage=unknown,
    )
