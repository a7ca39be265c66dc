"""What failed while recording (a hash of what was asked, never its text or a key), kept
beside the cassettes (which hold 2xx replies only) so a replay fails the same prompts: same
``max_failed`` check, same numbers. One ``_failed.<writer>.jsonl`` per xdist worker and
shard; a read merges them, the latest note wins."""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from pytest_recfair.fileio import atomic_write_text
from pytest_recfair.vocab import RECORD_OPTION

#: The sidecar files of one cassette directory.
FILE_GLOB: Final = "_failed.*.jsonl"
_VERSION: Final = 1
#: The kind of a note saying a prompt once failed by another writer is now answered.
ANSWERED: Final = "answered"

_HTTP_STATUS = re.compile(r"\bHTTP (\d{3})\b")


@dataclass(frozen=True, slots=True)
class Failure:
    """One prompt that failed while recording: status (None: no HTTP reply) and kind."""

    entity: str
    status: int | None
    kind: str
    at: str  # ISO date of the recording run

    def message(self) -> str:
        """The error a replay gives this prompt (no body, no key: only status and kind)."""
        status = f"HTTP {self.status}, " if self.status is not None else ""
        return (
            f"failed while recording ({status}{self.kind}, {self.at[:10]}); replayed as "
            f"failed. To ask it again: {RECORD_OPTION}=new_episodes"
        )


def failure_of(error: str, entity: str) -> Failure:
    """The status and kind of a runner's error message (the runner's own wording)."""
    found = _HTTP_STATUS.search(error)
    status = int(found.group(1)) if found else None
    if error.startswith("gave up on case"):
        kind = "retries spent"
    elif status is not None and 400 <= status < 500:
        kind = "rejected"
    elif status is None and "timeout" in error:
        kind = "timeout"
    else:
        kind = "unusable reply"
    return Failure(entity, status, kind, datetime.now(UTC).isoformat(timespec="seconds"))


def request_key(method: str, url: str, body: bytes | str, repeat: int) -> str:
    """A hash of what was asked: method, host (no port, no query: keys travel there),
    path, canonical JSON body, repeat."""
    parts = urlsplit(url)
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        canon = json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    except ValueError:
        canon = text
    raw = f"{method.upper()} {(parts.hostname or '').lower()}{parts.path}\n{canon}\n{repeat}"
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:32]


def scoped(key: str, test_id: str) -> str:
    """The note key of request ``key`` failed by the test ``test_id``."""
    return hashlib.sha256(f"{test_id}\n{key}".encode()).hexdigest()[:32]


# the shard label of each cassette directory in this process (set by the plugin)
_SHARDS: dict[Path, str] = {}
_LOCK = threading.Lock()


def set_shard(root: Path, shard: str | None) -> None:
    """Name this process's sidecar after ``shard`` (e.g. ``"2of4"``) for ``root``."""
    with _LOCK:
        if shard:
            _SHARDS[root] = shard
        else:
            _SHARDS.pop(root, None)


# (cassette directory, writer) -> (the directory's stamp, its log)
_LOGS: dict[tuple[Path, str], tuple[tuple[int, int] | None, FailureLog]] = {}


def log_for(root: Path) -> FailureLog:
    """The failure log of cassette directory ``root`` as this process writes it, kept
    while the directory is unchanged: its files are listed and read once a run, not once
    per replay pass (15 x 1,000 names at paper scale)."""
    with _LOCK:
        worker = os.environ.get("PYTEST_XDIST_WORKER") or "main"
        shard = _SHARDS.get(root)
        key = (root, re.sub(r"[^A-Za-z0-9_.-]", "_", f"{worker}-{shard}" if shard else worker))
        try:  # every sidecar (and cassette) is written by a rename: a new directory mtime
            st = root.stat()
            # trusted once older than a clock tick (a change within one keeps the mtime)
            settled = time.time_ns() - st.st_mtime_ns > 100_000_000
            stamp = (st.st_ino, st.st_mtime_ns) if settled else None
        except OSError:
            stamp = None
        found = _LOGS.get(key)
        if found is None or stamp is None or found[0] != stamp:
            found = _LOGS[key] = (stamp, FailureLog(root, key[1]))
        return found[1]


class FailureLog:
    """The failed prompts of one cassette directory: every writer's file, merged."""

    def __init__(self, root: Path, writer: str = "main") -> None:
        self.root = root
        self.path = root / f"_failed.{writer}.jsonl"
        self._lock = threading.Lock()
        self._merged: dict[str, Failure] | None = None  # every file, read on first use
        self._own: dict[str, Failure] | None = None  # this writer's file

    def find(self, key: str) -> Failure | None:
        """The recorded failure of the request ``key``, if any writer noted one."""
        with self._lock:
            found = self._all().get(key)
            return None if found is None or found.kind == ANSWERED else found

    def count(self) -> int:
        with self._lock:
            return sum(f.kind != ANSWERED for f in self._all().values())

    def update(self, failed: Iterable[tuple[str, Failure]], answered: Iterable[str]) -> None:
        """Note ``failed`` (key, failure) and forget ``answered`` keys; saved at once when
        this writer's file changes (temp-then-rename)."""
        with self._lock:
            if self._own is None:
                self._own = _read(self.path)
            own, before = self._own, dict(self._own)
            others = _merge(p for p in self._paths() if p != self.path)
            now = datetime.now(UTC).isoformat(timespec="seconds")
            for key in answered:
                own.pop(key, None)
                other = others.get(key)
                if other is not None and other.kind != ANSWERED:  # another writer's note
                    own[key] = Failure(other.entity, None, ANSWERED, now)
            for key, failure in failed:
                own[key] = failure
            if own == before or not (own or self.path.exists()):
                return
            self.root.mkdir(parents=True, exist_ok=True)
            lines = [
                json.dumps({"v": _VERSION, "key": key, **asdict(f)}, sort_keys=True) + "\n"
                for key, f in sorted(own.items(), key=lambda kv: (kv[1].entity, kv[0]))
            ]
            atomic_write_text(self.path, "".join(lines))
            self._merged = None  # read again: other writers may have saved meanwhile

    def _all(self) -> dict[str, Failure]:
        if self._merged is None:
            self._merged = _merge(self._paths())
        return self._merged

    def _paths(self) -> list[Path]:
        return sorted(self.root.glob(FILE_GLOB)) if self.root.is_dir() else []


def _merge(paths: Iterable[Path]) -> dict[str, Failure]:
    """The notes of ``paths``: the latest note of a prompt wins."""
    merged: dict[str, Failure] = {}
    for path in paths:
        for key, failure in _read(path).items():
            old = merged.get(key)
            if old is None or failure.at >= old.at:
                merged[key] = failure
    return merged


def _read(path: Path) -> dict[str, Failure]:
    """One sidecar file; a line that does not read is skipped (the prompt is then asked
    or missed like any unrecorded one, never invented)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return {}
    found: dict[str, Failure] = {}
    for line in text.splitlines():
        try:
            obj = json.loads(line)
            status = obj["status"]
            found[str(obj["key"])] = Failure(
                str(obj["entity"]),
                int(status) if status is not None else None,
                str(obj["kind"]),
                str(obj["at"]),
            )
        except (ValueError, KeyError, TypeError):
            continue
    return found
