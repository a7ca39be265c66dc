"""CassetteStore: layout, matching, record modes, scrubbing, bad files, miss messages."""

from __future__ import annotations

import json
import os
import pickle
import re
import tempfile
from pathlib import Path
from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_recfair.cassettes.miss import CassetteMiss, CassetteNote, prompt_of
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.cassettes.vcrfile import (
    REPEAT_HEADER,
    Key,
    RecordedRequest,
    RecordedResponse,
    canonical_body,
    read_interactions,
    sanitize_name,
)
from pytest_recfair.errors import CassetteError, ConfigError, RecfairError
from pytest_recfair.vocab import RECORD_MODES

TEST = "tests/test_fair.py::test_movies[gpt-4o]"
URL = "https://api.openai.com/v1/chat/completions"


def chat(prompt: str, **extra: object) -> bytes:
    return json.dumps(
        {"model": "gpt-4o", "messages": [{"role": "user", "content": prompt}], **extra},
        ensure_ascii=False,
    ).encode()


def req(prompt: str, repeat: int = 0, url: str = URL) -> RecordedRequest:
    return RecordedRequest(
        "POST", url, (("content-type", "application/json"),), chat(prompt), repeat=repeat
    )


def resp(text: str, status: int = 200) -> RecordedResponse:
    body = json.dumps({"choices": [{"message": {"content": text}}]}, ensure_ascii=False).encode()
    return RecordedResponse(status, (("content-type", "application/json"),), body, "OK")


def reply_text(r: RecordedResponse | None) -> str:
    assert r is not None, "expected a recorded reply, got a miss"
    return str(json.loads(r.body)["choices"][0]["message"]["content"])


def recorded(root: Path, entity: str, pairs: list[tuple[str, str]], repeat: int = 0) -> Path:
    """Record prompt -> reply pairs for one entity and save them."""
    store = CassetteStore(root, "new_episodes")
    for prompt, text in pairs:
        store.record(TEST, entity, req(prompt, repeat), resp(text))
    (path,) = store.flush()
    return path


# ----------------------------------------------------------------------------- layout


def test_path_is_root_entity_json_whatever_the_test(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path)
    path = store.path_for("nolan")
    assert path == tmp_path / "nolan.json"


def test_unsafe_names_are_rewritten_stably(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path)
    path = store.path_for("Christopher Nolan / 1970")
    assert path.parent == tmp_path
    assert re.fullmatch(r"[a-z0-9._~-]+\.json", path.name)
    assert path == CassetteStore(tmp_path).path_for("Christopher Nolan / 1970")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Nolan", "nolan"),  # case-insensitive file systems
        ("a/b", "a_b"),
        ("a b", "a_b"),
        ("..", "_"),
        ("con", "con_"),
        ("x" * 200, "x" * 201),
    ],
)
def test_distinct_names_never_share_a_file(a: str, b: str) -> None:
    assert sanitize_name(a).lower() != sanitize_name(b).lower()


@given(st.text(min_size=1, max_size=120))
def test_sanitized_names_are_safe_and_deterministic(name: str) -> None:
    safe = sanitize_name(name)
    assert safe == sanitize_name(name)
    assert re.fullmatch(r"[a-z0-9][a-z0-9._~-]*|~[0-9a-f]{12}", safe), safe
    assert len(safe) <= 100
    assert safe not in (".", "..")


@given(st.lists(st.text(min_size=1, max_size=20), min_size=2, max_size=30, unique=True))
def test_sanitized_names_are_collision_free(names: list[str]) -> None:
    assert len({sanitize_name(n).lower() for n in names}) == len(names)


# ----------------------------------------------------------------------------- matching


def test_canonical_body_ignores_key_order_and_whitespace() -> None:
    a = b'{"b": 1, "a": [1, 2, {"y": "\\u00e9", "x": null}]}'
    b = b'{"a":[1,2,{"x":null,"y":"\xc3\xa9"}],"b":1}'
    assert canonical_body(a) == canonical_body(b)
    assert canonical_body(b"not json") == b"not json"
    assert canonical_body(b"") == b""


