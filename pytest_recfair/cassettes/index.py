"""The replay index of one cassette file: ``(method, host, path, body, repeat) ->
positions``, the body as stored; a canonical-JSON index is built only when that misses."""

from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pytest_recfair.cassettes.miss import CassetteNote
from pytest_recfair.cassettes.vcrfile import (
    CASE_HEADER,
    TEST_HEADER,
    Key,
    bad_file,
    header_value,
    repeat_of,
    sanitize_name,
    test_name,
)
from pytest_recfair.vocab import RECORD_OPTION

#: A recorded reply: status, reason, headers, body text.
Reply = tuple[int, str, tuple[tuple[str, str], ...], str]


def canonical_body(body: bytes | str | None) -> str | bytes:
    """JSON bodies as sorted-key, whitespace-free text; any other body unchanged (bytes)."""
    if body is None:
        return b""
    raw = body.encode("utf-8") if isinstance(body, str) else body
    if not raw:
        return b""
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return raw
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Tape:
    """The interactions of one entity's cassette file (shared by every test)."""

    __slots__ = (
        "canon", "cases", "dirty", "entries", "existed", "keys", "last", "legacy", "loaded",
        "new", "path", "played", "raw", "stale", "stamp", "tags",
    )  # fmt: skip

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stamp: tuple[int, int, int] | None = None  # the file as last read or written
        self.existed = False
        self.tags: list[str] = []  # the test name that recorded each entry ("" unknown)
        self.cases: list[str] = []  # the case id each entry was recorded for ("" unknown)
        self.stale = 0  # error replies of older versions: never replayed
        self.last = -1  # the position ``take`` served last
        self.legacy: list[Path] = []  # files of the old per-test layout read into this tape
        # Flat tuples of str/int: the GC untracks them (32,000 parsed interactions made
        # every later collection slow: replay took 2x as long).
        self.entries: list[Reply] = []
        self.keys: list[Key] = []  # the raw key of each entry
        # Parsed interactions, kept only when the file may be saved again (mode records).
        self.loaded: list[dict[str, Any]] = []
        self.new: list[dict[str, Any]] = []  # recorded in this run
        # key -> positions in recorded order. ``raw``: the body as stored (no JSON parsed);
        # ``canon``: the canonical body, built on the first raw miss.
        self.raw: dict[Key, tuple[int, ...]] = {}
        self.canon: dict[Key, tuple[int, ...]] | None = None
        self.played = bytearray()
        self.dirty = False

    def take(
        self,
        index: dict[Key, tuple[int, ...]],
        key: Key,
        tests: tuple[str, ...],
        case_id: str | None = None,
    ) -> Reply | None:
        """The first unplayed valid reply for ``key``, preferring those this test
        (``tests``) recorded, and among them the one of ``case_id``: one request asked by
        two cases got two replies in arrival order, so replay scores what recording did."""
        found = index.get(key, ())
        if len(found) == 1:  # the usual case: nothing to choose between
            position = found[0]
            if self.played[position]:
                return None
        else:
            positions = [p for p in found if not self.played[p]]
            if not positions:
                return None
            mine = [p for p in positions if self.tags[p] in tests] or positions
            ours = [p for p in mine if case_id and self.cases[p] == case_id]
            position = (ours or mine)[0]
        self.played[position] = 1
        self.last = position
        return self.entries[position]


def index_tape(tape: Tape, interactions: list[Any], *, records: bool, recording: bool) -> None:
    """Add ``interactions`` (as read from ``tape.path``) to the tape's index; keep them
    parsed too when ``records`` (the file may be saved again). ``recording``: the record
    mode asks stale (error) replies again, which the warning about them says."""
    raw_index, entries, keys = tape.raw, tape.entries, tape.keys
    shared: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
    for number, item in enumerate(interactions):
        try:
            request, response = item["request"], item["response"]
            req_headers = request.get("headers") or {}
            method, uri = request["method"], request["uri"]
            status = response["status"]
            code, reason = status["code"], status.get("message") or ""
            resp_body = response["body"]["string"]
            headers = tuple(
                [
                    (name, value)
                    for name, values in (response.get("headers") or {}).items()
                    for value in ([values] if isinstance(values, str) else values)
                ]
            )
            if (
                not isinstance(method, str)
                or not isinstance(uri, str)
                or not isinstance(code, int)
                or not isinstance(reason, str)
                or not isinstance(resp_body, str | None)
                or not all(isinstance(value, str) for _, value in headers)
            ):
                raise TypeError("wrong field type")
            body = request.get("body")
            if not isinstance(body, str | None):
                raise TypeError(f"request body must be a string or null, got {body!r:.40}")
            key = (*head(method, uri), body or "", repeat_of(req_headers))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise bad_file(
                tape.path,
                f"has a malformed interaction #{number} ({type(exc).__name__}: {exc}); "
                "each needs request.method/uri/body/headers and "
                "response.status.code/headers/body.string",
            ) from None
        keys.append(key)
        # equal headers kept once: most replies of a file have the same
        entries.append((code, reason, shared.setdefault(headers, headers), resp_body or ""))
        tape.tags.append(header_value(req_headers, TEST_HEADER))
        tape.cases.append(header_value(req_headers, CASE_HEADER))
        if valid(code):
            found = raw_index.get(key)
            raw_index[key] = (number,) if found is None else (*found, number)
        else:
            tape.stale += 1
    if records:
        codes = [code for code, _, _, _ in entries]
        tape.loaded = [item for item, code in zip(interactions, codes, strict=True) if valid(code)]
    tape.played = bytearray(len(interactions))
    tape.existed = True
    if tape.stale:
        _note_stale(tape.path, tape.stale, recording)


@functools.lru_cache(maxsize=64)
def head(method: str, url: str) -> tuple[str, str, str]:
    # Per lookup otherwise: a replayed audit asks one URL tens of thousands of times.
    parts = urlsplit(url)
    return method.upper(), (parts.hostname or "").lower(), parts.path or "/"


@functools.lru_cache(maxsize=256)
def provenance(test_id: str) -> tuple[str, str]:
    # Per lookup otherwise: sanitize_name hashes the id.
    return (test_name(test_id), sanitize_name(test_id))


def valid(code: object) -> bool:
    # Only a 2xx reply is model output; older versions also stored 4xx replies.
    return isinstance(code, int) and 200 <= code < 300


def _note_stale(path: Path, count: int, records: bool) -> None:
    then = (
        "they are asked again and dropped from the file on save"
        if records
        else f"record them with {RECORD_OPTION}=new_episodes"
    )
    warnings.warn(
        CassetteNote(
            f"cassette {path}: {count} stored error repl{'y' if count == 1 else 'ies'} "
            f"(HTTP 4xx from an older version) treated as not recorded; {then}."
        ),
        stacklevel=3,
    )
