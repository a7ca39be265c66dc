"""Record and replay the HTTP calls a Python pipeline makes while it answers the audit: a
:class:`Scope` per prompt (a context variable: it follows the call into threads and tasks),
its calls kept only once its answer is final (a failed call is never recorded, an answer
built around one not scored)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import threading
import weakref
from collections import Counter
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from pytest_recfair import secrets
from pytest_recfair.cassettes.miss import request_difference
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.cassettes.vcrfile import RecordedRequest, RecordedResponse, head
from pytest_recfair.errors import ConfigError, ProviderError, RecfairError
from pytest_recfair.providers.base import Completion, Usage
from pytest_recfair.providers.transport import capped_body, decoded_reply, response_of

_Parts = tuple[str, str, list[tuple[str, str]], bytes]  # method, URL, headers, body
_Reply = tuple[int, list[tuple[str, str]], bytes, str]  # status, headers, body, reason


class BudgetStop(ConfigError):
    """The pipeline asked for a live request past the run's budget; nothing was sent."""


@dataclass
class Allowance:
    """What one audit's live requests may still spend (None: no limit), in all its threads."""

    requests: int | None = None
    cost: float | None = None
    prices: tuple[float, float] | None = None
    sent: int = 0
    spent: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take(self, what: str, test_id: str) -> None:  # or BudgetStop before it is sent
        with self.lock:
            if self.requests is not None and self.sent >= self.requests:
                raise BudgetStop(
                    f"recfair_max_requests: the pipeline of {test_id} asked for live request "
                    f"{self.sent + 1:,} ({what}) past this audit's share of the budget "
                    f"({self.requests:,}); it was not sent. Raise recfair_max_requests or "
                    "audit fewer entities (--fairness-entities)."
                )
            if self.cost is not None and self.spent >= self.cost:
                raise BudgetStop(
                    f"recfair_max_cost: the pipeline of {test_id} has spent ${self.spent:,.4f} "
                    f"of this audit's ${self.cost:,.4f} (from the replies' usage); request "
                    f"{what} was not sent. Raise recfair_max_cost or audit fewer entities."
                )
            self.sent += 1

    def charge(self, usage: Usage | None) -> None:
        if usage is not None and self.prices is not None:
            with self.lock:
                self.spent += usage.cost(self.prices)