def test_replay_matches_reordered_json_body(tmp_path: Path) -> None:
    recorded(tmp_path, "nolan", [("movies like Nolan", "Inception")])
    store = CassetteStore(tmp_path)
    reordered = json.dumps(
        {"messages": [{"content": "movies like Nolan", "role": "user"}], "model": "gpt-4o"},
        indent=3,
    ).encode()
    assert reply_text(store.lookup(TEST, "nolan", "POST", URL, reordered, 0)) == "Inception"


def test_different_prompts_never_get_each_others_reply(tmp_path: Path) -> None:
    pairs = [(f"prompt number {i}", f"reply {i}") for i in range(20)]
    recorded(tmp_path, "nolan", pairs)
    store = CassetteStore(tmp_path)
    for prompt, text in reversed(pairs):
        assert reply_text(store.lookup(TEST, "nolan", "POST", URL, chat(prompt), 0)) == text
    assert store.lookup(TEST, "nolan", "POST", URL, chat("prompt number 99"), 0) is None


def test_method_host_and_path_are_matched_port_and_query_are_not(tmp_path: Path) -> None:
    recorded(tmp_path, "nolan", [("p", "r")])
    body = chat("p")
    for method, url in [
        ("GET", URL),
        ("POST", "https://api.anthropic.com/v1/chat/completions"),
        ("POST", "https://api.openai.com/v1/completions"),
    ]:
        assert CassetteStore(tmp_path).lookup(TEST, "nolan", method, url, body, 0) is None
    # A loopback simulator listens on a new port every run.
    other_port = "https://API.openai.com:8443/v1/chat/completions?trace=1"
    hit = CassetteStore(tmp_path).lookup(TEST, "nolan", "post", other_port, body, 0)
    assert reply_text(hit) == "r"


def test_repeats_are_told_apart_by_repeat_index(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path, "new_episodes")
    for repeat in range(3):
        store.record(TEST, "nolan", req("same prompt", repeat), resp(f"run {repeat}"))
    store.flush()
    replay = CassetteStore(tmp_path)
    for repeat in (2, 0, 1):
        hit = replay.lookup(TEST, "nolan", "POST", URL, chat("same prompt"), repeat)
        assert reply_text(hit) == f"run {repeat}"
    saved = json.loads(store.path_for("nolan").read_text("utf-8"))
    assert [i["request"]["headers"][REPEAT_HEADER] for i in saved["interactions"]] == [
        ["0"],
        ["1"],
        ["2"],
    ]


def test_identical_requests_replay_in_recorded_order_then_miss(tmp_path: Path) -> None:
    recorded(tmp_path, "nolan", [("same", "first"), ("same", "second")])
    store = CassetteStore(tmp_path)
    got = [store.lookup(TEST, "nolan", "POST", URL, chat("same"), 0) for _ in range(3)]
    assert [reply_text(r) for r in got[:2]] == ["first", "second"]
    assert got[2] is None


def test_entities_do_not_share_replies_tests_do(tmp_path: Path) -> None:
    recorded(tmp_path, "nolan", [("p", "r")])
    store = CassetteStore(tmp_path)
    assert store.lookup(TEST, "lynch", "POST", URL, chat("p"), 0) is None
    # keyed by what was asked: another test (or the same one moved) replays it
    other = CassetteStore(tmp_path)
    assert (
        reply_text(other.lookup("sub/t.py::other_test", "nolan", "POST", URL, chat("p"), 0)) == "r"
    )


def test_a_test_prefers_the_replies_it_recorded(tmp_path: Path) -> None:
    # Cassettes migrated from the per-test layout hold the same request once per test.
    store = CassetteStore(tmp_path, "new_episodes")
    store.record("a.py::test_one", "nolan", req("p"), resp("one's"))
    store.record("b.py::test_two", "nolan", req("p"), resp("two's"))
    store.flush()
    for test, text in [("x/a.py::test_two", "two's"), ("a.py::test_one", "one's")]:
        hit = CassetteStore(tmp_path).lookup(test, "nolan", "POST", URL, chat("p"), 0)
        assert reply_text(hit) == text


