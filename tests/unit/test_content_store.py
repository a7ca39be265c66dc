"""The one content store (cassettes/cache.py, issue 31): entries checked against their
namespace and key on read, a size limit, RECFAIR_CACHE=off, opened before the baseline
only for a replay, a baseline validated before not validated again, and two processes
writing at once."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_recfair.cassettes import cache
from pytest_recfair.errors import DataError
from pytest_recfair.gate import baselines
from tests.support.store import earlier_run, entries


@pytest.fixture
def own_store() -> Iterator[None]:
    """Each test opens its own store, and leaves the process's as it was."""
    before = cache.folder()
    cache.use(None)
    yield
    cache.use(before)


def reopen(folder: Path) -> None:
    """What a later run does: the file opened afresh."""
    cache.use(None)
    cache.use(folder)


def test_entries_round_trip_under_their_namespace_and_key(store_dir: Path) -> None:
    value = {"a": [1, 2.5, None], "b": (b"x" * (2 << 20),)}  # large: stored compressed
    cache.put(b"ns", b"k1", value)
    cache.put(b"ns", b"k2", [2])
    cache.put(b"ns", b"k2", [3])  # replaces
    reopen(store_dir)
    assert cache.warm()
    assert cache.get(b"ns", b"k1") == value
    assert cache.get(b"ns", b"k2") == [3]
    assert cache.get(b"other", b"k1") is None  # another namespace, another entry
    assert entries(store_dir) == 2


def test_swapped_or_damaged_entries_are_not_served(store_dir: Path) -> None:
    cache.put(b"ns", b"one", "value of one")
    cache.put(b"ns", b"two", "value of two")
    path = store_dir / cache.FILE_NAME
    with sqlite3.connect(path) as db:
        k1, k2 = cache._row(b"ns\0one"), cache._row(b"ns\0two")
        (v1,), (v2,) = (
            db.execute("SELECT v FROM store WHERE k = ?", (k,)).fetchone() for k in (k1, k2)
        )
        db.execute("UPDATE store SET v = ? WHERE k = ?", (v2, k1))
        db.execute("UPDATE store SET v = ? WHERE k = ?", (v1, k2))
    reopen(store_dir)
    assert cache.get(b"ns", b"one") is None
    assert cache.get(b"ns", b"two") is None
    cache.put(b"ns", b"one", "value of one")
    with sqlite3.connect(path) as db:  # one byte of the value changed
        db.execute("UPDATE store SET v = substr(v, 1, length(v) - 1) || x'58' WHERE k = ?", (k1,))
    assert cache.get(b"ns", b"one") is None
    with sqlite3.connect(path) as db:
        db.execute("UPDATE store SET v = ? WHERE k = ?", (b"\xff\x00 garbage", k1))
    assert cache.get(b"ns", b"one") is None


@pytest.mark.usefixtures("own_store")
def test_a_store_past_its_size_limit_starts_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RECFAIR_CACHE_MAX_MB bounds the store: a run that opens a larger file deletes it
    (with its WAL) and starts an empty one; a smaller file is kept."""
    folder = tmp_path / "store"
    monkeypatch.setenv("RECFAIR_CACHE_MAX_MB", "1")
    cache.use(folder)
    assert not cache.warm()  # a first run
    cache.put(b"ns", b"a", os.urandom(300_000))  # incompressible: ~0.3 MB
    reopen(folder)  # under the limit: kept, read by this later run
    assert cache.warm()
    assert isinstance(cache.get(b"ns", b"a"), bytes)
    cache.put(b"ns", b"b", os.urandom(900_000))
    cache.use(None)
    assert (folder / cache.FILE_NAME).stat().st_size > 1 << 20
    cache.use(folder)  # past the limit: started afresh
    assert not cache.warm()
    assert cache.get(b"ns", b"a") is None
    assert (folder / cache.FILE_NAME).stat().st_size < 1 << 20


@pytest.mark.usefixtures("own_store")
def test_a_corrupt_file_is_replaced(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / cache.FILE_NAME).write_bytes(b"this is not a database" * 100)
    cache.use(folder)
    assert not cache.warm()
    cache.put(b"ns", b"k", 1)
    reopen(folder)
    assert cache.get(b"ns", b"k") == 1
    assert (folder / ".gitignore").read_text().endswith("*\n")


@pytest.mark.usefixtures("own_store")
def test_the_store_is_opened_before_the_baseline_only_for_a_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache.open_for(tmp_path / "missing", True)  # no cassette folder: none made
    assert cache.folder() is None
    assert not (tmp_path / "missing").exists()
    cache.open_for(tmp_path, False)  # a recording mode
    assert cache.folder() is None
    monkeypatch.setenv("RECFAIR_CACHE", "off")
    cache.open_for(tmp_path, True)
    assert cache.folder() is None
    monkeypatch.delenv("RECFAIR_CACHE")
    cache.open_for(tmp_path, True)
    assert cache.folder() == tmp_path / cache.CACHE_DIR


def test_a_baseline_validated_before_is_not_validated_again(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def validate(doc: object, path: Path, test_id: str | None) -> None:
        calls.append(repr(doc))
        if doc == []:
            raise DataError("bad")

    monkeypatch.setattr(baselines, "_validate", validate)
    for text in ("{}", "{}", "{ }"):  # another text: validated
        with pytest.raises(DataError):  # (not a result: from_dict fails after the check)
            baselines.loads(text)
        reopen(store_dir)
    assert calls == ["{}", "{}"]
    for _ in range(2):  # a failing baseline is never remembered
        with pytest.raises(DataError, match="bad"):
            baselines.loads("[]")
        reopen(store_dir)
    assert calls == ["{}", "{}", "[]", "[]"]
    cache.use(None)  # without the store every load validates
    with pytest.raises(DataError):
        baselines.loads("{}")
    assert len(calls) == 5


_WORKER = """
import sys
from pathlib import Path
from pytest_recfair.cassettes import cache
cache.use(Path(sys.argv[1]))
for n in range(200):
    cache.put(b"ns", str(n).encode(), [n] * 100)
print("ok")
"""


@pytest.mark.usefixtures("own_store")
def test_concurrent_processes_share_the_store(tmp_path: Path) -> None:
    """Two xdist-like workers writing one store at once: both finish, every entry is
    stored once, and a later process finds them all."""
    earlier_run(tmp_path)
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    workers = [
        subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE)
        for _ in range(2)
    ]
    outs = [w.communicate(timeout=120)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0]
    assert all(out.strip() == b"ok" for out in outs)
    cache.use(tmp_path)
    assert entries(tmp_path) == 200
    assert cache.get(b"ns", b"199") == [199] * 100
