"""The runner's failure policy (listed in :mod:`.runner`): what is retried, what stops the run."""

from __future__ import annotations

from typing import Any

import httpx

from pytest_recfair.errors import ProviderError, RecfairError
from pytest_recfair.providers.base import (
    Completion,
    GarbledReply,
    Provider,
    TruncatedReply,
    error_detail,
)
from pytest_recfair.providers.http import unauthorized_hint
from pytest_recfair.providers.pacing import Seen, gemini_quota, read_headers, retry_after_seconds
from pytest_recfair.providers.transport import CaseRef

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
FATAL_STATUS = frozenset({401, 403, 404, 407})


class Retryable(Exception):
    """One attempt failed in a way that may pass on a later try."""

    def __init__(
        self, what: str, *, retry_after: float | None = None, unreachable: bool = False
    ) -> None:
        super().__init__(what)
        self.what, self.retry_after, self.unreachable = what, retry_after, unreachable


class Abort(Exception):
    """Carries the error that stops the whole run through the task group."""

    def __init__(self, error: RecfairError) -> None:
        super().__init__(str(error))
        self.error = error


def limits_of(response: httpx.Response) -> tuple[Seen | None, float | None, str]:
    """The limits a reply states and, for a 429, how long to wait and what said so: headers,
    or Gemini's error details (which also name the per-minute quota that was hit)."""
    headers, seen = response.headers, read_headers(response.headers)
    if response.status_code != 429:
        return seen, None, ""
    wait = retry_after_seconds(headers)
    said = next((n for n in ("retry-after-ms", "Retry-After") if headers.get(n)), None)
    if wait is None or seen is None:
        delay, quota = gemini_quota(response.content)
        wait = wait if wait is not None else delay
        seen = seen or quota
    return seen, wait, said or "error details (RetryInfo)"


def url_of(provider: Any) -> str:
    return str(getattr(provider, "base_url", "") or getattr(provider, "name", "the service"))


def judge(provider: Provider, response: httpx.Response, case: CaseRef) -> Completion:
    """The completion in ``response``, or the exception that says what to do about it."""
    status = response.status_code
    if 200 <= status < 300:
        try:
            return provider.parse_response(response)
        except TruncatedReply as exc:
            raise Retryable(f"reply cut off: {exc}") from None
        except GarbledReply as exc:  # a proxy's page, a broken gateway: worth a retry
            raise Retryable(str(exc)) from None
    if status in RETRYABLE_STATUS or status >= 500:
        # a 429's wait may be in Gemini's error details (RetryInfo)
        wait = limits_of(response)[1] if status == 429 else retry_after_seconds(response.headers)
        raise Retryable(
            f"HTTP {status} {response.reason_phrase}: {error_detail(response)}", retry_after=wait
        )
    error = _refused(provider, response, case)
    raise Abort(error) if status in FATAL_STATUS else error


def _refused(provider: Any, response: httpx.Response, case: CaseRef) -> ProviderError:
    """What a 4xx that no retry mends says, and what to do (401-407 stop the whole run)."""
    env, model = getattr(provider, "api_key_env", None), getattr(provider, "model", "?")
    base, status = url_of(provider), response.status_code
    key = f"the key in {env}" if env else "your credentials"
    todo = {
        401: unauthorized_hint(env, base),
        403: f"{key} lacks access to model {model!r} (case {case.id!r}) or to this project; "
        "request access or use another model.",
        404: f"Either the model {model!r} is unknown to this service or base_url {base!r} is "
        "wrong (OpenAI-compatible servers usually end in /v1). Check both; nothing was retried.",
        407: "The proxy wants credentials: fix the proxy settings (HTTPS_PROXY) or bypass it "
        "for this host.",
    }.get(status, "The service rejected this request (not retried); check the options it names.")
    return ProviderError(
        f"{getattr(provider, 'name', 'provider')}: HTTP {status} {response.reason_phrase} from "
        f"{response.request.url}: {error_detail(response)}. {todo}"
    )


def advice(exc: Retryable, *, concurrency: int, timeout: float) -> str:
    """What to do once the retries of ``exc`` are spent."""
    what = exc.what
    if what.startswith("HTTP 429"):
        return (
            f"The service is rate-limiting: lower concurrency (now {concurrency}), "
            "raise max_retries, or wait and re-run."
        )
    if what.startswith("HTTP 5"):
        return "The service is failing or overloaded: re-run later or raise max_retries."
    if what.startswith("timeout"):
        return f"Raise timeout (now {timeout:g} s) or lower concurrency (now {concurrency})."
    if exc.unreachable:
        return "Is the server running, and is base_url right? Check the network and proxy too."
    return "Check the network, proxy and base_url, then re-run."


def blocker(exc: BaseException) -> BaseException | None:
    """The error under a failed connect that is not a network error (pytest-socket and the
    like refusing sockets), through causes and exception groups (anyio's connect)."""
    todo, seen = [exc], set()
    while todo:
        cause = todo.pop()
        if id(cause) in seen:
            continue
        seen.add(id(cause))
        if isinstance(cause, BaseExceptionGroup):
            todo.extend(cause.exceptions)
            continue
        transport = any(  # theirs, or a subclass of theirs (providers/aionet.py)
            kind.__module__.split(".")[0] in ("httpx", "httpcore", "anyio")
            for kind in type(cause).__mro__
        )
        if not transport and not isinstance(cause, OSError):
            return cause
        if cause.__cause__ is not None:
            todo.append(cause.__cause__)
    return None


def blocked(where: str, cause: BaseException) -> Abort:
    """The run stops: sockets are refused in this test run, no retry helps."""
    return Abort(
        ProviderError(
            f"the network is blocked in this test run: connecting to {where} raised "
            f"{type(cause).__name__}: {str(cause).rstrip('.')}. Allow the network for live "
            f"recording, or replay cassettes (record mode none)."
        )
    )