def test_one_request_of_two_cases_replays_each_case_its_own_reply(tmp_path: Path) -> None:
    # A value phrase shared by two attributes ("American": nationality and continent) is
    # one request asked by two cases; while recording, the replies arrive in any order.
    store = CassetteStore(tmp_path, "new_episodes")
    for case, text in [("continent-american", "B's"), ("nationality-american", "A's")]:
        request = RecordedRequest("POST", URL, (), chat("p"), case_id=case)
        store.record(TEST, "nolan", request, resp(text))
    store.flush()
    replay = CassetteStore(tmp_path)
    for case, text in [("nationality-american", "A's"), ("continent-american", "B's")]:
        hit = replay.lookup(TEST, "nolan", "POST", URL, chat("p"), 0, case_id=case)
        assert reply_text(hit) == text
    # without a case id (older cassettes, other callers): recorded order
    plain = CassetteStore(tmp_path)
    got = [plain.lookup(TEST, "nolan", "POST", URL, chat("p"), 0) for _ in range(2)]
    assert [reply_text(r) for r in got] == ["B's", "A's"]


def test_rewrite_keeps_what_earlier_tests_of_the_run_recorded(tmp_path: Path) -> None:
    recorded(tmp_path, "nolan", [("old", "last week's")])
    run: set[Path] = set()  # the run's stores (one per test) share it
    for test, prompt in [("a.py::test_one", "p1"), ("b.py::test_two", "p2")]:
        store = CassetteStore(tmp_path, "rewrite", rewritten=run)
        store.record(test, "nolan", req(prompt), resp(f"{prompt}'s"))
        store.flush()
    replay = CassetteStore(tmp_path)
    assert reply_text(replay.lookup(TEST, "nolan", "POST", URL, chat("p1"), 0)) == "p1's"
    assert reply_text(replay.lookup(TEST, "nolan", "POST", URL, chat("p2"), 0)) == "p2's"
    assert replay.lookup(TEST, "nolan", "POST", URL, chat("old"), 0) is None
    # the next run starts over again
    store = CassetteStore(tmp_path, "rewrite", rewritten=set())
    store.record(TEST, "nolan", req("p3"), resp("p3's"))
    store.flush()
    assert len(read_interactions(store.path_for("nolan"))) == 1


def test_lookup_is_lazy_per_entity(tmp_path: Path) -> None:
    recorded(tmp_path, "nolan", [("p", "r")])
    store = CassetteStore(tmp_path)
    broken = store.path_for("lynch")
    broken.write_text("{ not json", encoding="utf-8")
    # Only nolan's file is read, so lynch's broken file does not matter yet.
    assert reply_text(store.lookup(TEST, "nolan", "POST", URL, chat("p"), 0)) == "r"
    with pytest.raises(CassetteError):
        store.lookup(TEST, "lynch", "POST", URL, chat("p"), 0)


def test_can_replay_only_entities_with_recordings(tmp_path: Path) -> None:
    recorded(tmp_path, "nolan", [("a", "1"), ("b", "2")])
    store = CassetteStore(tmp_path)
    assert store.can_replay(TEST, "nolan")
    assert not store.can_replay(TEST, "absent")
    assert not CassetteStore(tmp_path, "all").can_replay(TEST, "nolan")  # all re-records


# ----------------------------------------------------------------------------- modes


def test_unknown_mode_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"none, once, new_episodes, all, rewrite.*'replay'"):
        CassetteStore(tmp_path, "replay")  # type: ignore[arg-type]
    assert RECORD_MODES == ("none", "once", "new_episodes", "all", "rewrite")


def test_mode_none_never_records_or_writes(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path)
    assert store.mode == "none"
    assert not store.needs_network(TEST, "nolan")
    with pytest.raises(CassetteError, match="record mode is 'none'"):
        store.record(TEST, "nolan", req("p"), resp("r"))
    assert store.flush() == []
    assert list(tmp_path.iterdir()) == []


def test_mode_once_replays_and_records_only_what_is_missing(tmp_path: Path) -> None:
    recorded(tmp_path, "nolan", [("p", "r")])
    store = CassetteStore(tmp_path, "once")
    assert store.needs_network(TEST, "nolan")  # a partial recording is resumed
    assert store.needs_network(TEST, "lynch")
    assert reply_text(store.lookup(TEST, "nolan", "POST", URL, chat("p"), 0)) == "r"
    store.record(TEST, "lynch", req("q"), resp("s"))
    assert store.flush() == [store.path_for("lynch")]
    assert reply_text(CassetteStore(tmp_path).lookup(TEST, "lynch", "POST", URL, chat("q"), 0)) == (
        "s"
    )


