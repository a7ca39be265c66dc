"""The content store as a later run finds it: an earlier run left an entry, so the
whole audit is looked up at once (``cache.warm()``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

from pytest_recfair.cassettes import cache

#: The namespace of the one entry an "earlier run" left (no real entry's).
EARLIER: Final = b"tests: an earlier run"


def earlier_run(folder: Path) -> None:
    """Leave one entry in the store at ``folder``, as an earlier run would; the
    process's store is left as it was (reopened: what a later run does)."""
    before = cache.folder()
    cache.use(None)
    cache.use(folder)
    cache.put(EARLIER, b"", 0)
    cache.use(None)
    cache.use(before)


def entries(folder: Path) -> int:
    """The store's entries at ``folder``, the earlier run's not counted."""
    earlier = cache._row(EARLIER + b"\0")
    with sqlite3.connect(folder / cache.FILE_NAME) as db:
        (count,) = db.execute("SELECT count(*) FROM store WHERE k != ?", (earlier,)).fetchone()
    return int(count)