@dataclass
class Scope:
    """One audit prompt being answered by the pipeline: where its calls are recorded."""

    store: CassetteStore
    test_id: str
    case: Any  # the prompt case (id, entity_id, repeat, prompt)
    allowance: Allowance | None = None
    # the prompt's 2xx interactions, recorded once its answer is final (settle)
    commits: list[tuple[RecordedRequest, RecordedResponse]] = field(default_factory=list)
    usage: Usage | None = None
    stop: RecfairError | None = None  # a miss or the budget: stops the whole run
    # request -> why its last try failed; a later success of the same request clears it
    failing: dict[tuple[str, str, bytes], str] = field(default_factory=dict)
    vcr_loaded: int = 0  # interactions vcrpy's cassette was given (intercept="vcr")
    vcr_seen: list[object] = field(default_factory=list)
    # requests vcrpy sent live and has not recorded a reply to (yet): a transport error
    # never reaches vcrpy's cassette, so what is left here when the prompt ends failed
    vcr_unanswered: Counter[tuple[str, str, bytes]] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def entity(self) -> str:
        return str(self.case.entity_id or "_unscoped")

    def lookup(self, asked: _Parts, *, http: bool = True) -> RecordedResponse | None:
        """The recorded reply, or None to send it live (``_live``)."""
        method, url, headers, body = asked
        _register_secrets(self.store, headers)
        if self.stop is not None:  # the run is stopping: send nothing more
            raise self.stop
        case, store = self.case, self.store
        hit = store.lookup(
            self.test_id, self.entity, method, url, body, case.repeat, case_id=case.id
        )
        if hit is not None:
            with self.lock:
                self._add_usage(usage_of(hit.body))
                self.failing.pop((method, url, body), None)
            return hit
        self._live(method, url, body, counted=http)
        return None

    def _live(self, method: str, url: str, body: bytes, *, counted: bool = True) -> None:
        """The miss when the record mode forbids the network; else a live request, counted."""
        store, case = self.store, self.case
        if not store.needs_network(self.test_id, self.entity):
            miss = store.miss(self.test_id, self.entity, method, url, body, case.repeat, case=case)
            self.stop = miss.with_difference(request_difference(self._recorded(method, url), body))
            raise self.stop
        if counted and self.allowance is not None:
            try:
                self.allowance.take(_line(method, url), self.test_id)
            except BudgetStop as exc:
                self.stop = exc
                raise

    def unplayable(self, request: object, method: str, url: str, body: bytes) -> None:
        """vcrpy found no recording for ``request`` (asked once per request object)."""
        if any(seen is request for seen in self.vcr_seen):
            return
        self.vcr_seen.append(request)
        self._live(method, url, body)
        with self.lock:
            self.vcr_unanswered[(method, url, body)] += 1

    def vcr_done(self) -> None:
        """The prompt's vcrpy cassette is saved: a live request with no reply failed."""
        with self.lock:
            for key, left in self.vcr_unanswered.items():
                if left > 0:
                    self.failing[key] = f"{_line(*key[:2])} got no reply (a transport error)"
            self.vcr_unanswered.clear()

    def keep(self, asked: _Parts, reply: _Reply) -> RecordedResponse:
        """A live reply as the pipeline gets it (decoded); a 2xx is kept for the cassette."""
        (method, url, headers, body), (status, _, content, _) = asked, reply
        recorded = decoded_reply(*reply)
        _register_secrets(self.store, headers)
        usage = usage_of(content) if 200 <= status < 300 else None
        if self.allowance is not None:
            self.allowance.charge(usage)
        with self.lock:
            if 200 <= status < 300:
                self.failing.pop((method, url, body), None)
                self._add_usage(usage)
                repeat, case_id = int(self.case.repeat), self.case.id
                request = RecordedRequest(method, url, tuple(headers), body, repeat, case_id)
                self.commits.append((request, recorded))
            else:
                self.failing[(method, url, body)] = f"{_line(method, url)} answered HTTP {status}"
        return recorded

    def _recorded(self, method: str, url: str) -> list[str]:
        """For a miss: the bodies recorded to this endpoint for this prompt (else the entity)."""
        here = head(method, url)
        same = [(c, str(k[3])) for c, k, _ in self.store.recorded(self.entity) if k[:3] == here]
        return [b for c, b in same if c == self.case.id] or [b for _, b in same]

    def failed(self, method: str, url: str, body: bytes, error: BaseException) -> None:
        with self.lock:
            self.failing[(method, url, body)] = (
                f"{_line(method, url)} failed: {type(error).__name__}: {error}"
            )

    def _add_usage(self, usage: Usage | None) -> None:
        if usage is not None:
            self.usage = usage if self.usage is None else self.usage + usage

    def settle(self, result: Completion | str) -> Completion | str:
        """The result, recordings kept; not an answer built around a request that failed."""
        if self.stop is not None:
            return result
        if isinstance(result, Completion) and self.failing:
            first = next(iter(self.failing.values()))
            more = len(self.failing) - 1
            return (
                f"the pipeline answered case {self.case.id!r} although its request "
                f"{first}{f' (and {more} more)' if more else ''} and was not answered on a "
                "retry: a failed request is not a reply, so the answer is not scored."
            )
        if isinstance(result, Completion):
            for request, response in self.commits:
                self.store.record(self.test_id, self.entity, request, response)
            if result.usage is None and self.usage is not None:
                return Completion(result.text, result.finish_reason, self.usage, result.model)
        return result


#: The audit prompt being answered in this thread or task, if any.
SCOPE: ContextVar[Scope | None] = ContextVar("recfair_pipeline_scope", default=None)


_OPEN = [0]  # prompts being answered in this process, of every audit
_OPEN_LOCK = threading.Lock()


@contextlib.contextmanager
def scoped(scope: Scope) -> Iterator[Scope]:
    """Requests through a recfair client in this block (and its threads) are ``scope``'s."""
    token = SCOPE.set(scope)
    with _OPEN_LOCK:
        _OPEN[0] += 1
    try:
        yield scope
    finally:
        with _OPEN_LOCK:
            _OPEN[0] -= 1
        SCOPE.reset(token)


def _scope() -> Scope | None:
    """The prompt a request belongs to (None: an ordinary client). Outside any prompt while
    an audit runs, it came from a thread the pipeline started: refused (replay would not)."""
    scope = SCOPE.get()
    if scope is None and _OPEN[0]:
        raise ProviderError(
            "recfair_http_client: a request was sent outside the audit prompt it belongs "
            "to, from a thread the pipeline started itself (a thread pool does not carry "
            "the context that ties it to the prompt). Submit such work with a copy of the "
            "context: pool.submit(contextvars.copy_context().run, fn, *args)."
        )
    return scope


def usage_of(body: bytes) -> Usage | None:
    """Tokens a model reply says it used (OpenAI, Anthropic and Gemini shapes)."""
    if b"sage" not in body:  # usage / usageMetadata; most other bodies skip the parse
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    found = (data.get("usage") or data.get("usageMetadata")) if isinstance(data, dict) else None
    if not isinstance(found, dict):
        return None
    prompt = _count(found, "prompt_tokens", "input_tokens", "promptTokenCount")
    completion = _count(found, "completion_tokens", "output_tokens", "candidatesTokenCount")
    return None if prompt is None and completion is None else Usage(prompt or 0, completion or 0)