def test_mode_new_episodes_appends_to_existing(tmp_path: Path) -> None:
    path = recorded(tmp_path, "nolan", [("old", "old reply")])
    store = CassetteStore(tmp_path, "new_episodes")
    assert store.needs_network(TEST, "nolan")
    assert reply_text(store.lookup(TEST, "nolan", "POST", URL, chat("old"), 0)) == "old reply"
    assert store.lookup(TEST, "nolan", "POST", URL, chat("new"), 0) is None
    store.record(TEST, "nolan", req("new"), resp("new reply"))
    assert store.flush() == [path]
    replay = CassetteStore(tmp_path)
    assert reply_text(replay.lookup(TEST, "nolan", "POST", URL, chat("old"), 0)) == "old reply"
    assert reply_text(replay.lookup(TEST, "nolan", "POST", URL, chat("new"), 0)) == "new reply"


def test_mode_all_rerecords_and_keeps_the_rest(tmp_path: Path) -> None:
    recorded(tmp_path, "nolan", [("a", "old a"), ("b", "old b")])
    store = CassetteStore(tmp_path, "all")
    assert store.lookup(TEST, "nolan", "POST", URL, chat("a"), 0) is None  # never replays
    assert store.needs_network(TEST, "nolan")
    store.record(TEST, "nolan", req("a"), resp("new a"))
    store.flush()
    saved = json.loads(store.path_for("nolan").read_text("utf-8"))["interactions"]
    assert len(saved) == 2
    replay = CassetteStore(tmp_path)
    assert reply_text(replay.lookup(TEST, "nolan", "POST", URL, chat("a"), 0)) == "new a"
    assert reply_text(replay.lookup(TEST, "nolan", "POST", URL, chat("b"), 0)) == "old b"


def test_mode_all_keeps_the_repeats_it_did_not_rerecord(tmp_path: Path) -> None:
    # A re-recording with fewer repeats replaces only the repeats it asked again.
    for repeat in range(3):
        recorded(tmp_path, "nolan", [("a", f"old a{repeat}")], repeat=repeat)
    store = CassetteStore(tmp_path, "all")
    store.record(TEST, "nolan", req("a"), resp("new a0"))
    store.flush()
    replay = CassetteStore(tmp_path)
    got = [reply_text(replay.lookup(TEST, "nolan", "POST", URL, chat("a"), r)) for r in range(3)]
    assert got == ["new a0", "old a1", "old a2"]


def test_a_worker_saving_after_another_keeps_its_other_repeats(tmp_path: Path) -> None:
    # Two xdist workers record one entity's file: repeats of the same prompt both kept.
    mine, theirs = CassetteStore(tmp_path, "new_episodes"), CassetteStore(tmp_path, "new_episodes")
    assert mine.lookup(TEST, "nolan", "POST", URL, chat("a"), 0) is None
    assert theirs.lookup(TEST, "nolan", "POST", URL, chat("a"), 1) is None
    theirs.record(TEST, "nolan", req("a", 1), resp("a1"))
    theirs.flush()
    os.utime(theirs.path_for("nolan"), ns=(1, 1))  # a changed stamp whatever the clock
    mine.record(TEST, "nolan", req("a", 0), resp("a0"))
    mine.flush()
    replay = CassetteStore(tmp_path)
    got = [reply_text(replay.lookup(TEST, "nolan", "POST", URL, chat("a"), r)) for r in (0, 1)]
    assert got == ["a0", "a1"]


def test_mode_rewrite_replaces_the_file_without_reading_it(tmp_path: Path) -> None:
    path = CassetteStore(tmp_path).path_for("nolan")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("garbage from an interrupted tool", encoding="utf-8")
    store = CassetteStore(tmp_path, "rewrite")
    assert store.lookup(TEST, "nolan", "POST", URL, chat("a"), 0) is None
    store.record(TEST, "nolan", req("a"), resp("fresh"))
    store.flush()
    replay = CassetteStore(tmp_path)
    assert reply_text(replay.lookup(TEST, "nolan", "POST", URL, chat("a"), 0)) == "fresh"
    assert len(json.loads(path.read_text("utf-8"))["interactions"]) == 1


