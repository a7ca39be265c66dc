"""Results of reply parsing and title matching kept across runs, keyed by content.

Replaying unchanged cassettes parses the same reply texts and canonicalises the same
lists on every run. :func:`parse.reply <pytest_recfair.replies.parse.reply>` and
:func:`matching.canonicalize <pytest_recfair.replies.matching.canonicalize>` look their
result up here first. The key is a BLAKE2b digest of the input (the reply text, the
lists), the settings (k, parse style, threshold, fuzzy, aliases, entity) and the code
version (the source of the parsing and matching modules, the Python and rapidfuzz
versions), so an entry is never stale, like mypy's cache: changed code or settings give
another key.

The memo is off until :func:`use` names a folder (the cassette store does, on replay:
``<cassette dir>/.recfair_cache/``). It is one SQLite file there, safe to delete:
concurrent xdist workers share it through SQLite's own locking, a locked or unwritable
file only skips writing, and a corrupt one is replaced (or, when it cannot be, the memo
is off for the process). Writes are committed in batches and at exit.

Pure: stdlib only (no pytest, no httpx).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import marshal
import os
import sqlite3
import sys
import threading
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

__all__ = [
    "FILE_NAME",
    "cached",
    "code_version",
    "fine",
    "folder",
    "lookup",
    "replace",
    "store",
    "use",
]

#: The memo's file inside the folder given to :func:`use`.
FILE_NAME: Final = "replies.sqlite3"
_FORMAT: Final = b"recfair-replies-memo-1"
_BATCH: Final = 1024  # inserts per commit
_BATCH_BYTES: Final = 4 << 20  # or this much pending data (the replay indexes are large)
T = TypeVar("T")


def code_version(tag: bytes, files: Sequence[str], extra: bytes = b"") -> bytes:
    """What a cached entry depends on besides its content: ``tag`` (the entry format),
    the Python version, ``extra``, and the source of ``files`` (relative to the package),
    so an entry made by other code is never read. Every cache of the replay uses it."""
    h = hashlib.blake2b(tag + sys.version.encode() + extra)
    package = Path(__file__).resolve().parents[1]
    for name in files:
        with contextlib.suppress(OSError):
            h.update((package / name).read_bytes())
    return h.digest()


@functools.cache
def _code_version() -> bytes:
    import rapidfuzz

    files = ("replies/memo.py", "replies/parse.py", "replies/titles.py", "replies/matching.py")
    return code_version(_FORMAT, files, rapidfuzz.__version__.encode())


class _Memo:
    def __init__(self) -> None:
        self.folder: Path | None = None
        self._db: sqlite3.Connection | None = None
        # key -> (value, replace an existing row): read back before they are committed
        self._pending: dict[bytes, tuple[bytes, bool]] = {}
        self._pending_bytes = 0
        # Empty when opened (a first run): nothing to look up, only results to store
        # (what this process stores is found by the next run, which opens it again).
        self._empty = False
        self._lock = threading.Lock()

    def use(self, folder: Path | None) -> None:
        with self._lock:
            if folder == self.folder:
                return
            self._close()
            self.folder = folder
            if folder is not None:
                _trim(folder / FILE_NAME)
                self._db = _open(folder / FILE_NAME)
                self._empty = self._db is not None and _is_empty(self._db)

    def get(self, key: bytes) -> Any:
        with self._lock:
            if self._db is None:
                return None
            waiting = self._pending.get(key)
            if waiting is not None:
                return _loads(waiting[0])
            if self._empty:
                return None
            try:
                row = self._db.execute("SELECT v FROM memo WHERE k = ?", (key,)).fetchone()
                return None if row is None else _loads(row[0])
            except (sqlite3.Error, ValueError, EOFError, TypeError, zlib.error):
                return None  # a corrupt entry: computed again

    def put(self, key: bytes, value: Any, replace: bool = False) -> None:
        with self._lock:
            if self._db is None:
                return
            blob = _dumps(value)
            self._pending[key] = (blob, replace)
            self._pending_bytes += len(blob)
            if len(self._pending) >= _BATCH or self._pending_bytes >= _BATCH_BYTES:
                self._commit()

    def _commit(self) -> None:
        """The pending entries in one transaction (short: xdist workers share the file)."""
        if self._db is None or not self._pending:
            return
        try:
            # IMMEDIATE: the write lock first (waiting up to the timeout for another
            # worker's commit); a deferred transaction that read first fails at once.
            self._db.execute("BEGIN IMMEDIATE")
            for verb, again in (("IGNORE", False), ("REPLACE", True)):
                rows = [(k, v) for k, (v, r) in self._pending.items() if r is again]
                if rows:
                    sql = f"INSERT OR {verb} INTO memo (k, v) VALUES (?, ?)"
                    self._db.executemany(sql, rows)
            self._db.execute("COMMIT")
        except sqlite3.Error:  # locked by another worker past the timeout: dropped
            self._rollback()
        self._pending = {}
        self._pending_bytes = 0

    def _rollback(self) -> None:
        if self._db is not None and self._db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")

    def _close(self) -> None:
        if self._db is not None:
            self._commit()
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    def close(self) -> None:
        with self._lock:
            self._close()


#: A value whose marshal bytes exceed this is stored zlib-compressed: a whole audit's
#: entry at 10,000 entities is ~30 MB raw, and SQLite copies what it writes.
_COMPRESS_OVER: Final = 1 << 20
#: Compressed values start with a byte no marshal stream starts with.
_ZLIB: Final = b"\x00"


def _dumps(value: Any) -> bytes:
    blob = marshal.dumps(value)
    if len(blob) <= _COMPRESS_OVER:
        return blob
    return _ZLIB + zlib.compress(blob, 1)


def _loads(blob: bytes) -> Any:
    if blob[:1] == _ZLIB:
        return marshal.loads(zlib.decompress(blob[1:]))
    return marshal.loads(blob)


#: Past this size (``RECFAIR_CACHE_MAX_MB``, in MB) the memo is started afresh when a run
#: opens it: entries of old cassettes and settings are never read again, and a cache
#: may always be deleted, so the oldest entries go with the rest.
_MAX_MB_DEFAULT: Final = 2048


def _max_bytes() -> int:
    try:
        return max(1, int(os.environ.get("RECFAIR_CACHE_MAX_MB", _MAX_MB_DEFAULT))) << 20
    except ValueError:
        return _MAX_MB_DEFAULT << 20


def _trim(path: Path) -> None:
    """Delete the memo at ``path`` (with SQLite's side files) when it outgrew its limit."""
    files = [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]
    size = 0
    for f in files[:2]:
        with contextlib.suppress(OSError):
            size += f.stat().st_size
    if size > _max_bytes():
        for f in files:
            with contextlib.suppress(OSError):
                f.unlink()


def _open(path: Path) -> sqlite3.Connection | None:
    """The memo database at ``path`` (created; a corrupt one replaced), or None."""
    for attempt in range(2):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(path, timeout=2.0, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            # A cache: an entry lost in a crash is computed again, a damaged file replaced.
            db.execute("PRAGMA synchronous=OFF")
            db.execute("CREATE TABLE IF NOT EXISTS memo (k BLOB PRIMARY KEY, v BLOB NOT NULL)")
            return db
        except sqlite3.OperationalError:  # locked, unwritable: another run's, left alone
            return None
        except sqlite3.DatabaseError:
            if attempt == 0:  # not a database (corrupt, truncated): start it afresh
                with contextlib.suppress(OSError):
                    path.unlink()
        except OSError:
            return None
    return None


def _is_empty(db: sqlite3.Connection) -> bool:
    try:
        return db.execute("SELECT 1 FROM memo LIMIT 1").fetchone() is None
    except sqlite3.Error:
        return False


_MEMO = _Memo()
atexit.register(_MEMO.close)


def use(path: Path | None) -> None:
    """Keep results in ``path`` (a folder) from now on; None: the memo is off."""
    _MEMO.use(path)


def folder() -> Path | None:
    """The folder the memo is kept in, or None when it is off."""
    return _MEMO.folder


def fine() -> bool:
    """Whether the fine-grained replay entries (parsed replies and lists, cassette
    indexes, whole entities) are looked up and kept: the memo is on and held entries
    when this process opened it. A first run (an empty memo: a fresh clone in CI) keeps
    only the whole audit (:mod:`pytest_recfair.engine.replaymemo`), the drift tests and
    the validated baselines: every later run of the same inputs is served from those,
    and a first run costs about what a run without the cache costs (docs/performance.md).
    """
    return _MEMO.folder is not None and not _MEMO._empty


def lookup(key: bytes) -> Any:
    """The value stored under ``key`` (None: none, or the memo is off)."""
    return _MEMO.get(key)


def store(key: bytes, value: Any, *, now: bool = False) -> None:
    """Keep marshal-able ``value`` under ``key`` (nothing when the memo is off);
    ``now``: committed at once (a large entry's bytes are not held until the batch: a
    first paper-scale replay peaked at 146.6 MB with the whole audit's entries pending,
    144 MB with them committed)."""
    _MEMO.put(key, value)
    if now:
        with _MEMO._lock:
            _MEMO._commit()


def replace(key: bytes, value: Any) -> None:
    """Keep marshal-able ``value`` under ``key`` in place of any value stored before
    (an entry that grows: one entity's parsed replies)."""
    _MEMO.put(key, value, replace=True)


def cached(
    namespace: bytes,
    content: Callable[[], bytes],
    compute: Callable[[], T],
    encode: Callable[[T], Any],
    decode: Callable[[Any], T],
) -> T:
    """``compute()``, or its result stored under the digest of ``namespace``, the code
    version and ``content()``. ``encode``/``decode`` turn the result into marshal-able
    data and back; a stored value ``decode`` rejects (raises) is computed again."""
    if not fine():
        return compute()
    key = hashlib.blake2b(_code_version() + namespace + content(), digest_size=20).digest()
    stored = _MEMO.get(key)
    if stored is not None:
        try:
            return decode(stored)
        except (TypeError, ValueError, IndexError, KeyError):
            pass
    result = compute()
    _MEMO.put(key, encode(result))
    return result
