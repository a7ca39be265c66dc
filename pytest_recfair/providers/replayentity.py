"""A replay pass's entities served from a cache: no cassette read, no lookup, no parsing.

An entity's cases replayed from an unchanged cassette give the same replies on every
run. After a pass in which every case of an entity was answered by a parsed reply (no
miss, no error, no retry), one memo entry keeps which recorded positions were played and
the digest of each case's reply (whose parsed Completion
:mod:`~pytest_recfair.providers.replycache` keeps). Its key is the digest of the code
(the modules that look up, parse and judge), the provider class, the test id, the
cassette's content key (:func:`~pytest_recfair.cassettes.tapecache.digest`) and each
case's id, repeat and request key (``replay_key``: every request-building setting is in
it), so a later run with the same inputs is served from it exactly; any change is another
key. The store is told what was played, so a later lookup of the entity behaves as after
a lookup. Only entities the store had not read yet are served this way.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import Any, Final

from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.providers.base import Completion, Provider
from pytest_recfair.providers.replycache import ParsedReplies
from pytest_recfair.providers.runstate import CaseLike
from pytest_recfair.replies import memo

__all__ = ["EntityReplay"]

_FORMAT: Final = b"recfair-entity-replay-1"


@functools.cache
def _code_version() -> bytes:
    return memo.code_version(
        _FORMAT,
        (
            "providers/replayentity.py",
            "providers/replay.py",
            "providers/transport.py",
            "providers/runstate.py",
            "cassettes/store.py",
            "cassettes/index.py",
        ),
    )


class EntityReplay:
    """Serve or remember whole entities of one replay pass."""

    def __init__(
        self, provider: Provider, store: CassetteStore, test_id: str, parsed: ParsedReplies
    ) -> None:
        cls = type(provider)
        self.provider = provider
        self.store = store
        self.parsed = parsed
        self._key_of = getattr(provider, "replay_key", None)
        head = f"{cls.__module__}.{cls.__qualname__}\0{test_id}\0".encode()
        self._prefix = _code_version() + head
        # case id -> request key, of the entity last keyed (reused by its lookups)
        self.requests: dict[str, tuple[str, str, str]] = {}

    def key(self, entity: str, cases: Sequence[CaseLike]) -> tuple[bytes, bytes] | None:
        """(entry key, cassette content key) of ``cases`` (all of ``entity``), or None:
        not served from a cache."""
        self.requests = {}
        if self._key_of is None or not entity or (memo.folder() and not memo.fine()):
            return None
        digest = self.store.unread_digest(entity)  # opens the memo when not open yet
        if digest is None or not memo.fine():
            return None
        h = hashlib.blake2b(self._prefix, digest_size=20)
        h.update(digest)
        for case in cases:
            request = self._key_of(case.system, case.prompt)
            if request is None:
                return None
            self.requests[case.id] = request
            h.update(repr((case.id, case.repeat, request)).encode("utf-8", "surrogatepass"))
        if len(self.requests) != len(cases):  # a case id given twice: looked up as usual
            self.requests = {}
            return None
        return h.digest(), digest

    def served(self, entity: str, key: bytes, count: int) -> list[Completion] | None:
        """The Completions of the entity's ``count`` cases kept under ``key``, the store
        told what they played; None when not kept (the cases are replayed as usual)."""
        value = memo.lookup(key)
        if not (isinstance(value, tuple) and len(value) == 3):
            return None
        positions, last, replies = value
        if not (isinstance(replies, list) and len(replies) == count and isinstance(last, int)):
            return None
        found = [self.parsed.known(entity, r) for r in replies]
        if any(c is None for c in found) or not isinstance(positions, list):
            return None
        self.store.serve(entity, positions, last)
        return [c for c in found if c is not None]

    def remember(self, entity: str, key: tuple[bytes, bytes], replies: list[bytes]) -> None:
        """Keep what this pass served for the entity (``replies``: each case's reply
        digest), when its tape came from the cache with the content key of ``key``."""
        played: Any = self.store.played(entity)
        if played is None or not all(replies) or played[0] != key[1]:
            return
        _, positions, last = played
        memo.store(key[0], (positions, last, replies))