def test_flush_writes_only_changed_files_once(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path, "new_episodes")
    store.record(TEST, "nolan", req("a"), resp("1"))
    assert len(store.flush()) == 1
    assert store.flush() == []
    with CassetteStore(tmp_path, "new_episodes") as again:
        again.record(TEST, "lynch", req("a"), resp("1"))
    assert again.path_for("lynch").exists()


def test_autosave_keeps_recordings_of_an_interrupted_run(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path, "new_episodes", autosave=0)
    store.record(TEST, "nolan", req("a"), resp("1"))
    store.record(TEST, "lynch", req("b"), resp("2"))
    # No flush(): the run "dies" here, yet both replies are on disk.
    replay = CassetteStore(tmp_path)
    assert reply_text(replay.lookup(TEST, "nolan", "POST", URL, chat("a"), 0)) == "1"
    assert reply_text(replay.lookup(TEST, "lynch", "POST", URL, chat("b"), 0)) == "2"


def test_autosave_off_writes_only_on_flush(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path, "new_episodes", autosave=None)
    store.record(TEST, "nolan", req("a"), resp("1"))
    assert not store.path_for("nolan").exists()
    with pytest.raises(ConfigError, match="autosave"):
        CassetteStore(tmp_path, autosave=-1)


# ----------------------------------------------------------------------------- file format


def test_saved_file_is_a_vcrpy_json_cassette(tmp_path: Path) -> None:
    path = recorded(tmp_path, "nolan", [("Amélie, s'il vous plaît", "Le Fabuleux Destin")])
    raw = path.read_bytes()
    raw.decode("utf-8")  # UTF-8, and non-ASCII text kept readable
    assert "Amélie".encode() in raw
    data = json.loads(raw)
    assert data["version"] == 1
    (item,) = data["interactions"]
    assert set(item) == {"request", "response"}
    assert item["request"]["method"] == "POST"
    assert item["request"]["uri"] == URL
    assert isinstance(item["request"]["body"], str)
    assert all(isinstance(v, list) for v in item["request"]["headers"].values())
    assert item["response"]["status"] == {"code": 200, "message": "OK"}
    assert isinstance(item["response"]["body"]["string"], str)
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_content_encoding_is_dropped_and_length_fixed(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path, "new_episodes")
    body = b'{"ok": true}'
    headers = (("Content-Encoding", "gzip"), ("Content-Length", "999"), ("X-Other", "1"))
    store.record(TEST, "nolan", req("p"), RecordedResponse(200, headers, body, "OK"))
    (path,) = store.flush()
    saved = json.loads(path.read_text("utf-8"))["interactions"][0]["response"]["headers"]
    assert saved == {"Content-Length": [str(len(body))], "X-Other": ["1"]}


def test_binary_bodies_are_refused_with_advice(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path, "new_episodes")
    with pytest.raises(CassetteError, match="not UTF-8 text"):
        store.record(TEST, "nolan", req("p"), RecordedResponse(200, (), b"\xff\xfe\x00", ""))
    assert store.flush() == []


def test_interrupted_flush_leaves_the_old_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = recorded(tmp_path, "nolan", [("a", "1")])
    before = path.read_bytes()
    store = CassetteStore(tmp_path, "new_episodes")
    store.record(TEST, "nolan", req("b"), resp("2"))

    def crash(src: object, dst: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        store.flush()
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]


# ----------------------------------------------------------------------------- bad files


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{ this is not json", "is not valid JSON"),
        ("[1, 2, 3]", "is not a vcrpy cassette"),
        ('{"version": 1}', "is not a vcrpy cassette"),
        ('{"interactions": [{"request": {}}]}', "malformed interaction #0"),
        (
            '{"interactions": [{"request": {"method": "POST", "uri": "http://x/", "body": 3,'
            ' "headers": {}}, "response": {"status": {"code": 200}, "headers": {},'
            ' "body": {"string": ""}}}]}',
            "malformed interaction #0",
        ),
    ],
)
def test_bad_cassette_names_file_and_fix(tmp_path: Path, content: str, problem: str) -> None:
    store = CassetteStore(tmp_path)
    path = store.path_for("nolan")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CassetteError) as info:
        store.lookup(TEST, "nolan", "POST", URL, chat("p"), 0)
    message = str(info.value)
    assert str(path) in message
    assert problem in message
    assert "Delete it and re-record with --fairness-record=once" in message
    assert isinstance(info.value, RecfairError)
    assert isinstance(info.value, ValueError)


