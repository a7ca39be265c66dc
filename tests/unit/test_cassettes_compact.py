"""Compact cassettes (``.json.gz``), the conversion CLI, vcrpy's persister, and the
content-keyed caches (replay index, reply parsing and matching)."""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import vcr

from pytest_recfair.__main__ import main
from pytest_recfair.cassettes import compact, tapecache
from pytest_recfair.cassettes.prune import apply, plan
from pytest_recfair.cassettes.store import (
    CassetteStore,
    RecordedRequest,
    RecordedResponse,
    read_interactions,
    stored_key,
)
from pytest_recfair.cassettes.vcr_import import CompactPersister
from pytest_recfair.errors import CassetteError
from pytest_recfair.replies import matching, memo, parse
from tests.support.memo import earlier_run, entries

TEST = "tests/test_fair.py::test_movies"
URL = "https://api.openai.com/v1/chat/completions"
KEY = "sk-live-abcdefghijklmnop"


def chat(prompt: str) -> bytes:
    return json.dumps(
        {"model": "gpt-4o", "messages": [{"role": "user", "content": prompt}]}
    ).encode()


def record(root: Path, entity: str, prompts: list[str], compact_: bool | None) -> CassetteStore:
    store = CassetteStore(root, "new_episodes", secrets=[KEY], compact=compact_)
    for i, prompt in enumerate(prompts):
        store.record(
            TEST,
            entity,
            RecordedRequest(
                "POST",
                f"{URL}?key={KEY}",
                (("authorization", f"Bearer {KEY}"), ("content-type", "application/json")),
                chat(f"{prompt} {KEY}"),
                repeat=i % 2,
            ),
            RecordedResponse(
                200,
                (("content-type", "application/json"),),
                json.dumps(
                    {"choices": [{"message": {"content": f"1. {prompt}\n2. Heat"}}]}
                ).encode(),
                "OK",
            ),
        )
    store.flush()
    return store


PROMPTS = [f"movies like film number {i}" for i in range(12)]


def test_compact_file_decodes_to_the_plain_file_byte_for_byte(tmp_path: Path) -> None:
    plain = record(tmp_path / "plain", "nolan", PROMPTS, False).path_for("nolan")
    packed = record(tmp_path / "packed", "nolan", PROMPTS, True).path_for("nolan")
    assert plain.name == "nolan.json"
    assert packed.name == "nolan.json.gz"
    text = gzip.decompress(packed.read_bytes())
    assert text == plain.read_bytes()
    assert read_interactions(packed) == read_interactions(plain)
    # secrets scrubbed exactly as in the plain file: never in the decompressed text
    assert KEY.encode() not in text
    assert b"<filtered>" in text
    assert len(packed.read_bytes()) * 4 <= len(text)


def test_compact_bytes_are_deterministic(tmp_path: Path) -> None:
    a = record(tmp_path / "a", "nolan", PROMPTS, True).path_for("nolan").read_bytes()
    b = record(tmp_path / "b", "nolan", PROMPTS, True).path_for("nolan").read_bytes()
    assert a == b  # gzip mtime 0: git sees no change when nothing changed


def test_replay_from_compact_equals_replay_from_plain(tmp_path: Path) -> None:
    for fmt, flag in (("plain", False), ("packed", True)):
        record(tmp_path / fmt, "nolan", PROMPTS, flag)
    replies = {}
    for fmt in ("plain", "packed"):
        store = CassetteStore(tmp_path / fmt, "none", secrets=[KEY])
        got = [
            store.lookup(TEST, "nolan", "POST", URL, chat(f"{p} {KEY}"), i % 2)
            for i, p in enumerate(PROMPTS)
        ]
        assert all(r is not None for r in got)
        replies[fmt] = got
    assert replies["plain"] == replies["packed"]


def test_existing_files_keep_their_format_new_files_follow_the_folder(tmp_path: Path) -> None:
    record(tmp_path, "nolan", PROMPTS[:2], False)
    assert main(["cassettes", "compact", str(tmp_path)]) == 0
    # the folder is compact now: a new entity is written compact, whatever asked
    store = record(tmp_path, "lynch", PROMPTS[:2], None)
    assert store.path_for("lynch").name == "lynch.json.gz"
    # an existing plain file stays plain even in a store that writes compact files
    record(tmp_path, "kubrick", PROMPTS[:1], False)
    again = record(tmp_path, "kubrick", PROMPTS[1:3], True)
    assert again.path_for("kubrick").name == "kubrick.json"
    assert len(read_interactions(tmp_path / "kubrick.json")) == 3