def _count(data: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = data.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _line(method: str, url: str) -> str:
    parts = urlsplit(url)
    return f"{method.upper()} {parts.hostname or ''}{parts.path}"


def _register_secrets(store: CassetteStore, headers: list[tuple[str, str]]) -> None:
    """The pipeline's credentials (its SDK's auth headers): scrubbed from all it writes."""
    found: list[str] = []
    for name, value in headers:
        if secrets.is_secret_header(name):
            found.append(value)
            scheme, _, rest = value.partition(" ")
            if rest and scheme.lower() in ("bearer", "basic", "token"):
                found.append(rest)
    if found:
        secrets.register(found)
        store.add_secrets(found)


# --- output-level recording: what a function returned, for a model not behind HTTP


def output_request(model: str, system: str | None, prompt: str) -> tuple[str, str, bytes]:
    """The request an output recording is filed under: function label and prompt."""
    body = json.dumps({"system": system, "prompt": prompt}, ensure_ascii=False, sort_keys=True)
    return "POST", f"https://recfair.callable/{quote(model, safe='')}", body.encode("utf-8")


def output_reply(completion: Completion) -> bytes:
    u = completion.usage
    usage = u and {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens}
    data = {"text": completion.text, "finish_reason": completion.finish_reason, "usage": usage}
    return json.dumps(data, ensure_ascii=False).encode("utf-8")


def output_completion(body: bytes, model: str) -> Completion:
    """The recorded output as a Completion; a damaged one is an error."""
    try:
        data = json.loads(body)
        text, finish = data["text"], data.get("finish_reason")
        if not isinstance(text, str) or not isinstance(finish, str | None):
            raise TypeError("text must be a string")
    except (ValueError, KeyError, TypeError) as exc:
        raise ProviderError(
            f"recorded output of {model} is not a recfair output recording ({exc}); "
            "re-record it with --fairness-record=all."
        ) from None
    return Completion(text, finish, usage_of(body), model)


# --- the clients handed to the pipeline's SDK, one per httpx generation


def _ask(scope: Scope, request: Any, body: bytes) -> tuple[_Parts, RecordedResponse | None]:
    """The request's parts, and its recorded reply (None: send it live)."""
    headers = [(str(n), str(v)) for n, v in request.headers.multi_items()]
    parts = (str(request.method), str(request.url), headers, body)
    return parts, scope.lookup(parts)


def _got(lib: Any, scope: Scope, parts: _Parts, live: Any, content: bytes, cap: int | None) -> Any:
    """A live reply, kept by the scope (body capped), as the response the pipeline gets."""
    headers = [(str(n), str(v)) for n, v in live.headers.multi_items()]
    reply = (live.status_code, headers, capped_body(content, cap), live.reason_phrase)
    return response_of(scope.keep(parts, reply), lib)


def http_client(
    generation: str = "httpx2", max_reply_chars: int | None = None, sync: bool = True
) -> Any:
    """A ``Client`` (else an ``AsyncClient``, a pool per event loop: one per audit) of
    ``generation`` ("httpx2": today's SDKs; "httpx": httpx 0.x) whose requests inside an
    audit prompt are recorded and replayed."""
    # httpx2: a core dependency, today's openai and anthropic SDKs take only it
    lib: Any = httpx if generation == "httpx" else importlib.import_module("httpx2")
    pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    def network() -> Any:
        loop = asyncio.get_running_loop()
        if loop not in pools:
            pools[loop] = lib.AsyncHTTPTransport()
        return pools[loop]

    class RecfairTransport(lib.BaseTransport, lib.AsyncBaseTransport):  # type: ignore[misc]
        # its pool connects on the first live request
        inner: Any = lib.HTTPTransport() if sync else None

        def handle_request(self, request: Any) -> Any:
            scope = _scope()
            if scope is None:
                return self.inner.handle_request(request)
            parts, hit = _ask(scope, request, request.read())
            if hit is not None:
                return response_of(hit, lib)
            try:
                live = self.inner.handle_request(request)
                with contextlib.closing(live):
                    content = live.read()
            except Exception as exc:
                scope.failed(parts[0], parts[1], parts[3], exc)
                raise
            return _got(lib, scope, parts, live, content, max_reply_chars)

        async def handle_async_request(self, request: Any) -> Any:
            scope = _scope()
            if scope is None:
                return await network().handle_async_request(request)
            parts, hit = _ask(scope, request, await request.aread())
            if hit is not None:
                return response_of(hit, lib)
            try:
                live = await network().handle_async_request(request)
                async with contextlib.aclosing(live):
                    content = await live.aread()
            except Exception as exc:
                scope.failed(parts[0], parts[1], parts[3], exc)
                raise
            return _got(lib, scope, parts, live, content, max_reply_chars)

        def close(self) -> None:
            self.inner.close()

        async def aclose(self) -> None:
            with contextlib.suppress(RuntimeError):
                inner = pools.pop(asyncio.get_running_loop(), None)
                if inner is not None:
                    await inner.aclose()

    client = lib.Client if sync else lib.AsyncClient
    return client(transport=RecfairTransport(), timeout=lib.Timeout(600.0, connect=10.0))