def test_non_utf8_cassette_is_a_cassette_error(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path)
    path = store.path_for("nolan")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b'{"interactions": ["\xff"]}')
    with pytest.raises(CassetteError, match="UTF-8"):
        store.needs_network(TEST, "nolan") or store.lookup(TEST, "nolan", "POST", URL, b"", 0)


def test_bad_arguments_say_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"root must be a pathlib\.Path"):
        CassetteStore(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="wrap it"):
        CassetteStore(tmp_path).add_secrets("sk-secret")
    with pytest.raises(TypeError, match="must be str"):
        CassetteStore(tmp_path, secrets=[b"sk-bytes-key"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="must be a str"):
        sanitize_name(3)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- misses


def test_miss_message_names_test_entity_prompt_file_and_fix(tmp_path: Path) -> None:
    path = recorded(tmp_path, "nolan", [("recorded prompt", "r")])
    store = CassetteStore(tmp_path)
    body = chat("I am a Muslim fan of Nolan. Recommend 25 movies.")
    assert store.lookup(TEST, "nolan", "POST", URL, body, 3) is None
    error = store.miss(TEST, "nolan", "POST", URL, body, 3)
    assert isinstance(error, CassetteMiss)
    assert isinstance(error, CassetteError)
    text = str(error)
    for part in (
        TEST,
        "'nolan'",
        "I am a Muslim fan of Nolan. Recommend 25 movies.",
        str(path),
        "--fairness-record=new_episodes",
        "repeat 3",
        "POST api.openai.com/v1/chat/completions",
        "1 interaction(s)",
    ):
        assert part in text
    assert "\n" not in text  # one message, one line
    clone = pickle.loads(pickle.dumps(error))
    assert str(clone) == text
    assert clone.path == path


def test_miss_for_missing_file_says_so(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path)
    error = store.miss(TEST, "nolan", "POST", URL, chat("p"), 0)
    assert "does not exist" in str(error)
    assert error.recorded is None


def test_miss_prefers_the_case_prompt(tmp_path: Path) -> None:
    class Case:
        prompt = "the prompt text of the case"

    error = CassetteStore(tmp_path).miss(TEST, "e", "POST", URL, b"\x00binary", 0, case=Case())
    assert error.prompt == "the prompt text of the case"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "U"}]},
            "U",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "A1"}]}]},
            "A1",
        ),
        ({"contents": [{"role": "user", "parts": [{"text": "G1"}, {"text": "G2"}]}]}, "G1\nG2"),
        ({"prompt": "P"}, "P"),
    ],
)
def test_prompt_of_reads_openai_anthropic_and_gemini(body: object, expected: str) -> None:
    assert prompt_of(json.dumps(body).encode()) == expected


def test_prompt_of_falls_back_to_the_body_text() -> None:
    assert prompt_of(b"plain text prompt") == "plain text prompt"
    assert prompt_of(b'{"other": 1}') == '{"other": 1}'


# ----------------------------------------------------------------------------- scrubbing

KEY = "sk-proj-PLANTED0123456789abcdefSECRET"


