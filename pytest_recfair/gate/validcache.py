"""Baselines validated before, remembered by content: a replay of unchanged cassettes
against an unchanged baseline skips the schema and matrix checks it passed last run.

The key is a BLAKE2b digest of the baseline's text, the code that validates it (this
module, ``gate/baselines.py``, the baseline schema) and the Python version, kept in the
replies' memo (:mod:`pytest_recfair.replies.memo`, the cassette folder's
``.recfair_cache/``), so an entry is never stale and the cache is safe to delete. Only a
baseline that passed is remembered; with the memo off (live runs, ``RECFAIR_CACHE=off``)
every load validates.

Pure: stdlib only.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Final

from pytest_recfair.replies import memo

__all__ = ["validated"]

_FORMAT: Final = b"recfair-baseline-valid-1"


@functools.cache
def _code_version() -> bytes:
    return memo.code_version(
        _FORMAT, ("gate/validcache.py", "gate/baselines.py", "schemas/baseline.schema.json")
    )


def validated(text: str, validate: Callable[[], None]) -> None:
    """``validate()`` (it raises on a bad baseline) unless baseline ``text`` passed it
    before with this code."""
    if memo.folder() is None:
        validate()
        return
    key = hashlib.blake2b(_code_version(), digest_size=20)
    key.update(text.encode("utf-8", "surrogatepass"))
    digest = key.digest()
    if memo.lookup(digest) is True:
        return
    validate()
    memo.store(digest, True)
