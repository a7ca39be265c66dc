"""A content-keyed cache of loaded cassette indexes (replay only), like mypy's cache.

Loading a cassette is the same work on every run of unchanged files: decode the JSON
(and gunzip a ``.json.gz``), walk every interaction, build the replay index. The result,
the :class:`~.index.Tape`'s flat tuples, is stored with ``marshal`` under
``<cassette dir>/.recfair_cache/tapes/<digest>.marshal``, where the digest covers the
file's bytes as stored, its format, the source of the modules that build the index and
the Python version. So an entry is never stale (any change gives another name), a
missing or unreadable entry is rebuilt, a corrupt one is ignored, and the whole folder is
safe to delete. It holds a ``.gitignore`` of ``*``, so git never sees it. Entries are
written temp-then-rename: concurrent xdist workers writing the same entry write the same
bytes, and the last rename wins. A read-only checkout simply runs without the cache.
``RECFAIR_CACHE=off`` in the environment switches this cache and the replies' memo off
(the benchmarks' "no cache" reference).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import marshal
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

from pytest_recfair.cassettes import compact
from pytest_recfair.cassettes.index import Tape, index_tape, note_stale
from pytest_recfair.replies import memo

__all__ = ["CACHE_DIR", "entry_path", "load"]

#: The cache folder inside the cassette folder (hidden: not a test's legacy folder).
CACHE_DIR: Final = ".recfair_cache"
_FORMAT: Final = b"recfair-tape-1"


@functools.cache
def _code_version() -> bytes:
    """What the cached index depends on besides the file: the code that builds it."""
    h = hashlib.blake2b(_FORMAT + sys.version.encode() + str(marshal.version).encode())
    here = Path(__file__).resolve().parent
    for name in ("compact.py", "index.py", "vcrfile.py", "tapecache.py"):
        with contextlib.suppress(OSError):
            h.update((here / name).read_bytes())
    return h.digest()


def entry_path(path: Path, data: bytes) -> Path:
    """The cache entry of cassette ``path`` holding ``data``."""
    h = hashlib.blake2b(_code_version(), digest_size=20)
    h.update(b"gz" if compact.is_compact(path) else b"json")
    h.update(data)
    return path.parent / CACHE_DIR / "tapes" / f"{h.hexdigest()}.marshal"


def load(tape: Tape, decode: Any) -> bool:
    """Fill ``tape`` (replay only) from its file through the cache; False when the file
    cannot be read (the caller reads it again and reports why). ``decode(path, text)``:
    the interactions of a cassette's text (its errors name the file)."""
    if os.environ.get("RECFAIR_CACHE", "").lower() in ("off", "0", "no", "false"):
        return False
    try:
        data = tape.path.read_bytes()
    except FileNotFoundError:
        return True  # no cassette: nothing recorded for this entity
    except OSError:
        return False
    entry = entry_path(tape.path, data)
    # Replaying from this folder: the replies' parsing and matching are kept beside it.
    memo.use(entry.parent.parent)
    snapshot = _read(entry)
    if snapshot is None:
        try:
            text = compact.decompress(tape.path, data).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return False
        index_tape(tape, decode(tape.path, text), records=False, recording=False)
        _write(entry, (entry.stem, tape.keys, tape.entries, tape.tags, tape.cases, tape.raw))
        return True
    _, tape.keys, tape.entries, tape.tags, tape.cases, tape.raw = snapshot
    tape.stale = len(tape.entries) - sum(len(p) for p in tape.raw.values())
    tape.played = bytearray(len(tape.entries))
    tape.existed = True
    if tape.stale:
        note_stale(tape.path, tape.stale, False)
    return True


def _read(entry: Path) -> tuple[Any, ...] | None:
    try:
        value = marshal.loads(entry.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return None  # missing or corrupt: rebuilt
    # The digest inside the entry: a truncated or foreign file is not taken for it.
    if not (isinstance(value, tuple) and len(value) == 6 and value[0] == entry.stem):
        return None
    if not all(isinstance(v, list) for v in value[1:5]) or not isinstance(value[5], dict):
        return None
    return value


def _write(entry: Path, value: tuple[Any, ...]) -> None:
    """Temp-then-rename, no fsync: an entry lost in a crash is only rebuilt."""
    folder = entry.parent
    try:
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            ignore = folder.parent / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# pytest-recfair's cache: safe to delete\n*\n")
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(marshal.dumps(value))
            os.replace(tmp, entry)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return  # a read-only checkout: run without the cache
