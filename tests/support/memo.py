"""The replay memo as a later run finds it: fine-grained entries (cassette indexes,
parsed replies and lists, whole entities) are kept only in a memo an earlier run wrote
to (``memo.fine()``); a first run keeps the whole audit only."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from pytest_recfair.replies import memo

#: The one entry an "earlier run" left (not a 20-byte digest: no real key equals it).
EARLIER: Final = b"tests: an earlier run's entry"


def earlier_run(folder: Path) -> None:
    """Leave one entry in the memo at ``folder``, as an earlier run would; the process's
    memo is left as it was (reopened: what a later run does)."""
    before = memo.folder()
    memo.use(None)
    memo.use(folder)
    memo.store(EARLIER, 0)
    memo.use(None)
    memo.use(before)


def entries(folder: Path) -> int:
    """The memo's entries at ``folder`` (pending ones committed), the earlier run's not
    counted."""
    import sqlite3

    memo._MEMO._commit()
    with sqlite3.connect(folder / memo.FILE_NAME) as db:
        row = db.execute("SELECT count(*) FROM memo WHERE k != ?", (EARLIER,)).fetchone()
        return int(row[0])