def test_cli_compacts_and_expands_leaving_other_files_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record(tmp_path, "nolan", PROMPTS, False)
    record(tmp_path, "lynch", PROMPTS[:3], False)
    original = {p.name: p.read_bytes() for p in tmp_path.glob("*.json")}
    sidecar = tmp_path / "nolan.failures.json"
    sidecar.write_text('{"failed": []}')
    assert main(["cassettes", "compact", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "compacted 2 cassette(s)" in out
    assert "nolan.failures.json: not a vcrpy cassette" in out
    assert sorted(p.name for p in tmp_path.glob("*.gz")) == ["lynch.json.gz", "nolan.json.gz"]
    assert not (tmp_path / "nolan.json").exists()
    assert sidecar.read_text() == '{"failed": []}'
    assert main(["cassettes", "expand", str(tmp_path)]) == 0
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.json") if p != sidecar} == original
    assert not list(tmp_path.glob("*.gz"))


def test_cli_on_a_missing_folder_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cassettes", "compact", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cassette folder")
    assert err.count("\n") == 1


def test_expand_converts_the_good_files_and_names_each_damaged_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 33 point 2: one damaged file stopped ``cassettes expand`` with a traceback
    and expanded none of the good ones; a killed run's temp files stayed behind."""
    import os
    import time

    record(tmp_path, "nolan", PROMPTS, True)
    good = gzip.decompress((tmp_path / "nolan.json.gz").read_bytes())
    whole = (tmp_path / "nolan.json.gz").read_bytes()
    (tmp_path / "lynch.json.gz").write_bytes(whole[: len(whole) // 2])  # cut in half
    (tmp_path / "kubrick.json.gz").write_bytes(gzip.compress(os.urandom(300)))  # not UTF-8
    (tmp_path / "varda.json.gz").write_bytes(b'{"interactions": []}')  # plain JSON as .gz
    stale = tmp_path / ".nolan.json.gz.k3j2.tmp"
    stale.write_bytes(b"half")
    os.utime(stale, (time.time() - 600, time.time() - 600))
    fresh = tmp_path / ".lynch.json.abcd.tmp"  # maybe another process's write in progress
    fresh.write_bytes(b"in flight")
    assert main(["cassettes", "expand", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "expanded 1 cassette(s)" in out
    assert (tmp_path / "nolan.json").read_bytes() == good
    damaged = [line for line in out.splitlines() if "DAMAGED" in line]
    assert sorted(line.split()[4] for line in damaged) == [
        "kubrick.json.gz:",
        "lynch.json.gz:",
        "varda.json.gz:",
    ]
    assert all(line.count("\n") == 0 and "restore it" in line for line in damaged)
    for name in ("lynch.json.gz", "kubrick.json.gz", "varda.json.gz"):
        assert (tmp_path / name).exists()  # left as they are
    assert not stale.exists()
    assert fresh.exists()
    assert "removed 1 temp file(s) of an interrupted earlier run" in out


def test_a_broken_compact_file_is_a_one_line_cassette_error(tmp_path: Path) -> None:
    (tmp_path / "nolan.json.gz").write_bytes(b"\x1f\x8b not gzip at all")
    store = CassetteStore(tmp_path, "none")
    with pytest.raises(
        CassetteError, match=r"nolan\.json\.gz cannot be read \(not a complete gzip file"
    ):
        store.can_replay(TEST, "nolan")


def test_vcrpy_replays_a_compact_cassette_through_its_persister(tmp_path: Path) -> None:
    path = record(tmp_path, "nolan", PROMPTS[:1], True).path_for("nolan")
    my_vcr = vcr.VCR(serializer="json", record_mode="none", match_on=["method", "path"])
    my_vcr.register_persister(CompactPersister)
    with my_vcr.use_cassette(str(path)) as cassette:
        got = httpx.post(URL, content=chat(f"{PROMPTS[0]} {KEY}"))
    assert got.json()["choices"][0]["message"]["content"] == f"1. {PROMPTS[0]}\n2. Heat"
    assert cassette.play_count == 1


def test_vcrpy_records_a_compact_cassette_we_replay(tmp_path: Path) -> None:
    path = tmp_path / "nolan.json.gz"

    def server(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"choices": [{"message": {"content": "1. Heat"}}]})

    my_vcr = vcr.VCR(serializer="json", record_mode="once")
    my_vcr.register_persister(CompactPersister)
    with my_vcr.use_cassette(str(path)):
        httpx.Client(transport=httpx.MockTransport(server)).post(URL, content=chat("heat"))
    assert json.loads(gzip.decompress(path.read_bytes()))["interactions"]
    got = CassetteStore(tmp_path, "none").lookup(TEST, "nolan", "POST", URL, chat("heat"), 0)
    assert got is not None
    assert b"Heat" in got.body


def test_prune_reads_and_rewrites_compact_files_in_their_format(tmp_path: Path) -> None:
    record(tmp_path, "nolan", PROMPTS[:4], True)
    path = tmp_path / "nolan.json.gz"
    items = read_interactions(path)
    used = {(path.name, stored_key(item)) for item in items[:2]}
    found = plan(tmp_path, used, tmp_path / "baselines", [])
    assert found.cassettes == {path: (2, 4)}
    apply(found)
    assert read_interactions(path) == items[:2]
    assert gzip.decompress(path.read_bytes()).startswith(b'{"interactions"')


# -- the replay index cache


@pytest.fixture
def no_memo() -> Iterator[None]:
    """Each test opens its own memo file, and leaves the process's as it was."""
    before = memo.folder()
    memo.use(None)
    yield
    memo.use(before)


def tape_state(store: CassetteStore, entity: str) -> tuple[object, ...]:
    assert store.can_replay(TEST, entity)
    memo._MEMO._commit()  # what a later run finds
    tape = store._tapes[entity]
    return tape.keys, tape.entries, tape.tags, tape.cases, tape.raw, tape.stale


def rows(root: Path) -> int:
    return entries(root / tapecache.CACHE_DIR)


@pytest.mark.usefixtures("no_memo")
@pytest.mark.parametrize("packed", [False, True])
def test_cached_index_equals_the_index_built_from_the_file(tmp_path: Path, packed: bool) -> None:
    record(tmp_path, "nolan", PROMPTS, packed)
    earlier_run(tmp_path / tapecache.CACHE_DIR)
    built = tape_state(CassetteStore(tmp_path, "none"), "nolan")
    assert rows(tmp_path) == 1
    assert (tmp_path / tapecache.CACHE_DIR / ".gitignore").read_text().endswith("*\n")
    memo.use(None)  # a later run opens the memo again and finds the index there
    assert tape_state(CassetteStore(tmp_path, "none"), "nolan") == built
    # a corrupt entry is ignored (the file is read again)
    with sqlite3.connect(tmp_path / tapecache.CACHE_DIR / memo.FILE_NAME) as db:
        db.execute("UPDATE memo SET v = ?", (b"\x00garbage",))
    memo.use(None)
    assert tape_state(CassetteStore(tmp_path, "none"), "nolan") == built


@pytest.mark.usefixtures("no_memo")
def test_a_changed_cassette_gets_another_cache_entry(tmp_path: Path) -> None:
    record(tmp_path, "nolan", PROMPTS[:2], False)
    earlier_run(tmp_path / tapecache.CACHE_DIR)
    tape_state(CassetteStore(tmp_path, "none"), "nolan")
    record(tmp_path, "nolan", PROMPTS[2:4], False)
    memo.use(None)
    state = tape_state(CassetteStore(tmp_path, "none"), "nolan")
    assert len(state[1]) == 4  # the new file, never the stale entry
    assert rows(tmp_path) == 2


@pytest.mark.usefixtures("no_memo")
def test_the_cache_is_off_with_recfair_cache_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(tmp_path, "nolan", PROMPTS[:2], False)
    monkeypatch.setenv("RECFAIR_CACHE", "off")
    assert CassetteStore(tmp_path, "none").can_replay(TEST, "nolan")
    assert not (tmp_path / tapecache.CACHE_DIR).exists()


@pytest.mark.usefixtures("no_memo")
def test_the_cache_folder_is_not_an_old_per_test_layout(tmp_path: Path) -> None:
    record(tmp_path, "nolan", PROMPTS[:2], False)
    CassetteStore(tmp_path, "none").can_replay(TEST, "nolan")
    assert (tmp_path / tapecache.CACHE_DIR).is_dir()
    # a recording store (no cache) reads the file, not the cache folder, as before
    store = CassetteStore(tmp_path, "new_episodes")
    assert store.can_replay(TEST, "nolan")
    assert store._tapes["nolan"].legacy == []


# -- the reply parsing and matching memo


def stored_keys(folder: Path) -> int:
    return entries(folder)


TEXT = "1. The Dark Knight (2008)\n2. Memento\n3. Heat - a heist film\n"


def test_parse_results_are_kept_and_settings_are_part_of_the_key(memo_dir: Path) -> None:
    first = parse.reply(TEXT, 2)
    assert stored_keys(memo_dir) == 1
    assert parse.reply(TEXT, 2) == first  # a hit: nothing new stored
    assert stored_keys(memo_dir) == 1
    # another k or style is another key (a miss), computed afresh
    assert parse.reply(TEXT, 3).status != first.status
    assert parse.reply(TEXT, 2, style="fairllm") == parse._reply(TEXT, 2, "fairllm")
    assert stored_keys(memo_dir) == 3
    memo.use(None)
    assert parse.reply(TEXT, 2) == first


def test_canonicalize_results_are_kept_and_merges_still_logged(
    memo_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lists = [["The Dark Knight", "Memento"], ["The Dark Knigth", "Heat"]]
    fresh = matching.canonicalize(lists, entity="nolan")
    assert stored_keys(memo_dir) == 1
    with caplog.at_level("INFO", logger="pytest_recfair.replies.matching"):
        assert matching.canonicalize(lists, entity="nolan") == fresh
    assert "merged" in caplog.text
    assert matching.canonicalize(lists, entity="nolan", fuzzy=False) != fresh
    assert stored_keys(memo_dir) == 2


def test_a_corrupt_memo_file_is_replaced(tmp_path: Path) -> None:
    before = memo.folder()
    folder = tmp_path / "memo"
    folder.mkdir()
    (folder / memo.FILE_NAME).write_bytes(b"this is not a database" * 100)
    try:
        memo.use(folder)  # replaced by an empty memo: a first run keeps no parsed reply
        assert parse.reply(TEXT, 2) == parse._reply(TEXT, 2, "default")
        assert stored_keys(folder) == 0
        earlier_run(folder)
        memo.use(None)
        memo.use(folder)
        assert parse.reply(TEXT, 2) == parse._reply(TEXT, 2, "default")
        assert stored_keys(folder) == 1
    finally:
        memo.use(before)


def test_a_corrupt_memo_value_is_computed_again(memo_dir: Path) -> None:
    first = parse.reply(TEXT, 2)
    memo._MEMO._commit()
    with sqlite3.connect(memo_dir / memo.FILE_NAME) as db:
        db.execute("UPDATE memo SET v = ?", (b"\xff\x00 garbage",))
    assert parse.reply(TEXT, 2) == first


def test_compact_suffix_constants() -> None:
    assert compact.plain_name(Path("a.json.gz")) == "a.json"
    assert compact.plain_name(Path("a.json")) == "a.json"


_WORKER = """
import sys
from pathlib import Path
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.replies import parse
root = Path(sys.argv[1])
store = CassetteStore(root, "none")
for n in range(int(sys.argv[2])):
    assert store.can_replay("t::x", f"e{n}")
for n in range(400):
    parse.reply(f"1. Film {n}\\n2. Other {n}\\n", 2)
print("ok")
"""


@pytest.mark.usefixtures("no_memo")
def test_concurrent_processes_share_the_cache(tmp_path: Path) -> None:
    """Two xdist-like workers replaying one folder at once: both finish, every entry is
    stored once, and a later process finds them all."""
    for n in range(20):
        record(tmp_path, f"e{n}", [f"{p} for e{n}" for p in PROMPTS[:3]], n % 2 == 0)
    earlier_run(tmp_path / tapecache.CACHE_DIR)
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    workers = [
        subprocess.Popen([sys.executable, str(script), str(tmp_path), "20"], stdout=subprocess.PIPE)
        for _ in range(2)
    ]
    outs = [w.communicate(timeout=120)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0]
    assert all(out.strip() == b"ok" for out in outs)
    assert rows(tmp_path) == 20 + 400  # 20 indexes, 400 parsed replies, none twice
    built = tape_state(CassetteStore(tmp_path, "new_episodes"), "e3")[:5]
    memo.use(None)
    assert tape_state(CassetteStore(tmp_path, "none"), "e3")[:5] == built
