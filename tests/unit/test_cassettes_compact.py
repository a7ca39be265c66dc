"""Compact cassettes (``.json.gz``), the conversion CLI and vcrpy's persister."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import httpx
import pytest
import vcr

from pytest_recfair.__main__ import main
from pytest_recfair.cassettes import cache, compact
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.cassettes.vcrfile import (
    CompactPersister,
    RecordedRequest,
    RecordedResponse,
    read_interactions,
    stored_key,
)
from pytest_recfair.engine.verdict import prune as apply
from pytest_recfair.engine.verdict import prune_plan as plan
from pytest_recfair.errors import CassetteError

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
    import subprocess
    import sys

    record(tmp_path, "nolan", PROMPTS, True)
    good = gzip.decompress((tmp_path / "nolan.json.gz").read_bytes())
    whole = (tmp_path / "nolan.json.gz").read_bytes()
    (tmp_path / "lynch.json.gz").write_bytes(whole[: len(whole) // 2])  # cut in half
    (tmp_path / "kubrick.json.gz").write_bytes(gzip.compress(os.urandom(300)))  # not UTF-8
    (tmp_path / "varda.json.gz").write_bytes(b'{"interactions": []}')  # plain JSON as .gz
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    stale = tmp_path / f".nolan.json.gz.{gone}.k3j2.tmp"  # its writer is dead
    stale.write_bytes(b"half")
    fresh = tmp_path / f".lynch.json.{os.getpid()}.abcd.tmp"  # a live writer's
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
    assert "varda.json.gz: cannot be read (not a gzip file" in out
    assert "kubrick.json.gz: is not UTF-8 text (" in out
    assert "lynch.json.gz: cannot be read (not a complete gzip file" in out


def test_compact_names_a_damaged_plain_cassette_and_converts_the_good_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record(tmp_path, "nolan", PROMPTS, False)
    whole = (tmp_path / "nolan.json").read_bytes()
    (tmp_path / "lynch.json").write_bytes(whole[: len(whole) // 2])  # cut in half
    (tmp_path / "kubrick.json").write_bytes(b"\xff\xfe" + whole)  # not UTF-8
    assert main(["cassettes", "compact", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "compacted 1 cassette(s)" in out
    assert gzip.decompress((tmp_path / "nolan.json.gz").read_bytes()) == whole
    damaged = sorted(line.split()[4] for line in out.splitlines() if "DAMAGED" in line)
    assert damaged == ["kubrick.json:", "lynch.json:"]
    assert "lynch.json: not JSON (" in out
    assert (tmp_path / "lynch.json").exists()
    assert (tmp_path / "kubrick.json").exists()


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


def test_the_cache_folder_is_not_an_old_per_test_layout(tmp_path: Path) -> None:
    record(tmp_path, "nolan", PROMPTS[:2], False)
    (tmp_path / cache.CACHE_DIR).mkdir()  # the content store's folder, hidden
    store = CassetteStore(tmp_path, "new_episodes")
    assert store.can_replay(TEST, "nolan")
    assert store._tapes["nolan"].legacy == []


def test_compact_suffix_constants() -> None:
    assert compact.plain_name(Path("a.json.gz")) == "a.json"
    assert compact.plain_name(Path("a.json")) == "a.json"


@pytest.mark.parametrize("to_compact", [True, False])
def test_a_conversion_stopped_before_removing_the_old_file_is_finished_by_the_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], to_compact: bool
) -> None:
    """Killed between the rename and the removal: both formats hold the same text, and the
    next run removes the old one. Two different texts stay for the user to choose."""
    record(tmp_path, "nolan", PROMPTS, not to_compact)
    record(tmp_path, "lynch", PROMPTS[:3], not to_compact)
    old = {p.name: compact.read_text(p) for p in compact.cassette_files(tmp_path)}
    for name, text in old.items():  # what the stopped run left: the new file written
        new = f"{name}.gz" if to_compact else compact.plain_name(tmp_path / name)
        compact.write(tmp_path / new, text if name.startswith("nolan") else text + " ")
    assert main(["cassettes", "compact" if to_compact else "expand", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert ("compacted" if to_compact else "expanded") + " 1 cassette(s)" in out
    assert "lynch.json" in out
    assert "exists too; delete one of them" in out
    left = {p.name for p in compact.cassette_files(tmp_path)}
    assert left == {"nolan.json.gz" if to_compact else "nolan.json", "lynch.json", "lynch.json.gz"}
    new = tmp_path / ("nolan.json.gz" if to_compact else "nolan.json")
    assert compact.read_text(new) == next(t for n, t in old.items() if n.startswith("nolan"))
