"""A content-keyed cache of loaded cassette indexes (replay only), like mypy's cache.

Loading a cassette is the same work on every run of unchanged files: decode the JSON
(and gunzip a ``.json.gz``), walk every interaction, build the replay index. The result,
the :class:`~.index.Tape`'s flat tuples, is kept in the replies' memo file
(:mod:`pytest_recfair.replies.memo`, ``<cassette dir>/.recfair_cache/``) under the
BLAKE2b digest of the file's bytes as stored, its format, the source of the modules that
build the index and the Python version. So an entry is never stale (any change gives
another key), a missing or unreadable entry is rebuilt, and the whole folder is safe to
delete. One SQLite file rather than a file per cassette: creating a thousand small files
cost more than the decoding it saves. The folder holds a ``.gitignore`` of ``*``.
``RECFAIR_CACHE=off`` in the environment switches this cache and the replies' memo off
(the benchmarks' "no cache" reference).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
from pathlib import Path
from typing import Any, Final

from pytest_recfair.cassettes import compact
from pytest_recfair.cassettes.index import Tape, index_tape, note_stale
from pytest_recfair.cassettes.miss import MODE_POLICIES
from pytest_recfair.replies import memo

__all__ = ["CACHE_DIR", "digest", "entry_key", "file_key", "load", "open_for", "use_for"]

#: The cache folder inside the cassette folder (hidden: not a test's legacy folder).
CACHE_DIR: Final = ".recfair_cache"
_FORMAT: Final = b"recfair-tape-2"
_IGNORE: Final = "# pytest-recfair's cache: safe to delete\n*\n"


@functools.cache
def _code_version() -> bytes:
    return memo.code_version(
        _FORMAT,
        (
            "cassettes/compact.py",
            "cassettes/index.py",
            "cassettes/vcrfile.py",
            "cassettes/tapecache.py",
        ),
    )


def entry_key(path: Path, data: bytes) -> bytes:
    """The cache key of cassette ``path`` holding ``data``."""
    h = hashlib.blake2b(_code_version(), digest_size=20)
    h.update(b"tape\0gz\0" if compact.is_compact(path) else b"tape\0json\0")
    h.update(data)
    return h.digest()


def off() -> bool:
    return os.environ.get("RECFAIR_CACHE", "").lower() in ("off", "0", "no", "false")


def load(tape: Tape, decode: Any) -> bool:
    """Fill ``tape`` (replay only) from its file through the cache; False when the file
    cannot be read or the cache is off (the caller reads the file and reports why).
    ``decode(path, text)``: the interactions of a cassette's text (errors name the file)."""
    folder = tape.path.parent / CACHE_DIR
    if off() or (memo.folder() == folder and not memo.fine()):
        return False  # off, or a first run: the file is read as without the cache
    try:
        data = tape.path.read_bytes()
    except FileNotFoundError:
        return True  # no cassette: nothing recorded for this entity
    except OSError:
        return False
    _use(folder)
    if not memo.fine():
        return False
    key = tape.digest = entry_key(tape.path, data)
    snapshot = _valid(memo.lookup(key))
    if snapshot is None:
        try:
            text = compact.decompress(tape.path, data).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return False
        index_tape(tape, decode(tape.path, text), records=False, recording=False)
        memo.store(key, (tape.keys, tape.entries, tape.tags, tape.cases, tape.raw))
        return True
    tape.keys, tape.entries, tape.tags, tape.cases, tape.raw = snapshot
    tape.stale = len(tape.entries) - sum(len(p) for p in tape.raw.values())
    tape.played = bytearray(len(tape.entries))
    tape.existed = True
    if tape.stale:
        note_stale(tape.path, tape.stale, False)
    return True


def digest(path: Path) -> bytes | None:
    """The cache key ``load`` would use for cassette ``path`` now (the memo opened in its
    folder), or None: no readable file, or the cache is off."""
    if off():
        return None
    use_for(path)
    return file_key(path)


def use_for(path: Path) -> None:
    """Open the memo in the cache folder beside cassette ``path`` (where its keys are
    looked up)."""
    _use(path.parent / CACHE_DIR)


def file_key(path: Path) -> bytes | None:
    """The cache key of the cassette file at ``path`` (None: not readable). Reads and
    hashes only (both release the GIL): safe in another thread."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return entry_key(path, data)


def open_for(cassettes: Path, mode: str) -> None:
    """Open the cache of cassette folder ``cassettes`` now, when ``mode`` only replays:
    what is looked up before any cassette is read (a baseline validated before) finds it.
    """
    policy = {str(k): v for k, v in MODE_POLICIES.items()}.get(mode)
    if policy is None or policy.records or not policy.replays or off():
        return
    if cassettes.is_dir():
        _use(cassettes / CACHE_DIR)


def _use(folder: Path) -> None:
    """Replay from this cassette folder: the memo (indexes, parsed replies) lives here."""
    if memo.folder() == folder:
        return
    memo.use(folder)
    ignore = folder / ".gitignore"
    with contextlib.suppress(OSError):
        if folder.is_dir() and not ignore.exists():
            ignore.write_text(_IGNORE)


def _valid(value: Any) -> tuple[Any, ...] | None:
    if not (isinstance(value, tuple) and len(value) == 5):
        return None  # none stored, or not what this code stores: rebuilt
    if not all(isinstance(v, list) for v in value[:4]) or not isinstance(value[4], dict):
        return None
    return value
