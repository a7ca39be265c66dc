"""Replayed replies' parsed :class:`~.base.Completion` kept across runs, keyed by content.

A replay of unchanged cassettes decodes the same recorded bodies on every run (the
provider's ``parse_reply``: JSON decoding and field extraction, a third of the replay
pass). One memo entry per entity (:mod:`pytest_recfair.replies.memo`, the cassette
folder's ``.recfair_cache/``) holds that entity's replies as parsed, each under the
BLAKE2b digest of the reply's headers and body; the entry's own key is the code version
(the source of the modules that parse, Python's version), the provider class and the
entity. A parsed reply is used only when the digest of the reply now served matches, so
an entry is never stale; a reply whose parse failed is never kept (it is judged as
before). With the memo off (live runs, ``RECFAIR_CACHE=off``) nothing is kept.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from typing import Any, Final

from pytest_recfair.providers.base import Completion, RecordedReply, Usage
from pytest_recfair.replies import memo

__all__ = ["ParsedReplies"]

_FORMAT: Final = b"recfair-parsed-replies-1"
# (text, finish reason, (prompt tokens, completion tokens) or None, model)
Stored = tuple[str, str | None, tuple[int, int] | None, str | None]


@functools.cache
def _code_version() -> bytes:
    return memo.code_version(
        _FORMAT,
        (
            "providers/replycache.py",
            "providers/base.py",
            "providers/http.py",
            "providers/replay.py",
        ),
    )


def _digest(reply: RecordedReply) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    h.update(repr(tuple(reply.headers.items())).encode("utf-8", "surrogatepass"))
    h.update(b"\0")
    h.update(reply.content)
    return h.digest()


def _encode(c: Completion) -> Stored | None:
    """``c`` as marshal-able data, or None when a field is not of the declared type."""
    usage = None
    if c.usage is not None:
        u = c.usage
        if type(u) is not Usage or type(u.prompt_tokens) is not int:
            return None
        if type(u.completion_tokens) is not int:
            return None
        usage = (u.prompt_tokens, u.completion_tokens)
    if type(c) is not Completion or type(c.text) is not str:
        return None
    if not all(v is None or type(v) is str for v in (c.finish_reason, c.model)):
        return None
    return (c.text, c.finish_reason, usage, c.model)


def _decode(s: Any) -> Completion | None:
    if not (isinstance(s, tuple) and len(s) == 4):
        return None
    text, finish, usage, model = s
    return Completion(text, finish, None if usage is None else Usage(*usage), model)


class ParsedReplies:
    """The parsed replies of one replay pass, by entity; :meth:`flush` keeps new ones."""

    def __init__(self, provider: object) -> None:
        cls = type(provider)
        self._prefix = _code_version() + f"{cls.__module__}.{cls.__qualname__}\0".encode()
        self._bags: dict[str, dict[bytes, Any]] = {}
        self._changed: set[str] = set()
        self.last = b""  # the digest of the reply last served parsed (get or put), or b""

    def _key(self, entity: str) -> bytes:
        h = hashlib.blake2b(self._prefix, digest_size=20)
        h.update(entity.encode("utf-8", "surrogatepass"))
        return h.digest()

    def _bag(self, entity: str) -> dict[bytes, Any]:
        bag = self._bags.get(entity)
        if bag is None:
            stored = memo.lookup(self._key(entity))
            bag = self._bags[entity] = dict(stored) if isinstance(stored, dict) else {}
        return bag

    def get(self, entity: str, reply: RecordedReply) -> tuple[bytes, Completion | None]:
        """(the reply's digest, its parsed Completion when kept before, else None)."""
        if not memo.fine():
            return b"", None
        digest = _digest(reply)
        known = self.known(entity, digest)
        self.last = b"" if known is None else digest
        return digest, known

    def known(self, entity: str, digest: bytes) -> Completion | None:
        """The parsed reply of ``entity`` with ``digest``, when kept."""
        with contextlib.suppress(TypeError, ValueError):
            return _decode(self._bag(entity).get(digest))
        return None

    def put(self, entity: str, digest: bytes, completion: Completion) -> None:
        if not digest or not memo.fine():
            return
        stored = _encode(completion)
        if stored is not None:
            self._bag(entity)[digest] = stored
            self._changed.add(entity)
            self.last = digest

    def flush(self) -> None:
        """Keep the entities' replies parsed in this pass (replacing the older entry)."""
        for entity in self._changed:
            memo.replace(self._key(entity), self._bags[entity])
        self._changed.clear()
        self._bags.clear()
