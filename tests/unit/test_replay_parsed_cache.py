"""The replay caches of issue 24's point 3 beyond the index and the parse memo: a
replayed reply's parsed Completion kept by content (providers/replycache.py), a baseline
validated before not validated again (gate/validcache.py), and the memo's replaceable
entries they rely on."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.cassettes import tapecache
from pytest_recfair.cassettes.store import CassetteStore, RecordedRequest, RecordedResponse
from pytest_recfair.errors import DataError, RecfairError
from pytest_recfair.gate import baselines, validcache
from pytest_recfair.providers import from_config, run_cases
from pytest_recfair.providers import replycache as rc
from pytest_recfair.providers.base import Completion, RecordedReply, Usage
from pytest_recfair.providers.http import HTTPProvider
from pytest_recfair.replies import memo
from tests.support.cases import Case
from tests.support.memo import earlier_run, entries

BASE = "http://127.0.0.1:8000/v1"


def reopen(folder: Path) -> None:
    """What a later run does: the file opened afresh (pending entries committed)."""
    memo.use(None)
    memo.use(folder)


def test_replace_overwrites_and_pending_entries_are_read_back(memo_dir: Path) -> None:
    memo.store(b"k" * 20, [1])
    memo.store(b"k" * 20, [2])  # plain store: the first value stays once committed
    memo.replace(b"r" * 20, {"a": 1})
    assert memo.lookup(b"r" * 20) == {"a": 1}  # before any commit
    reopen(memo_dir)
    memo.replace(b"r" * 20, {"a": 2})
    reopen(memo_dir)
    assert memo.lookup(b"r" * 20) == {"a": 2}
    assert memo.lookup(b"k" * 20) in ([1], [2])


OPENAI = b'{"model":"m-1","choices":[{"message":{"content":"1. Heat"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}'  # noqa: E501


def test_parsed_replies_round_trip_and_are_keyed_by_content(memo_dir: Path) -> None:
    provider = from_config("openai", model="m-1", base_url=BASE)
    reply = RecordedReply(OPENAI, {"content-type": "application/json"})
    parsed = provider.parse_reply(reply)
    cache = rc.ParsedReplies(provider)
    digest, known = cache.get("nolan", reply)
    assert known is None
    cache.put("nolan", digest, parsed)
    cache.flush()
    reopen(memo_dir)
    cache = rc.ParsedReplies(provider)
    assert (
        cache.get("nolan", reply)[1] == parsed == Completion("1. Heat", "stop", Usage(3, 4), "m-1")
    )
    # another body, other headers, another provider class or entity: not found
    other = RecordedReply(OPENAI.replace(b"Heat", b"Ronin"), {"content-type": "application/json"})
    assert cache.get("nolan", other)[1] is None
    assert cache.get("nolan", RecordedReply(OPENAI, {"content-type": "text/plain"}))[1] is None
    assert cache.get("lynch", reply)[1] is None
    anthropic = from_config("anthropic", model="m-1", base_url=BASE)
    assert rc.ParsedReplies(anthropic).get("nolan", reply)[1] is None


def test_parsed_replies_keep_nothing_with_the_memo_off() -> None:
    before = memo.folder()
    memo.use(None)
    try:
        provider = from_config("openai", model="m-1", base_url=BASE)
        reply = RecordedReply(OPENAI, {})
        cache = rc.ParsedReplies(provider)
        digest, known = cache.get("nolan", reply)
        assert (digest, known) == (b"", None)
        cache.put("nolan", digest, provider.parse_reply(reply))
        cache.flush()
        assert memo.lookup(b"x" * 20) is None
    finally:
        memo.use(before)


def test_a_completion_of_unexpected_types_is_not_kept() -> None:
    assert rc._encode(Completion("t", "stop", Usage(1, 2), "m")) == ("t", "stop", (1, 2), "m")
    assert rc._encode(Completion("t", 3, None, None)) is None  # type: ignore[arg-type]
    assert rc._decode(("t", None, None, None)) == Completion("t")
    assert rc._decode(["t"]) is None


def _reply(text: str) -> bytes:
    choice = {"message": {"content": text}, "finish_reason": "stop"}
    return json.dumps({"model": "m-1", "choices": [choice]}).encode()


def _record(root: Path, provider: HTTPProvider, cases: list[Case], bodies: list[bytes]) -> None:
    store = CassetteStore(root, "once")
    for case, body in zip(cases, bodies, strict=True):
        request = provider.build_request(case.system, case.prompt)
        sent = RecordedRequest("POST", str(request.url), tuple(request.headers.multi_items()),
                               request.content, case.repeat, case.id)  # fmt: skip
        store.record("t::a", case.entity_id, sent, RecordedResponse(200, (), body, "OK"))
    store.flush()


def _replay(root: Path, provider: HTTPProvider, cases: list[Case]) -> Any:
    memo.use(None)  # each replay a new run: the memo opened afresh from the cassette dir
    store = CassetteStore(root, "none")
    return run_cases(provider, cases, cassettes=store, test_id="t::a", progress=False)


def _rows(root: Path) -> int:
    return entries(root / tapecache.CACHE_DIR)


def test_a_replay_from_the_cache_gives_what_parsing_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = memo.folder()
    try:
        provider = from_config("openai", model="m-1", base_url=BASE)
        cases = [Case(f"c{i}", f"films like {i}", system="S") for i in range(3)]
        bodies = [_reply("1. Heat"), _reply("1. Ronin"), b'{"object": "list"}']
        _record(tmp_path, provider, cases, bodies)
        monkeypatch.setenv("RECFAIR_CACHE", "off")
        plain = _replay(tmp_path, provider, cases)
        monkeypatch.delenv("RECFAIR_CACHE")
        first = _replay(tmp_path, provider, cases)
        stored = _rows(tmp_path)
        warm = _replay(tmp_path, provider, cases)
        assert _rows(tmp_path) == stored  # a warm run stores nothing new
        for run in (first, warm):
            assert run.completions == plain.completions
            assert run.errors == plain.errors  # the bad reply judged (not kept) each time
        assert plain.completions["c1"].text == "1. Ronin"
        assert "c2" in plain.errors
        # a changed cassette: its new reply parsed, never the kept one
        for old in tmp_path.glob("*.json"):
            old.unlink()
        _record(tmp_path, provider, cases[:1], [_reply("1. Alien")])
        assert _replay(tmp_path, provider, cases[:1]).completions["c0"].text == "1. Alien"
    finally:
        memo.use(before)


def test_a_baseline_validated_before_is_not_validated_again(memo_dir: Path) -> None:
    calls: list[str] = []
    validcache.validated("{}", lambda: calls.append("a"))
    reopen(memo_dir)
    validcache.validated("{}", lambda: calls.append("b"))
    validcache.validated("{ }", lambda: calls.append("c"))  # other text: validated
    assert calls == ["a", "c"]

    def bad() -> None:
        raise DataError("bad")

    for _ in range(2):  # a failing baseline is never remembered
        with pytest.raises(DataError):
            validcache.validated("[]", bad)
        reopen(memo_dir)


def test_without_the_memo_every_baseline_load_validates(tmp_path: Path) -> None:
    before = memo.folder()
    memo.use(None)
    try:
        calls: list[int] = []
        for _ in range(2):
            validcache.validated("{}", lambda: calls.append(1))
        assert calls == [1, 1]
        with pytest.raises(DataError, match="not valid JSON"):
            baselines.loads("{", tmp_path / "b.json")
    finally:
        memo.use(before)


def _replay_in(store: CassetteStore, provider: HTTPProvider, cases: list[Case]) -> Any:
    return run_cases(provider, cases, cassettes=store, test_id="t::a", progress=False)


def _outcome(run: Any) -> tuple[Any, Any]:
    return run.completions, run.errors


@pytest.mark.parametrize("repeat_twice", [False, True])
def test_a_whole_entity_is_served_from_the_cache_as_replay_serves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repeat_twice: bool
) -> None:
    before = memo.folder()
    try:
        provider = from_config("openai", model="m-1", base_url=BASE)
        cases = [Case(f"c{i}", f"films like {i}", system="S") for i in range(4)]
        # the same prompt asked by two cases: the case ids tell their replies apart
        cases.append(Case("c9", "films like 0", system="S"))
        bodies = [_reply(f"1. Film {i}") for i in range(5)]
        _record(tmp_path, provider, cases, bodies)
        earlier_run(tmp_path / tapecache.CACHE_DIR)
        runs = []
        for cache in ("off", "on", "on", "on"):
            monkeypatch.setenv("RECFAIR_CACHE", cache)
            memo.use(None)
            store = CassetteStore(tmp_path, "none")
            outcome = _outcome(_replay_in(store, provider, cases))
            read = set(store._tapes)  # the entities whose cassette this store read
            if repeat_twice:  # a second pass of the same store: everything played, as before
                with pytest.raises(RecfairError) as again:
                    _replay_in(store, provider, cases[:1])
                outcome = (*outcome, type(again.value), str(again.value))
            runs.append((outcome, read))
        plain, first, warm, warmer = runs
        assert first[0] == plain[0] == warm[0] == warmer[0]
        assert plain[1] == first[1] == {"e1"}
        if not repeat_twice:
            assert warm[1] == warmer[1] == set()  # served without reading the cassette
        # another request (a setting changed): not served from the entry, replayed as usual
        memo.use(None)
        other = from_config("openai", model="m-1", base_url=BASE, temperature=0.3)
        with pytest.raises(RecfairError, match=r"(?i)cassette"):
            _replay(tmp_path, other, cases)
    finally:
        memo.use(before)


def test_the_cache_is_opened_before_the_baseline_only_for_a_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = memo.folder()
    try:
        memo.use(None)
        tapecache.open_for(tmp_path / "missing", "none")  # no cassette folder: none made
        assert memo.folder() is None
        assert not (tmp_path / "missing").exists()
        for mode in ("once", "new_episodes", "all", "rewrite"):  # recording modes: off
            tapecache.open_for(tmp_path, mode)
            assert memo.folder() is None
        monkeypatch.setenv("RECFAIR_CACHE", "off")
        tapecache.open_for(tmp_path, "none")
        assert memo.folder() is None
        monkeypatch.delenv("RECFAIR_CACHE")
        tapecache.open_for(tmp_path, "none")
        assert memo.folder() == tmp_path / tapecache.CACHE_DIR
    finally:
        memo.use(before)


def test_a_first_run_keeps_no_fine_grained_entry(tmp_path: Path) -> None:
    """An empty memo (a fresh clone in CI): the run reads and parses as without the
    cache, keeps no index, parsed reply or entity (memo.fine()), and the next run, which
    finds the memo written to, keeps them."""
    before = memo.folder()
    try:
        provider = from_config("openai", model="m-1", base_url=BASE)
        cases = [Case(f"c{i}", f"films like {i}", system="S") for i in range(3)]
        _record(tmp_path, provider, cases, [_reply(f"1. Film {i}") for i in range(3)])
        first = _replay(tmp_path, provider, cases)
        assert not memo.fine()  # opened empty: this run is a first run
        assert _rows(tmp_path) == 0
        earlier_run(tmp_path / tapecache.CACHE_DIR)
        second = _replay(tmp_path, provider, cases)
        assert memo.fine()
        assert _rows(tmp_path) > 0  # its index, parsed replies and entity
        assert _outcome(second) == _outcome(first)
    finally:
        memo.use(before)


def test_a_memo_past_its_size_limit_starts_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RECFAIR_CACHE_MAX_MB bounds the replay cache: a run that opens a larger file
    deletes it (with its WAL) and starts an empty one; a smaller file is kept."""
    before = memo.folder()
    folder = tmp_path / "memo"
    monkeypatch.setenv("RECFAIR_CACHE_MAX_MB", "1")
    try:
        memo.use(folder)
        memo.store(b"a" * 20, os.urandom(300_000))  # incompressible: ~0.3 MB
        memo.use(None)
        memo.use(folder)  # under the limit: kept, read by this later run
        assert memo.fine()
        assert isinstance(memo.lookup(b"a" * 20), bytes)
        memo.store(b"b" * 20, os.urandom(900_000))
        memo.use(None)
        assert (folder / memo.FILE_NAME).stat().st_size > 1 << 20
        memo.use(folder)  # past the limit: started afresh
        assert not memo.fine()
        assert memo.lookup(b"a" * 20) is None
        assert (folder / memo.FILE_NAME).stat().st_size < 1 << 20
    finally:
        memo.use(before)