def test_no_secret_reaches_disk(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path, "new_episodes", secrets=[KEY])
    other = "AIzaPLANTEDsecondKEYvalue_42"
    store.add_secrets([other, None, "", "ab"])  # "ab": too short to scrub, ignored
    request_headers = (
        ("Authorization", f"Bearer {KEY}"),
        ("api-key", KEY),
        ("X-Api-Key", KEY),
        ("x-goog-api-key", other),
        ("OpenAI-Organization", f"org-{KEY}"),
        ("openai-project", f"proj-{KEY}"),
        ("Cookie", f"session={KEY}"),
        ("x-custom-echo", f"prefix{KEY}suffix"),  # not a known header: value scrubbing
        ("content-type", "application/json"),
    )
    body = json.dumps(
        {
            "messages": [{"role": "user", "content": f"my key is {KEY} and {other}"}],
            "metadata": {"k": f'quote"{KEY}'},
        }
    ).encode()
    url = f"https://generativelanguage.googleapis.com/v1/{KEY}/models?key={KEY}&api_key={other}&alt=json"
    response_headers = (
        ("Set-Cookie", f"a={KEY}; Path=/"),
        ("set-cookie", "b=2"),
        ("openai-organization", "org-private"),
        ("x-echo", KEY),
        ("content-type", "application/json"),
    )
    reply = json.dumps({"error": f"Incorrect API key provided: {KEY}", "k2": other}).encode()
    store.record(
        TEST,
        "nolan",
        RecordedRequest("POST", url, request_headers, body, repeat=0),
        RecordedResponse(200, response_headers, reply, "OK"),
    )
    (path,) = store.flush()
    written = path.read_bytes()
    for secret in (KEY, other, "PLANTED", "org-private"):
        assert secret.encode() not in written, f"{secret} leaked into {path}"
    data = json.loads(written)
    (item,) = data["interactions"]
    names = {n.lower() for n in item["request"]["headers"]}
    for header in (
        "authorization",
        "api-key",
        "x-api-key",
        "x-goog-api-key",
        "openai-organization",
        "openai-project",
        "cookie",
    ):
        assert header not in names
    assert "set-cookie" not in {n.lower() for n in item["response"]["headers"]}
    assert "key=" not in item["request"]["uri"]
    assert "alt=json" in item["request"]["uri"]
    assert "<filtered>" in item["request"]["body"]
    assert "<filtered>" in item["response"]["body"]["string"]


def test_secret_added_after_recording_is_still_scrubbed(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path, "new_episodes")
    store.record(TEST, "nolan", req(f"text {KEY}"), resp(f"echo {KEY}"))
    store.add_secrets([KEY])
    (path,) = store.flush()
    assert KEY.encode() not in path.read_bytes()


def test_replay_matches_a_body_whose_secret_was_scrubbed(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path, "new_episodes", secrets=[KEY])
    store.record(TEST, "nolan", req(f"key {KEY}"), resp("r"))
    store.flush()
    replay = CassetteStore(tmp_path, secrets=[KEY])
    assert reply_text(replay.lookup(TEST, "nolan", "POST", URL, chat(f"key {KEY}"), 0)) == "r"


# ----------------------------------------------------------------------------- properties


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.text(max_size=40), min_size=1, max_size=8, unique=True),
    st.randoms(use_true_random=False),
)
def test_every_prompt_gets_its_own_reply_in_any_order(prompts: list[str], rnd: Random) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = CassetteStore(root, "new_episodes", autosave=None)
        for i, prompt in enumerate(prompts):
            store.record(TEST, "e", req(prompt), resp(f"reply {i}"))
        store.flush()
        replay = CassetteStore(root)
        order = list(enumerate(prompts))
        rnd.shuffle(order)
        for i, prompt in order:
            # Re-encoded with other key order and spacing: still the same request.
            body = json.dumps(
                {"messages": [{"content": prompt, "role": "user"}], "model": "gpt-4o"}, indent=1
            ).encode()
            assert reply_text(replay.lookup(TEST, "e", "POST", URL, body, 0)) == f"reply {i}"


def test_can_replay_only_what_a_file_holds(tmp_path: Path) -> None:
    recorded(tmp_path, "nolan", [("p1", "r1")])
    once = CassetteStore(tmp_path, "once")
    assert once.can_replay(TEST, "nolan")
    assert not once.can_replay(TEST, "villeneuve")  # no file yet
    once.record(TEST, "villeneuve", req("p2"), resp("r2"))
    assert not once.can_replay(TEST, "villeneuve")  # this run's recordings are not replayed
    for mode in ("all", "rewrite"):
        assert not CassetteStore(tmp_path, mode).can_replay(TEST, "nolan")


def test_flush_entity_writes_that_cassette_only(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path, "once", autosave=None)
    store.record(TEST, "nolan", req("p1"), resp("r1"))
    store.record(TEST, "lynch", req("p2"), resp("r2"))
    assert store.flush_entity(TEST, "nolan") == store.path_for("nolan")
    assert store.path_for("nolan").exists()
    assert not store.path_for("lynch").exists()
    assert store.flush_entity(TEST, "nolan") is None  # nothing new since
    assert store.flush_entity(TEST, "unknown") is None
    assert store.flush() == [store.path_for("lynch")]
    assert (
        reply_text(CassetteStore(tmp_path).lookup(TEST, "nolan", "POST", URL, chat("p1"), 0))
        == "r1"
    )


