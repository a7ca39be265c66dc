"""The batch journal: one file per batch, named by what it asks, never by the test.

A journal is ``<dir>/<key>.json`` where ``key`` hashes the provider setup and the sorted
custom ids of its lines (the request set's content). It is written, atomically, *before*
the batch is created, and holds every line's cassette address (test, entity, repeat,
case id, request body), so whichever run finds it (a smaller run, another shard, another
test) can take in every answered line, not only the lines it asks itself.

Ownership is a POSIX lock on ``<key>.lock`` held while a process works on the journal:
a journal whose lock is free belongs to an interrupted run and is adopted; one whose lock
is held is another live process's, and its lines are left to it (never submitted
twice). Scanning and planning happen under a lock on the directory, so two processes
starting at once never plan the same lines.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pytest_recfair.errors import ProviderError
from pytest_recfair.fileio import atomic_write_text

__all__ = ["JOURNAL_VERSION", "Journal", "JournalDir", "content_key"]

JOURNAL_VERSION: Final = 2
_STATES: Final = frozenset({"planned", "uploaded", "submitted", "done"})


def content_key(owner: dict[str, str], custom_ids: Iterable[str]) -> str:
    """The key of a request set: same setup and same lines, same key (any order)."""
    digest = hashlib.blake2b(json.dumps(owner, sort_keys=True).encode("utf-8"), digest_size=12)
    for cid in sorted(custom_ids):
        digest.update(b"\0" + cid.encode("utf-8"))
    return "rf" + digest.hexdigest()


@dataclass
class Journal:
    """One batch on disk: ``entry`` holds key, state, kind, ids and every line's address."""

    path: Path
    owner: dict[str, str]
    entry: dict[str, Any]
    fd: int | None = None  # the held lock, None when another process holds it

    @property
    def key(self) -> str:
        return str(self.entry["key"])

    @property
    def ids(self) -> list[str]:
        return list(self.entry["lines"])

    def save(self) -> None:
        doc = {"version": JOURNAL_VERSION, "owner": self.owner, "batches": [self.entry]}
        atomic_write_text(self.path, json.dumps(doc, indent=1) + "\n")

    def finish(self) -> None:
        """Every line is taken in: the journal goes, then its lock."""
        self.entry["state"] = "done"
        self.path.unlink(missing_ok=True)
        self.path.with_suffix(".jsonl").unlink(missing_ok=True)
        self.release(unlink=True)

    def quarantine(self, why: str) -> Path:
        """A batch whose results cannot be read: set aside (never polled again)."""
        self.entry["state"] = "quarantined"
        self.entry["why"] = why
        target = self.path.with_name(self.path.stem + ".quarantined.json")
        self.save()
        os.replace(self.path, target)
        self.release(unlink=True)
        return target

    def release(self, *, unlink: bool = False) -> None:
        if self.fd is None:
            return
        if unlink:
            self.path.with_suffix(".lock").unlink(missing_ok=True)
        os.close(self.fd)
        self.fd = None


@dataclass
class JournalDir:
    """The journals of one cassette directory, for one provider setup (``owner``)."""

    root: Path
    owner: dict[str, str]
    mine: list[Journal] = field(default_factory=list)  # locked by this process
    busy: set[str] = field(default_factory=set)  # custom ids a live process is paying for
    others: int = 0  # journals of another setup (other model, provider, URL): left alone

    @contextlib.contextmanager
    def planning(self) -> Iterator[None]:
        """Exclusive across processes while journals are scanned and planned."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root, os.O_RDONLY)
        try:
            _flock(fd, block=True)
            yield
        finally:
            os.close(fd)

    def scan(self) -> None:
        """Adopt every journal of this setup that no live process holds."""
        for path in sorted(self.root.glob("rf*.json")):
            if path.name.endswith(".quarantined.json"):
                continue
            doc = _read(path)
            if doc is None:
                continue  # finished by another process meanwhile
            owner, entry = doc
            if owner != self.owner:
                self.others += 1
                continue
            fd = _try_lock(path.with_suffix(".lock"))
            if fd is None:
                self.busy.update(entry["lines"])
                continue
            if not path.exists():  # finished between the read and the lock
                os.close(fd)
                continue
            self.mine.append(Journal(path, self.owner, entry, fd))

    def plan(self, kind: str, lines: dict[str, dict[str, Any]]) -> Journal:
        """A new journal for ``lines`` (custom id -> cassette address), saved before any
        call to the service, its lock held."""
        key = content_key(self.owner, lines)
        path = self.root / f"{key}.json"
        fd = _try_lock(path.with_suffix(".lock"))
        if fd is None:  # pragma: no cover - scan() saw it busy; planning holds the dir
            raise ProviderError(f"batch journal {path} is held by another process; re-run.")
        entry = {
            "key": key,
            "kind": kind,
            "state": "planned",
            "planned_at": time.time(),
            "custom_ids": list(lines),
            "lines": lines,
        }
        journal = Journal(path, self.owner, entry, fd)
        journal.save()
        self.mine.append(journal)
        return journal

    def claimed(self) -> set[str]:
        """Batch ids named by any journal here (a look-up must not take another's)."""
        out: set[str] = set()
        for path in self.root.glob("rf*.json"):
            doc = _read(path, strict=False)
            if doc is not None and doc[1].get("batch_id"):
                out.add(str(doc[1]["batch_id"]))
        return out

    def release(self) -> None:
        for journal in self.mine:
            journal.release()


def _read(path: Path, *, strict: bool = True) -> tuple[dict[str, str], dict[str, Any]] | None:
    """(owner, entry) of a journal; None when it is gone; a malformed one is one clear
    error naming the file (``strict``) or skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        if not strict:
            return None
        raise ProviderError(f"batch journal {path} cannot be read ({exc}).") from None
    why = _malformed(text)
    if why is None:
        doc = json.loads(text)
        return doc["owner"], doc["batches"][0]
    if not strict:
        return None
    raise ProviderError(
        f"batch journal {path} is malformed ({why}); expected a version-{JOURNAL_VERSION} "
        "journal written by pytest-recfair. Move it away to submit its lines again (a "
        "batch it names that already ran is then paid twice)."
    )


def _malformed(text: str) -> str | None:
    """Why a journal's text is not a journal, or None."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        return f"not JSON: {exc}"
    if not isinstance(doc, dict):
        return f"top level is {type(doc).__name__}, not an object"
    if doc.get("version") != JOURNAL_VERSION:
        return f"version {doc.get('version')!r}"
    batches = doc.get("batches")
    if not isinstance(doc.get("owner"), dict) or not isinstance(batches, list) or not batches:
        return "no owner object or no batches list"
    entry = batches[0]
    if not isinstance(entry, dict):
        return "batch entry is not an object"
    lines = entry.get("lines")
    if not isinstance(lines, dict) or not all(isinstance(v, dict) for v in lines.values()):
        return "'lines' is not an object of line objects"
    if entry.get("state") not in _STATES or not isinstance(entry.get("key"), str):
        return f"state {entry.get('state')!r} or key {entry.get('key')!r} unknown"
    for name in ("batch_id", "file_id"):
        if name in entry and not isinstance(entry[name], str):
            return f"{name} is {type(entry[name]).__name__}, not a string"
    return None


def _flock(fd: int, *, block: bool) -> bool:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no cross-process exclusion
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def _try_lock(path: Path) -> int | None:
    """The held lock on ``path`` (created if missing), or None when a process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    if _flock(fd, block=False):
        return fd
    os.close(fd)
    return None
