"""An httpx transport that replays from, and records into, a :class:`CassetteStore`.
A miss is sent through ``inner`` when the record mode allows, else raises CassetteMiss; a
request whose ``extensions[EXT_RECORD]`` is a list gets its recording appended there, kept
by the runner only once the reply is final.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import Any, Final, Protocol

import httpx

from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.cassettes.vcrfile import RecordedRequest, RecordedResponse, Reply
from pytest_recfair.providers import base as replycap

# The request extensions the runner (and the plan's probe) set and this transport reads.
EXT_ENTITY: Final = "recfair_entity_id"  # the seed entity: picks the cassette file
EXT_REPEAT: Final = "recfair_repeat"  # tells identical entropy repeats apart
# the prompt case (its id picks among identical requests; its prompt words a miss)
EXT_CASE: Final = "recfair_case"
EXT_RECORD: Final = "recfair_record"  # a list the recording is appended to (a callable)
UNSCOPED_ENTITY = "_unscoped"  # the cassette of requests without EXT_ENTITY


class CaseRef(Protocol):
    """What a replay by parts reads of a prompt case."""

    @property
    def id(self) -> str: ...
    @property
    def entity_id(self) -> str: ...
    @property
    def repeat(self) -> int: ...


def case_extensions(case: CaseRef) -> dict[str, Any]:
    return {EXT_ENTITY: case.entity_id, EXT_REPEAT: case.repeat, EXT_CASE: case}


# The body handed on is decoded and whole, so these headers no longer describe it.
_DECODED_DROP = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class CassetteTransport(httpx.AsyncBaseTransport):
    """Serve requests from ``store``'s cassettes for ``test_id``; record misses if allowed.
    It owns ``inner``: closing this transport closes it."""

    def __init__(
        self,
        store: CassetteStore,
        test_id: str,
        inner: httpx.AsyncBaseTransport | None = None,
        *,
        max_reply_chars: int | None = None,
    ) -> None:
        if not isinstance(store, CassetteStore):
            raise TypeError(f"store must be a CassetteStore, got {type(store).__name__}")
        self.store, self.test_id, self._inner = store, test_id, inner
        self.max_reply_chars = max_reply_chars

    def _network(self) -> httpx.AsyncBaseTransport:
        if self._inner is None:
            # Created only on the first recorded miss: replay-only runs never open sockets.
            self._inner = httpx.AsyncHTTPTransport()
        return self._inner

    def replay(self, request: httpx.Request) -> httpx.Response | None:
        """The recorded reply, None to record it live, or ``CassetteMiss`` (off the network)."""
        ext = request.extensions
        args = (ext.get(EXT_ENTITY), int(ext.get(EXT_REPEAT) or 0), ext.get(EXT_CASE))
        hit = self.find(request.method, str(request.url), request.read(), *args)
        if hit is None:
            return None
        status, reason, headers, text = hit
        return response_of(RecordedResponse(status, headers, text.encode("utf-8"), reason))

    def live_only(self, entity_id: str | None) -> bool:
        """True when nothing recorded can answer this entity and recording is allowed."""
        entity, store, test = entity_id or UNSCOPED_ENTITY, self.store, self.test_id
        return not store.can_replay(test, entity) and store.needs_network(test, entity)

    def find(
        self,
        method: str,
        url: str,
        body: bytes | str,
        entity_id: str | None,
        repeat: int,
        case: object,
    ) -> Reply | None:
        """``replay`` of a request's parts, the reply as the index holds it."""
        entity, store = entity_id or UNSCOPED_ENTITY, self.store
        hit = store.reply(self.test_id, entity, method, url, body, repeat, _case_id(case))
        if hit is None and not store.needs_network(self.test_id, entity):
            raise store.miss(self.test_id, entity, method, url, body, repeat, case=case)
        return hit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()  # in memory already for every non-streaming request
        replayed = self.replay(request)
        if replayed is not None:
            return replayed
        live = await self._network().handle_async_request(request)
        try:
            content = await live.aread()  # content-encoding undone: readable cassettes
        finally:
            await live.aclose()
        status, headers = live.status_code, live.headers.multi_items()
        capped = capped_body(content, self.max_reply_chars)
        recorded = decoded_reply(status, headers, capped, live.reason_phrase)
        # Error replies are not model output: the store keeps only 2xx ones.
        if 200 <= status < 300:
            ext, url = request.extensions, str(request.url)
            repeat, case_id = int(ext.get(EXT_REPEAT) or 0), _case_id(ext.get(EXT_CASE))
            asked = RecordedRequest(
                request.method, url, tuple(request.headers.multi_items()), body, repeat, case_id
            )
            entity = ext.get(EXT_ENTITY) or UNSCOPED_ENTITY
            commit = functools.partial(self.store.record, self.test_id, entity, asked, recorded)
            sink = ext.get(EXT_RECORD)
            # The caller records it once it knows the reply is final (not retried).
            sink.append(commit) if isinstance(sink, list) else commit()
        # The caller gets what replay will give it: decoded body, no content-encoding.
        return response_of(recorded)

    async def aclose(self) -> None:
        if self._inner is not None:
            inner, self._inner = self._inner, None
            await inner.aclose()


def decoded_reply(
    status: int, headers: Iterable[tuple[str, str]], content: bytes, reason: str
) -> RecordedResponse:
    """A live reply read whole and decoded (as cassettes keep it), its length in the headers."""
    kept = [(n, v) for n, v in headers if n.lower() not in _DECODED_DROP]
    return RecordedResponse(status, (*kept, ("content-length", str(len(content)))), content, reason)


def capped_body(content: bytes, limit: int | None) -> bytes:
    """A JSON body with its over-long strings (the reply text) cut with a note: no cassette
    holds a runaway reply whole. Small and non-JSON bodies (streams, error pages) stay."""
    if limit is None or len(content) <= limit:
        return content
    try:
        data = json.loads(content)
    except ValueError:
        return content
    cut, n = replycap.cut_json(data, limit)
    return json.dumps(cut, ensure_ascii=False).encode("utf-8") if n else content


def _case_id(case: object) -> str | None:
    case_id = case if isinstance(case, str) else getattr(case, "id", None)
    return case_id if isinstance(case_id, str) else None


def response_of(recorded: RecordedResponse, lib: Any = httpx) -> httpx.Response:
    """The recording as a live call's response (unread stream) of ``lib`` (httpx, httpx2)."""
    reason = recorded.reason.encode("ascii", "replace")
    return lib.Response(  # type: ignore[no-any-return]
        recorded.status,
        headers=list(recorded.headers),
        stream=lib.ByteStream(recorded.body),  # not content=: read like a live reply
        extensions={"reason_phrase": reason} if reason else {},
    )