def test_all_mode_still_replaces_re_recorded_interactions(tmp_path: Path) -> None:
    path = recorded(tmp_path, "nolan", [("p1", "old"), ("p2", "kept")])
    store = CassetteStore(tmp_path, "all")
    # Same request with its JSON keys in another order: the same key.
    body = json.dumps({"messages": [{"content": "p1", "role": "user"}], "model": "gpt-4o"}).encode()
    store.record(TEST, "nolan", RecordedRequest("POST", URL, (), body), resp("new"))
    store.flush()
    saved = json.loads(path.read_text(encoding="utf-8"))["interactions"]
    texts = [json.loads(i["response"]["body"]["string"])["choices"][0]["message"]["content"]
             for i in saved]  # fmt: skip
    assert texts == ["kept", "new"]


def test_policy_table_has_one_row_per_record_mode() -> None:
    from pytest_recfair.cassettes.miss import MODE_POLICIES
    from pytest_recfair.vocab import RECORD_MODES

    assert tuple(MODE_POLICIES) == RECORD_MODES
    # Only the replay-only mode may never record; a mode that never replays must record.
    assert [m for m, p in MODE_POLICIES.items() if not p.records] == ["none"]
    assert all(p.records for p in MODE_POLICIES.values() if not p.replays)


def test_cassette_module_does_not_name_cli_flags() -> None:
    import inspect

    import pytest_recfair.cassettes.store as module

    assert "--fairness" not in inspect.getsource(module)


def test_error_replies_are_never_recorded(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path, "new_episodes")
    store.record(TEST, "nolan", req("p"), RecordedResponse(401, (), b"{}", "Unauthorized"))
    store.record(TEST, "nolan", req("q"), resp("fine"))
    (path,) = store.flush()
    assert len(json.loads(path.read_text("utf-8"))["interactions"]) == 1


def test_error_replies_of_older_versions_count_as_not_recorded(tmp_path: Path) -> None:
    path = recorded(tmp_path, "nolan", [("p", "r"), ("q", "401 body")])
    data = json.loads(path.read_text("utf-8"))
    data["interactions"][1]["response"]["status"] = {"code": 401, "message": "Unauthorized"}
    path.write_text(json.dumps(data), encoding="utf-8")
    replay = CassetteStore(tmp_path)
    with pytest.warns(CassetteNote, match=r"1 stored error reply .*not recorded.*new_episodes"):
        hit = replay.lookup(TEST, "nolan", "POST", URL, chat("q"), 0)
    assert hit is None
    assert "none valid and unplayed" in str(replay.miss(TEST, "nolan", "POST", URL, chat("q"), 0))
    store = CassetteStore(tmp_path, "once")
    with pytest.warns(CassetteNote, match="asked again and dropped"):
        hit = store.lookup(TEST, "nolan", "POST", URL, chat("p"), 0)
    assert reply_text(hit) == "r"
    assert store.lookup(TEST, "nolan", "POST", URL, chat("q"), 0) is None
    store.record(TEST, "nolan", req("q"), resp("good"))
    store.flush()
    saved = json.loads(path.read_text("utf-8"))["interactions"]
    assert [i["response"]["status"]["code"] for i in saved] == [200, 200]


def test_a_recorded_body_with_a_secret_counts_as_used_for_pruning(tmp_path: Path) -> None:
    """--fairness-prune compares what a run used with the saved (scrubbed) files: a
    request recorded in this run is used even when its body held a secret."""
    from pytest_recfair.engine.verdict import prune_plan

    used: set[tuple[str, Key]] = set()
    store = CassetteStore(tmp_path, "new_episodes", secrets=[KEY], usage=used)
    store.record(TEST, "nolan", req(f"key {KEY}"), resp("r"))
    store.record(TEST, "nolan", req("no secret"), resp("s"))
    store.flush()
    found = prune_plan(tmp_path, used, tmp_path / "baselines", [])
    assert found.empty, found.lines(tmp_path)
