"""An httpx transport that replays from, and records into, a :class:`CassetteStore`.
A miss is sent through ``inner`` when the record mode allows, else raises CassetteMiss; a
request whose ``extensions[EXT_RECORD]`` is a list gets its recording appended there, kept
by the runner only once the reply is final.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol

import httpx

from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.cassettes.vcrfile import RecordedRequest, RecordedResponse, Reply
from pytest_recfair.providers import base as replycap

# The request extensions the runner (and the plan's probe) set and this transport reads:
# one name each, so the two sides cannot drift apart.
#: The seed entity: picks the cassette file.
EXT_ENTITY: Final = "recfair_entity_id"
#: The repeat index: tells identical entropy repeats apart.
EXT_REPEAT: Final = "recfair_repeat"
#: The prompt case itself (its id picks among identical requests; its prompt words a miss).
EXT_CASE: Final = "recfair_case"
#: A list the recording is appended to (as a callable) instead of being recorded at once.
EXT_RECORD: Final = "recfair_record"

#: Cassette name for requests that carry no :data:`EXT_ENTITY` extension.
UNSCOPED_ENTITY = "_unscoped"


class CaseRef(Protocol):
    """What a replay by parts reads of a prompt case."""

    @property
    def id(self) -> str: ...
    @property
    def entity_id(self) -> str: ...
    @property
    def repeat(self) -> int: ...


def case_extensions(case: CaseRef) -> dict[str, Any]:
    """The extensions that tie a request to ``case`` (entity, repeat, the case)."""
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
        self.store = store
        self.test_id = test_id
        self.max_reply_chars = max_reply_chars
        self._inner = inner

    def _network(self) -> httpx.AsyncBaseTransport:
        if self._inner is None:
            # Created only on the first recorded miss: replay-only runs never open sockets.
            self._inner = httpx.AsyncHTTPTransport()
        return self._inner

    def replay(self, request: httpx.Request) -> httpx.Response | None:
        """The recorded reply (unread stream), or None when a live call is to be recorded;
        ``CassetteMiss`` when the record mode keeps this entity off the network."""
        try:
            body = request.content
        except httpx.RequestNotRead:
            body = request.read()
        ext = request.extensions
        repeat = int(ext.get(EXT_REPEAT) or 0)
        case = ext.get(EXT_CASE)
        hit = self.find(
            request.method,
            str(request.url),
            body,
            ext.get(EXT_ENTITY),
            repeat,
            _case_id(case),
            case,
        )
        if hit is None:
            return None
        status, reason, headers, text = hit
        return response_of(RecordedResponse(status, headers, text.encode("utf-8"), reason))

    def live_only(self, entity_id: str | None) -> bool:
        """True when every request for this entity goes to the network: nothing recorded
        can answer it and the record mode allows recording (so ``replay`` would give None)."""
        entity = entity_id or UNSCOPED_ENTITY
        store = self.store
        return not store.can_replay(self.test_id, entity) and store.needs_network(
            self.test_id, entity
        )

    def find(
        self,
        method: str,
        url: str,
        body: bytes | str,
        entity_id: str | None,
        repeat: int,
        case_id: str | None,
        case: object,
    ) -> Reply | None:
        """The recorded reply to a request (as the index holds it), None to record it
        live; ``CassetteMiss`` when the record mode keeps this entity off the network."""
        entity = entity_id or UNSCOPED_ENTITY
        store = self.store
        hit = store.reply(self.test_id, entity, method, url, body, repeat, case_id)
        if hit is None and not store.needs_network(self.test_id, entity):
            raise store.miss(self.test_id, entity, method, url, body, repeat, case=case)
        return hit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            body = request.content  # already in memory for every non-streaming request
        except httpx.RequestNotRead:
            body = await request.aread()
        replayed = self.replay(request)
        if replayed is not None:
            return replayed
        ext = request.extensions
        entity = ext.get(EXT_ENTITY) or UNSCOPED_ENTITY
        repeat = int(ext.get(EXT_REPEAT) or 0)
        live = await self._network().handle_async_request(request)
        try:
            # aread() undoes content-encoding, so the cassette holds readable text.
            content = await live.aread()
        finally:
            await live.aclose()
        recorded = decoded_reply(
            live.status_code,
            live.headers.multi_items(),
            capped_body(content, self.max_reply_chars),
            live.reason_phrase,
        )
        # Error replies are not model output: the store keeps only 2xx ones.
        if 200 <= live.status_code < 300:
            interaction = RecordedRequest(
                method=request.method,
                url=str(request.url),
                headers=tuple(request.headers.multi_items()),
                body=body,
                repeat=repeat,
                case_id=_case_id(ext.get(EXT_CASE)),
            )

            def commit() -> None:
                self.store.record(self.test_id, entity, interaction, recorded)

            sink = ext.get(EXT_RECORD)
            if isinstance(sink, list):
                # The caller records it once it knows the reply is final (not retried).
                deferred: list[Callable[[], None]] = sink
                deferred.append(commit)
            else:
                commit()
        # The caller gets what replay will give it: decoded body, no content-encoding.
        return response_of(recorded)

    async def aclose(self) -> None:
        if self._inner is not None:
            inner, self._inner = self._inner, None
            await inner.aclose()


def decoded_reply(
    status: int, headers: Iterable[tuple[str, str]], content: bytes, reason: str
) -> RecordedResponse:
    """A live reply read whole and decoded, as the cassette keeps it and the caller gets
    it: the headers that described the encoded body replaced by its length."""
    kept = [(n, v) for n, v in headers if n.lower() not in _DECODED_DROP]
    return RecordedResponse(status, (*kept, ("content-length", str(len(content)))), content, reason)


def capped_body(content: bytes, limit: int | None) -> bytes:
    """A JSON body whose over-long strings (the reply text) are cut with a note, so the
    cassette never holds a runaway reply whole. Bodies this small, and bodies that are not
    JSON (event streams, error pages), are kept as they are."""
    if limit is None or len(content) <= limit:
        return content
    try:
        data = json.loads(content)
    except ValueError:
        return content
    cut, n = replycap.cut_json(data, limit)
    return json.dumps(cut, ensure_ascii=False).encode("utf-8") if n else content


def _case_id(case: object) -> str | None:
    if case is None:
        return None
    if isinstance(case, str):
        return case
    case_id = getattr(case, "id", None)
    return case_id if isinstance(case_id, str) else None


def response_of(recorded: RecordedResponse, lib: Any = httpx) -> httpx.Response:
    """The recording as the response a live call gives (unread stream), of httpx or of
    another generation with its API (``lib``: httpx2 for a pipeline's client)."""
    response: httpx.Response = lib.Response(
        recorded.status,
        headers=list(recorded.headers),
        # A stream, not content=: the client reads it like a live reply.
        stream=lib.ByteStream(recorded.body),
        extensions={"reason_phrase": recorded.reason.encode("ascii", "replace")}
        if recorded.reason
        else {},
    )
    return response
