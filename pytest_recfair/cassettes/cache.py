"""The one content store: results kept across runs by content, beside the cassettes. An
entry holds its namespace, key and value digest, all checked on read: a damaged or misplaced
entry is computed again, never served. SQLite, safe to delete, shared by xdist workers
(locked: nothing written; corrupt or past ``RECFAIR_CACHE_MAX_MB``: started afresh)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import marshal
import os
import sqlite3
import sys
import threading
import zlib
from pathlib import Path
from typing import Any, Final

#: The cache folder inside the cassette folder (hidden: not a test's legacy folder).
CACHE_DIR: Final = ".recfair_cache"
#: The store's file inside :data:`CACHE_DIR`.
FILE_NAME: Final = "store.sqlite3"
_IGNORE: Final = "# pytest-recfair's cache: safe to delete\n*\n"
#: Libraries whose version can change a result: array arithmetic, fuzzy title matching,
#: YAML templates and grids, baseline validation, the reading of a recorded response
#: (httpx, and orjson, which parses cassettes and replies).
_LIBRARIES: Final = ("numpy", "rapidfuzz", "PyYAML", "jsonschema", "httpx", "orjson")
_DIGEST: Final = 20
_MAX_MB_DEFAULT: Final = 2048


def off() -> bool:
    """``RECFAIR_CACHE=off`` (or 0, no, false): nothing is looked up or kept."""
    return os.environ.get("RECFAIR_CACHE", "").lower() in ("off", "0", "no", "false")


@functools.cache
def code_version() -> bytes:
    """What every entry depends on besides its inputs: the package's source and data
    files (by their path inside the package, never where it is installed), Python's
    version and the versions of :data:`_LIBRARIES`."""
    h = hashlib.blake2b(b"recfair-store-1\0" + sys.version.encode())
    for name in _LIBRARIES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            h.update(f"\0{name}={importlib.metadata.version(name)}".encode())
    package = Path(__file__).resolve().parents[1]
    files = []
    for folder, dirs, names in os.walk(package):
        dirs[:] = [d for d in dirs if d != "__pycache__"]  # not listed (rglob: 7 ms a run)
        files += [Path(folder, name) for name in names]
    for path in sorted(files):
        with contextlib.suppress(OSError):
            h.update(b"\0" + path.relative_to(package).as_posix().encode() + b"\0")
            h.update(path.read_bytes())
    return h.digest()


def _row(full: bytes) -> bytes:
    return hashlib.blake2b(full, digest_size=_DIGEST).digest()


#: Values whose marshal bytes exceed this are stored zlib-compressed (a paper-scale
#: audit's entry is megabytes; SQLite copies what it writes).
_COMPRESS_OVER: Final = 1 << 20


def _dumps(full: bytes, value: Any) -> bytes:
    """The entry: its namespace and key, the digest of the payload, the payload."""
    payload = marshal.dumps(value)
    packed = len(payload) > _COMPRESS_OVER
    if packed:
        payload = zlib.compress(payload, 1)
    head = marshal.dumps((full, hashlib.blake2b(payload, digest_size=_DIGEST).digest(), packed))
    return len(head).to_bytes(4, "big") + head + payload


def _loads(full: bytes, blob: bytes) -> Any:
    """The value of entry ``blob`` if it is the entry of ``full`` and undamaged, else
    None (computed again, and the entry replaced)."""
    try:
        end = 4 + int.from_bytes(blob[:4], "big")
        stored, check, packed = marshal.loads(blob[4:end])
        payload = blob[end:]
        if stored != full or check != hashlib.blake2b(payload, digest_size=_DIGEST).digest():
            return None
        return marshal.loads(zlib.decompress(payload) if packed else payload)
    except (ValueError, EOFError, TypeError, zlib.error):
        return None


def _max_bytes() -> int:
    try:
        return max(1, int(os.environ.get("RECFAIR_CACHE_MAX_MB", _MAX_MB_DEFAULT))) << 20
    except ValueError:
        return _MAX_MB_DEFAULT << 20


def _open(path: Path) -> sqlite3.Connection | None:
    """The store at ``path`` (created; a corrupt or outgrown one started afresh), or
    None (locked or unwritable: another run's, left alone)."""
    side = [path.with_name(path.name + s) for s in ("-wal", "-shm")]
    with contextlib.suppress(OSError):
        if sum(f.stat().st_size for f in (path, side[0]) if f.exists()) > _max_bytes():
            for f in (path, *side):
                f.unlink(missing_ok=True)
    for attempt in range(2):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            ignore = path.parent / ".gitignore"
            if not ignore.exists():
                ignore.write_text(_IGNORE)
            db = sqlite3.connect(path, timeout=2.0, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            # A cache: an entry lost in a crash is computed again, a damaged one replaced.
            db.execute("PRAGMA synchronous=OFF")
            db.execute("CREATE TABLE IF NOT EXISTS store (k BLOB PRIMARY KEY, v BLOB NOT NULL)")
            return db
        except sqlite3.OperationalError:
            return None
        except sqlite3.DatabaseError:
            if attempt == 0:  # not a database (corrupt, truncated): start it afresh
                with contextlib.suppress(OSError):
                    path.unlink()
        except OSError:
            return None
    return None


# the process's store: the folder it is kept in (None: closed), whether it held entries
# when opened (a later run, worth looking up) and its connection
_lock = threading.Lock()
_folder: Path | None = None
_warm = False
_db: sqlite3.Connection | None = None


def use(path: Path | None) -> None:
    """Keep entries in folder ``path`` from now on; None: the store is closed."""
    global _folder, _warm, _db
    folder = None if off() else path
    with _lock:
        if folder == _folder:
            return
        if _db is not None:
            with contextlib.suppress(sqlite3.Error):
                _db.close()
        _folder, _db, _warm = folder, None, False
        if folder is not None:
            _db = _open(folder / FILE_NAME)
            if _db is not None:
                with contextlib.suppress(sqlite3.Error):
                    _warm = _db.execute("SELECT 1 FROM store LIMIT 1").fetchone() is not None


def open_for(cassettes: Path, replays_only: bool) -> None:
    """Open the store of cassette folder ``cassettes`` now when the run only replays:
    what is looked up before any cassette is read (a baseline validated before) finds it."""
    if replays_only and cassettes.is_dir():
        use(cassettes / CACHE_DIR)


def folder() -> Path | None:
    return _folder


def warm() -> bool:
    """Whether the store held entries when this process opened it: a first run (a fresh
    clone in CI) has nothing to look up, only results to keep."""
    return _warm


def get(namespace: bytes, key: bytes) -> Any:
    """The value kept under ``namespace`` and ``key``: None when none, the store is
    closed, or the entry does not check out against them."""
    full = namespace + b"\0" + key
    with _lock:
        if _db is None:
            return None
        try:
            row = _db.execute("SELECT v FROM store WHERE k = ?", (_row(full),)).fetchone()
        except sqlite3.Error:
            return None
    return None if row is None else _loads(full, bytes(row[0]))


def put(namespace: bytes, key: bytes, value: Any) -> None:
    """Keep marshal-able ``value`` under ``namespace`` and ``key`` (replacing an older
    entry), written at once; nothing when the store is closed."""
    if _db is None:
        return
    full = namespace + b"\0" + key
    blob = _dumps(full, value)
    with _lock:
        if _db is None:  # closed meanwhile
            return
        # One short transaction (xdist workers share the file); locked by another worker
        # past the timeout: not kept.
        with contextlib.suppress(sqlite3.Error):
            _db.execute("INSERT OR REPLACE INTO store VALUES (?, ?)", (_row(full), blob))
