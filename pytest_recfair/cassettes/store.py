"""Record and replay recommender HTTP calls as vcrpy-format JSON cassettes.

Layout: one cassette per seed entity, ``<root>/<entity>.json``, shared by every test of
the project: an interaction is found by what was asked (method, host, path, request body
with provider and model, repeat), never by the test that asked it, so moving or renaming
a test costs nothing and an identical prompt in two tests is recorded once. Per-entity
files (not one per audit) because vcrpy scans a cassette linearly per request. Files are
plain vcrpy cassettes (JSON serializer, format version 1): ``vcr.VCR(serializer="json")``
and pytest-recording read them. Older layouts and cassettes recorded by vcrpy itself are
read through vcrpy's own loader (:mod:`pytest_recfair.cassettes.vcr_import`).

Replay does not go through vcrpy: each file is loaded once into an index
``(method, host, path, canonical JSON body, repeat) -> deque of responses`` that the
httpx transport in ``pytest_recfair.providers.transport`` serves from. Two different
prompts never share a key; identical requests (entropy repeats) are told apart by the
repeat index, stored in the cassette as the request header ``x-recfair-repeat``.

This module is pure (no httpx): the transport converts httpx objects to and from
:class:`RecordedRequest` / :class:`RecordedResponse`. It is also the only module allowed
to import vcrpy besides :mod:`pytest_recfair.cassettes.vcr_import`.

Only valid replies are replayed: an error reply stored by an older version (a 401 for a
bad key, a 404) counts as not recorded, with a :class:`CassetteNote` warning, so
``once``/``new_episodes`` ask it again instead of replaying the error forever.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import threading
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, cast
from urllib.parse import parse_qsl, quote, quote_plus, urlencode, urlsplit, urlunsplit

from pytest_recfair.cassettes import vcr_import as cassette_import
from pytest_recfair.errors import CassetteError, ConfigError
from pytest_recfair.fileio import atomic_write_text

__all__ = [
    "FILTERED",
    "MODE_POLICIES",
    "RECORD_MODES",
    "REPEAT_HEADER",
    "SCRUBBED_QUERY_PARAMS",
    "SCRUBBED_REQUEST_HEADERS",
    "SCRUBBED_RESPONSE_HEADERS",
    "CassetteMiss",
    "CassetteNote",
    "CassetteStore",
    "ModePolicy",
    "RecordMode",
    "RecordedRequest",
    "RecordedResponse",
    "canonical_body",
    "prompt_of",
    "read_interactions",
    "sanitize_name",
    "serialize",
    "stored_key",
    "test_name",
]

from pytest_recfair.kinds import RECORD_MODES, RECORD_OPTION, RecordMode

#: vcrpy's cassette format version (``vcr.serialize.CASSETTE_FORMAT_VERSION``).
CASSETTE_FORMAT_VERSION: Final = 1
REPEAT_HEADER: Final = "x-recfair-repeat"
CASE_HEADER: Final = "x-recfair-case"
#: The test name that recorded an interaction (provenance; see ``_Tape.take``).
TEST_HEADER: Final = "x-recfair-test"
FILTERED: Final = "<filtered>"

SCRUBBED_REQUEST_HEADERS: Final[frozenset[str]] = frozenset(
    {
        "authorization",
        "api-key",
        "x-api-key",
        "x-goog-api-key",
        "openai-organization",
        "openai-project",
        "cookie",
    }
)
# OpenAI echoes the organization and project ids in its response headers too.
SCRUBBED_RESPONSE_HEADERS: Final[frozenset[str]] = frozenset(
    {"set-cookie", "openai-organization", "openai-project"}
)
SCRUBBED_QUERY_PARAMS: Final[frozenset[str]] = frozenset({"key", "api_key"})

_RERECORD_HINT = (
    f"record the missing replies with {RECORD_OPTION}=new_episodes (or once: both keep "
    "the recorded replies and ask only what is missing)"
)
_MIN_SECRET_LEN = 4


@dataclass(frozen=True, slots=True)
class ModePolicy:
    """What one record mode does; the store and the runner ask this, never the name."""

    #: Recorded replies are served (False: every request is recorded afresh).
    replays: bool
    #: A request without a recorded reply may go to the network (and be recorded).
    records: bool
    #: The old file is read (False: it is replaced unread).
    reads_old: bool
    #: Old interactions kept on save: all of them, those not re-recorded, or none.
    keeps: Literal["all", "not_rerecorded", "none"]


#: One row per mode (names as in vcrpy / pytest-recording); a new mode is one row. With a
#: store keyed by what was asked and shared by every test, "once" (record a file that does
#: not exist yet) and "new_episodes" coincide: each asks exactly the requests without a
#: valid recording, so an interrupted or partial recording is simply resumed.
MODE_POLICIES: Final[Mapping[RecordMode, ModePolicy]] = {
    "none": ModePolicy(replays=True, records=False, reads_old=True, keeps="all"),
    "once": ModePolicy(replays=True, records=True, reads_old=True, keeps="all"),
    "new_episodes": ModePolicy(replays=True, records=True, reads_old=True, keeps="all"),
    "all": ModePolicy(replays=False, records=True, reads_old=True, keeps="not_rerecorded"),
    "rewrite": ModePolicy(replays=False, records=True, reads_old=False, keeps="none"),
}

Key = tuple[str, str, str, "str | bytes", int]
# A recorded reply: status, reason, headers, body text.
_Reply = tuple[int, str, tuple[tuple[str, str], ...], str]


# --------------------------------------------------------------------------- data types


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as sent, before scrubbing (the store scrubs when it records)."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    repeat: int = 0
    case_id: str | None = None


@dataclass(frozen=True, slots=True)
class RecordedResponse:
    """One reply; ``body`` is already decoded (no content-encoding left to undo)."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    reason: str = ""


class CassetteNote(UserWarning):
    """Something about the stored cassettes worth knowing that stops nothing."""


class CassetteMiss(CassetteError):
    """Replay found no recorded reply for a request and the mode forbids the network."""

    def __init__(
        self,
        test_id: str,
        entity_id: str,
        prompt: str,
        path: Path,
        *,
        mode: str = "none",
        request_line: str = "",
        repeat: int = 0,
        recorded: int | None = None,
    ) -> None:
        self.test_id = test_id
        self.entity_id = entity_id
        self.prompt = prompt
        self.path = path
        self.mode = mode
        self.request_line = request_line
        self.repeat = repeat
        self.recorded = recorded
        if recorded is None:
            state = "the cassette file does not exist"
        else:
            state = (
                f"the cassette holds {recorded} interaction(s), none valid and unplayed for "
                "this request"
            )
        shown = prompt if len(prompt) <= 300 else prompt[:297] + "..."
        where = f" ({request_line}, repeat {repeat})" if request_line else f" (repeat {repeat})"
        super().__init__(
            f"no recorded reply for test {test_id!r}, entity {entity_id!r}{where}: "
            f"prompt {shown!r}; cassette {path}: {state}; record mode is {mode!r}, "
            f"which does not call the network for it. To fix, {_RERECORD_HINT}."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments: rebuild explicitly so xdist can pickle the error.
        return (
            _rebuild_miss,
            (
                self.test_id,
                self.entity_id,
                self.prompt,
                self.path,
                self.mode,
                self.request_line,
                self.repeat,
                self.recorded,
            ),
        )


def _rebuild_miss(
    test_id: str,
    entity_id: str,
    prompt: str,
    path: Path,
    mode: str,
    request_line: str,
    repeat: int,
    recorded: int | None,
) -> CassetteMiss:
    return CassetteMiss(
        test_id,
        entity_id,
        prompt,
        path,
        mode=mode,
        request_line=request_line,
        repeat=repeat,
        recorded=recorded,
    )


# --------------------------------------------------------------------------- helpers

_UNSAFE = re.compile(r"[^a-z0-9._-]+")
_WINDOWS_RESERVED = frozenset(
    {"con", "prn", "aux", "nul"}
    | {f"com{i}" for i in range(1, 10)}
    | {f"lpt{i}" for i in range(1, 10)}
)
_MAX_NAME = 80


def sanitize_name(name: str) -> str:
    """A safe, stable, collision-free file name for ``name``.

    A name made only of lowercase ``[a-z0-9._-]`` (starting with a letter or digit) is
    kept as is. Anything else is lowercased, unsafe runs become ``_`` and ``~`` plus 12
    hex digits of the SHA-256 of the original is appended. ``~`` never occurs in a kept
    name, so a kept name cannot collide with a rewritten one, and lowercasing keeps
    case-insensitive file systems (macOS, Windows) from merging ``Nolan`` and ``nolan``.
    """
    if not isinstance(name, str):
        raise TypeError(f"cassette name must be a str, got {type(name).__name__}: {name!r}")
    safe = _UNSAFE.sub("_", name.lower())
    if (
        safe == name
        and name[:1].isalnum()
        and len(name) <= _MAX_NAME
        and name.split(".")[0] not in _WINDOWS_RESERVED
    ):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    # No leading dot (hidden file) and no trailing dot or space (Windows drops them).
    stem = safe.strip("._-")[:_MAX_NAME].rstrip("._-")
    return f"{stem}~{digest}"


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


def _text_of(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p if isinstance(p, str) else p.get("text") for p in content if isinstance(p, str | dict)
        ]
        texts = [p for p in parts if isinstance(p, str)]
        return "\n".join(texts) if texts else None
    return None


def prompt_of(body: bytes | str | None, case: object = None) -> str:
    """The user message of a chat request (OpenAI, Anthropic, Gemini shapes), for messages."""
    prompt = getattr(case, "prompt", None)
    if isinstance(prompt, str):
        return prompt
    raw = body.encode("utf-8") if isinstance(body, str) else (body or b"")
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return raw[:300].decode("utf-8", "replace")
    if isinstance(obj, dict):
        for field in ("messages", "contents"):
            turns = obj.get(field)
            if isinstance(turns, list):
                for turn in reversed(turns):
                    if isinstance(turn, dict) and turn.get("role", "user") == "user":
                        text = _text_of(turn.get("content", turn.get("parts")))
                        if text is not None:
                            return text
        for field in ("prompt", "input"):
            if isinstance(obj.get(field), str):
                return cast(str, obj[field])
    return raw[:300].decode("utf-8", "replace")


def _scrub_url(url: str) -> str:
    parts = urlsplit(url)
    if not parts.query:
        return url
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(k, v) for k, v in pairs if k.lower() not in SCRUBBED_QUERY_PARAMS]
    if len(kept) == len(pairs):
        return url
    return urlunsplit(parts._replace(query=urlencode(kept)))


def _header_map(headers: Iterable[tuple[str, str]], drop: frozenset[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in headers:
        if name.lower() in drop:
            continue
        out.setdefault(name, []).append(value)
    return out


def _decode_body(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CassetteError(
            f"cannot record {what}: the body is not UTF-8 text ({exc}); JSON cassettes hold "
            "text only. Point the audit at a text (JSON) endpoint."
        ) from None


def _first(headers: Mapping[str, Any], name: str) -> Any:
    for key, value in headers.items():
        if key.lower() == name:
            return value[0] if isinstance(value, list) and value else value
    return None


# --------------------------------------------------------------------------- the store


class _Tape:
    """The interactions of one entity's cassette file (shared by every test)."""

    __slots__ = (
        "canon",
        "cases",
        "dirty",
        "entries",
        "existed",
        "keys",
        "last",
        "legacy",
        "loaded",
        "new",
        "path",
        "played",
        "raw",
        "stale",
        "stamp",
        "tags",
    )

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stamp: tuple[int, int, int] | None = None  # the file as last read or written
        self.existed = False
        self.tags: list[str] = []  # the test name that recorded each entry ("" unknown)
        self.cases: list[str] = []  # the case id each entry was recorded for ("" unknown)
        self.stale = 0  # error replies of older versions: never replayed
        self.last = -1  # the position ``take`` served last
        self.legacy: list[Path] = []  # files of the old per-test layout read into this tape
        # Replay data as flat tuples of str/int: the garbage collector untracks those, so
        # 32,000 loaded interactions do not slow down every later collection (the parsed
        # JSON, ~25 lists and dicts per interaction, did: replay took 2x as long).
        self.entries: list[_Reply] = []
        self.keys: list[Key] = []  # the raw key of each entry
        # Parsed interactions, kept only when the file may be saved again (mode records).
        self.loaded: list[dict[str, Any]] = []
        self.new: list[dict[str, Any]] = []  # recorded in this run
        # Two indexes: key -> positions in ``entries``, in recorded order. ``raw`` keys on
        # the body exactly as stored, so a request sent by the same code matches without
        # parsing any JSON. ``canon`` keys on the canonical body and is built only when a
        # raw lookup misses (another JSON encoder, a scrubbed secret in the body).
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
    ) -> _Reply | None:
        """The first unplayed valid reply for ``key``, preferring those this test
        recorded (``tests``: its name, and its sanitised node id for per-test legacy
        folders) and among them the one recorded for this case (``case_id``).

        Each reply plays once per store (one store per test). One request asked by two
        cases of a test (a value phrase shared by two attributes) was asked twice while
        recording, the replies recorded in the order they came back: the case id gives
        each case its own reply, so replay scores what the recording pass scored.
        """
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


class CassetteStore:
    """Per-entity vcrpy cassettes shared by all tests, with an in-memory replay index.

    Modes (names as in vcrpy / pytest-recording):

    - ``none`` (default): replay only; a request without a recorded reply raises
      :class:`CassetteMiss`; the network is never used; nothing is written.
    - ``once``, ``new_episodes``: replay what is recorded, record what is missing (and
      only that), append it.
    - ``all``: never replay; record every request. Saved files keep earlier
      interactions that were not re-recorded.
    - ``rewrite``: never replay; record every request; the saved file holds only the
      interactions of this run (the old file is replaced).
    """

    def __init__(
        self,
        root: Path,
        mode: RecordMode = "none",
        *,
        secrets: Sequence[str] = (),
        autosave: float | None = 30.0,
        imports: Sequence[Path] = (),
        usage: set[tuple[str, Key]] | None = None,
        rewritten: set[Path] | None = None,
    ) -> None:
        if mode not in RECORD_MODES:
            raise ConfigError(
                f"record mode must be one of {', '.join(RECORD_MODES)}; got {mode!r}. "
                f"Pass e.g. {RECORD_OPTION}=none (replay only) or new_episodes."
            )
        if isinstance(root, str):
            root = Path(root)
        if not isinstance(root, Path):
            raise TypeError(f"root must be a pathlib.Path, got {type(root).__name__}: {root!r}")
        if autosave is not None and not (isinstance(autosave, int | float) and autosave >= 0):
            raise ConfigError(
                f"autosave must be a number of seconds >= 0 or None (save only on flush), "
                f"got {autosave!r}"
            )
        self.root = root
        self.mode: RecordMode = mode
        self.policy: ModePolicy = MODE_POLICIES[mode]
        # While recording, changed cassettes are saved at most this often, so an interrupted
        # (paid) recording run keeps nearly everything it already got.
        self.autosave = autosave
        self._last_save = time.monotonic()
        self._secrets: list[str] = []
        self._tapes: dict[str, _Tape] = {}
        # Cassettes recorded by vcrpy / pytest-recording: read (by vcrpy) on the first miss.
        self.imports = tuple(Path(p) for p in imports)
        self._foreign: _Tape | None = None
        self._legacy_dirs: tuple[Path, ...] | None = None  # listed once, on the first load
        # (file name, stored key) of every interaction replayed or recorded, for
        # pruning; None: not tracked (costs nothing).
        self.usage = usage
        # Files written by rewrite in this run, shared by the run's stores (one per test):
        # a later test that shares an entity keeps what earlier tests recorded into it.
        self.rewritten = rewritten
        self._lock = threading.RLock()
        self.add_secrets(secrets)

    # -- configuration

    def add_secrets(self, values: Iterable[str | None]) -> None:
        """Values (API keys) replaced by ``<filtered>`` anywhere in saved cassettes.

        None, empty and values shorter than 4 characters are ignored.
        """
        if isinstance(values, str):
            raise TypeError("add_secrets() takes a list of values, got one str; wrap it: [key]")
        with self._lock:
            for value in values:
                if not isinstance(value, str | None):
                    raise TypeError(
                        f"add_secrets() values must be str, got {type(value).__name__}; pass "
                        "the key strings themselves"
                    )
                # Unset key variables give None or "", and a value this short would corrupt
                # unrelated text if replaced everywhere (real API keys are far longer).
                if value is None or len(value.strip()) < _MIN_SECRET_LEN:
                    continue
                if value not in self._secrets:
                    self._secrets.append(value)
            # Longest first, so a secret containing another is replaced whole.
            self._secrets.sort(key=len, reverse=True)

    # -- layout

    def path_for(self, entity_id: str) -> Path:
        """``<root>/<sanitised entity id>.json``: the same file whichever test asks."""
        return self.root / f"{sanitize_name(entity_id)}.json"

    # -- replay

    def key(self, method: str, url: str, body: bytes, repeat: int) -> Key:
        """The match key: method, host (no port), path, canonical JSON body, repeat."""
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        return self._canon_key(method.upper(), host, parts.path or "/", body, repeat)

    def _canon_key(self, method: str, host: str, path: str, body: bytes | str, repeat: int) -> Key:
        canon = canonical_body(body)
        if self._secrets:
            canon = self._scrub_value(canon)
        return (method, host, path, canon, repeat)

    def lookup(
        self,
        test_id: str,
        entity_id: str,
        method: str,
        url: str,
        body: bytes | str,
        repeat: int,
        *,
        case_id: str | None = None,
    ) -> RecordedResponse | None:
        """The next unplayed recorded reply for this request (the one recorded for
        ``case_id`` first), or None (always in all/rewrite). ``body`` as sent, or its
        text already decoded."""
        if not self.policy.replays:
            return None
        head = _head(method, url)
        raw: str | bytes = body
        if isinstance(body, bytes):
            with contextlib.suppress(UnicodeDecodeError):
                raw = body.decode("utf-8")
        tests = _provenance(test_id)
        with self._lock:
            tape = self._tape(entity_id)
            reply = tape.take(tape.raw, (*head, raw, repeat), tests, case_id)
            if reply is None and tape.entries:
                reply = tape.take(
                    self._canon_index(tape), self._canon_key(*head, body, repeat), tests, case_id
                )
            if reply is not None and self.usage is not None:
                self.usage.add((tape.path.name, tape.keys[tape.last]))
            if reply is None and self.imports:
                foreign = self._foreign_tape()
                key = self._canon_key(*head, body, repeat)
                reply = foreign.take(self._canon_index(foreign), key, tests, case_id)
        if reply is None:
            return None
        status, reason, headers, text = reply
        return RecordedResponse(status, headers, text.encode("utf-8"), reason)

    def _canon_index(self, tape: _Tape) -> dict[Key, tuple[int, ...]]:
        # Built on the first raw miss only (another JSON encoder, a scrubbed secret).
        if tape.canon is None:
            canon: dict[Key, tuple[int, ...]] = {}
            for position, (m, host, path, stored, rep) in enumerate(tape.keys):
                if _valid(tape.entries[position][0]):
                    key = self._canon_key(m, host, path, stored, rep)
                    canon[key] = (*canon.get(key, ()), position)
            tape.canon = canon
        return tape.canon

    def _foreign_tape(self) -> _Tape:
        """Cassettes recorded by vcrpy / pytest-recording (``imports``), read by vcrpy once."""
        if self._foreign is None:
            tape = _Tape(self.root / "<vcrpy cassettes>")
            items: list[dict[str, Any]] = []
            for path in cassette_import.vcr_files(self.imports):
                items.extend(cassette_import.read_vcr(path))
            self._index(tape, items, records=False)
            self._foreign = tape
        return self._foreign

    def needs_network(self, test_id: str, entity_id: str) -> bool:
        """True when a miss (for any test and entity) is to be recorded from the network."""
        return self.policy.records

    def miss(
        self,
        test_id: str,
        entity_id: str,
        method: str,
        url: str,
        body: bytes | str,
        repeat: int,
        *,
        case: object = None,
    ) -> CassetteMiss:
        """The error to raise when ``lookup`` found nothing and the network is not allowed."""
        with self._lock:
            tape = self._tape(entity_id)
            recorded = len(tape.entries) if tape.existed else None
        parts = urlsplit(url)
        return CassetteMiss(
            test_id,
            entity_id,
            prompt_of(body, case),
            tape.path,
            mode=self.mode,
            request_line=f"{method.upper()} {parts.hostname or ''}{parts.path}",
            repeat=repeat,
            recorded=recorded,
        )

    def can_replay(self, test_id: str, entity_id: str) -> bool:
        """False when ``lookup`` cannot find anything for this entity: mode all/rewrite,
        or no interaction in its cassette file (recordings of this run are not replayed)."""
        if not self.policy.replays:
            return False
        with self._lock:
            return bool(self._tape(entity_id).entries)

    # -- recording

    def record(
        self,
        test_id: str,
        entity_id: str,
        request: RecordedRequest,
        response: RecordedResponse,
    ) -> None:
        """Keep one interaction (headers and query scrubbed now) for the next ``flush``.

        Only a valid (2xx) reply is kept: an error reply is not model output, and stored
        it would be replayed instead of asking again.
        """
        if not self.policy.records:
            raise CassetteError(
                f"cannot record test {test_id!r}, entity {entity_id!r}: record mode is "
                f"{self.mode!r} (replay only). Run with {RECORD_OPTION}=new_episodes or once "
                "to record."
            )
        if not _valid(response.status):
            return
        interaction = self._interaction(request, response, test_name(test_id))
        with self._lock:
            tape = self._tape(entity_id)
            if self.usage is not None:
                # the key as the saved file will hold it: secrets in the body scrubbed
                method, host, path, body, repeat = stored_key(interaction)
                saved = str(self._scrub_value(body))
                self.usage.add((tape.path.name, (method, host, path, saved, repeat)))
            tape.new.append(interaction)
            tape.dirty = True
            if self.autosave is not None and time.monotonic() - self._last_save >= self.autosave:
                self.flush()

    def flush(self) -> list[Path]:
        """Write every cassette changed since the last flush (atomically, scrubbed)."""
        written: list[Path] = []
        with self._lock:
            for tape in self._tapes.values():
                if not tape.dirty:
                    continue
                self._save(tape)
                written.append(tape.path)
            self._last_save = time.monotonic()
        return written

    def flush_entity(self, test_id: str, entity_id: str) -> Path | None:
        """Write this one cassette if it changed; its path, or None when nothing was due.

        For a caller that knows an entity is finished: its file is saved while the rest
        of the run goes on, instead of all files at the end.
        """
        with self._lock:
            tape = self._tapes.get(entity_id)
            if tape is None or not tape.dirty:
                return None
            self._save(tape)
            return tape.path

    def release(self, test_id: str, entity_ids: Iterable[str]) -> None:
        """Save (if changed) and forget these entities' cassettes: their audit is done.

        The audit streams entities through the store a chunk at a time, so its memory is
        bounded by one chunk's cassettes, not the whole recording.
        """
        with self._lock:
            for entity_id in entity_ids:
                tape = self._tapes.pop(entity_id, None)
                if tape is not None and tape.dirty:
                    self._save(tape)

    def migrate_legacy(self) -> list[Path]:
        """Move every cassette of the old per-test layout into the shared per-entity files.

        Each interaction keeps the sanitised node id of its old folder as provenance
        (``x-recfair-test``), so a test replays exactly what it replayed before.
        """
        dirs = cassette_import.legacy_dirs(self.root)
        names = sorted({p.name for d in dirs for p in d.glob("*.json")})
        with self._lock:
            for name in names:
                tape = _Tape(self.root / name)
                self._legacy_dirs = dirs
                self._load(tape, keep=True)
                self._save(tape)
        return [self.root / name for name in names]

    def __enter__(self) -> CassetteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()

    # -- internals

    def _tape(self, entity_id: str) -> _Tape:
        # Lazy: an entity's file is read on its first use, so a one-entity run reads one file.
        tape = self._tapes.get(entity_id)
        if tape is None:
            tape = _Tape(self.path_for(entity_id))
            # rewrite replaces the file, so the old one is never read (or validated),
            # unless this run wrote it: then it holds this run's recordings, kept as new.
            if self.policy.reads_old:
                self._load(tape)
            elif self.rewritten is not None and tape.path in self.rewritten:
                self._index(tape, self._read_native(tape.path), records=True)
                tape.new, tape.loaded = tape.loaded, []
            self._tapes[entity_id] = tape
        return tape

    def _save(self, tape: _Tape) -> None:
        with _directory_lock(tape.path.parent):
            items = self._to_save(tape)
            if self.policy.keeps != "none" and _stamp(tape.path) != tape.stamp:
                items += self._saved_by_others(tape, items)
            atomic_write_text(tape.path, self._serialize(items))
            tape.stamp = _stamp(tape.path)
        tape.dirty = False
        if self.rewritten is not None and not self.policy.reads_old:
            self.rewritten.add(tape.path)
        # The old per-test files of this entity are in the new file now: migrated.
        for old in tape.legacy:
            old.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                old.parent.rmdir()  # only when empty
        tape.legacy = []

    def _saved_by_others(self, tape: _Tape, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Interactions another process (an xdist worker recording into the same store)
        saved to this file since this store read it: kept, instead of last writer wins."""
        ours = {self._key_of_saved(item) for item in items}
        others = [
            item
            for item in self._read_native(tape.path)
            if _valid(item["response"]["status"]["code"]) and self._key_of_saved(item) not in ours
        ]
        tape.loaded.extend(others)
        return others

    def _load(self, tape: _Tape, *, keep: bool = False) -> None:
        """The entity's native file plus its files in the old per-test layout (via vcrpy)."""
        tape.stamp = _stamp(tape.path)  # before reading: a change after it is seen at save
        items = self._read_native(tape.path)
        if self._legacy_dirs is None:
            self._legacy_dirs = cassette_import.legacy_dirs(self.root)
        tape.legacy = [
            d / tape.path.name for d in self._legacy_dirs if (d / tape.path.name).is_file()
        ]
        for old in tape.legacy:
            for item in cassette_import.read_vcr(old):
                headers = item["request"]["headers"]
                # provenance: the old folder is the sanitised node id of the test
                headers.setdefault(TEST_HEADER, [old.parent.name])
                items.append(item)
        if tape.path.exists() or tape.legacy:
            self._index(tape, items, records=keep or self.policy.records)

    def _read_native(self, path: Path) -> list[dict[str, Any]]:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as exc:
            raise self._bad_file(path, f"cannot be read as UTF-8 text ({exc})") from None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise self._bad_file(path, f"is not valid JSON ({exc})") from None
        interactions = data.get("interactions") if isinstance(data, dict) else None
        if not isinstance(interactions, list):
            raise self._bad_file(
                path,
                'is not a vcrpy cassette (expected an object with an "interactions" list, '
                f"got {type(data).__name__}"
                + (f" with keys {sorted(data)[:5]}" if isinstance(data, dict) else "")
                + ")",
            )
        return interactions

    def _index(self, tape: _Tape, interactions: list[Any], *, records: bool) -> None:
        raw_index = tape.raw
        entries = tape.entries
        keys = tape.keys
        for number, item in enumerate(interactions):
            try:
                request = item["request"]
                response = item["response"]
                repeat = _repeat_of(request)
                method = request["method"]
                uri = request["uri"]
                status = response["status"]
                code = status["code"]
                reason = status.get("message") or ""
                resp_body = response["body"]["string"]
                headers = tuple(
                    (name, value)
                    for name, values in (response.get("headers") or {}).items()
                    for value in ([values] if isinstance(values, str) else values)
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
                key = (*_head(method, uri), body or "", repeat)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise self._bad_file(
                    tape.path,
                    f"has a malformed interaction #{number} ({type(exc).__name__}: {exc}); "
                    "each needs request.method/uri/body/headers and "
                    "response.status.code/headers/body.string",
                ) from None
            keys.append(key)
            entries.append((code, reason, headers, resp_body or ""))
            tape.tags.append(_header_value(request, TEST_HEADER))
            tape.cases.append(_header_value(request, CASE_HEADER))
            if _valid(code):
                raw_index[key] = (*raw_index.get(key, ()), number)
            else:
                tape.stale += 1
        if records:
            codes = [code for code, _, _, _ in entries]
            tape.loaded = [
                item for item, code in zip(interactions, codes, strict=True) if _valid(code)
            ]
        tape.played = bytearray(len(interactions))
        tape.existed = True
        if tape.stale:
            _note_stale(tape.path, tape.stale, self.policy.records)

    def _bad_file(self, path: Path, problem: str) -> CassetteError:
        return CassetteError(
            f"cassette {path} {problem}. Delete it and re-record with "
            f"{RECORD_OPTION}=once (or rewrite to re-record the whole test)."
        )

    def _interaction(
        self, request: RecordedRequest, response: RecordedResponse, test: str
    ) -> dict[str, Any]:
        req_headers = _header_map(request.headers, SCRUBBED_REQUEST_HEADERS)
        # vcrpy keeps one value per request header.
        req_headers_v = {name: values[:1] for name, values in req_headers.items()}
        req_headers_v[REPEAT_HEADER] = [str(request.repeat)]
        if test:
            req_headers_v[TEST_HEADER] = [test]
        if request.case_id is not None:
            req_headers_v[CASE_HEADER] = [request.case_id]
        resp_headers = _header_map(response.headers, SCRUBBED_RESPONSE_HEADERS)
        # The body is stored decoded, so the encoding header must go and the length fit.
        for name in list(resp_headers):
            low = name.lower()
            if low == "content-encoding":
                del resp_headers[name]
            elif low == "content-length":
                resp_headers[name] = [str(len(response.body))]
        return {
            "request": {
                "body": _decode_body(request.body, "the request") if request.body else None,
                "headers": req_headers_v,
                "method": request.method.upper(),
                "uri": _scrub_url(request.url),
            },
            "response": {
                "body": {"string": _decode_body(response.body, "the response")},
                "headers": resp_headers,
                "status": {"code": response.status, "message": response.reason},
            },
        }

    def _to_save(self, tape: _Tape) -> list[dict[str, Any]]:
        new = tape.new
        keeps = self.policy.keeps
        if keeps == "none":
            return new
        if keeps == "not_rerecorded":
            # Re-recorded requests replace their old interactions (vcrpy's "all" save).
            # Keys only here: canonicalising every body while recording would cost each
            # live request a JSON round trip that only this mode needs.
            fresh = {self._key_of_saved(item) for item in new}
            kept = [item for item in tape.loaded if self._key_of_saved(item) not in fresh]
            return kept + new
        return [*tape.loaded, *new]

    def _key_of_saved(self, item: Mapping[str, Any]) -> Key:
        request = item["request"]
        return self.key(
            request["method"], request["uri"], _body_bytes(request.get("body")), _repeat_of(request)
        )

    def _serialize(self, interactions: list[dict[str, Any]]) -> str:
        text = serialize(interactions)
        for secret in self._secrets:
            # The value itself, its JSON-escaped and its URL-encoded forms.
            for form in {
                secret,
                json.dumps(secret, ensure_ascii=False)[1:-1],
                json.dumps(secret)[1:-1],
                quote(secret, safe=""),
                quote_plus(secret, safe=""),
            }:
                text = text.replace(form, FILTERED)
        return text

    def _scrub_value(self, value: str | bytes) -> str | bytes:
        for secret in self._secrets:
            if isinstance(value, str):
                value = value.replace(secret, FILTERED)
            else:
                value = value.replace(secret.encode("utf-8"), FILTERED.encode("utf-8"))
        return value


def stored_key(item: Mapping[str, Any]) -> Key:
    """The key of a saved interaction as stored (body text unparsed), as ``_index`` keys it."""
    request = item["request"]
    parts = urlsplit(request["uri"])
    return (
        request["method"].upper(),
        (parts.hostname or "").lower(),
        parts.path or "/",
        request.get("body") or "",
        _repeat_of(request),
    )


def read_interactions(path: Path) -> list[dict[str, Any]]:
    """The interactions of a native cassette file (for pruning)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    interactions = data.get("interactions") if isinstance(data, dict) else None
    if not isinstance(interactions, list):
        raise CassetteError(f"cassette {path} is not a vcrpy cassette; delete it or fix it.")
    return interactions


def serialize(interactions: list[dict[str, Any]]) -> str:
    """A cassette file's text: one interaction per line (compact, diff-friendly)."""
    lines = ",\n".join(json.dumps(item, ensure_ascii=False) for item in interactions)
    if not interactions:
        return f'{{"interactions": [], "version": {CASSETTE_FORMAT_VERSION}}}\n'
    return f'{{"interactions": [\n{lines}\n], "version": {CASSETTE_FORMAT_VERSION}}}\n'


@functools.lru_cache(maxsize=64)
def _head(method: str, url: str) -> tuple[str, str, str]:
    # Per lookup otherwise: a replayed audit asks one URL tens of thousands of times.
    parts = urlsplit(url)
    return method.upper(), (parts.hostname or "").lower(), parts.path or "/"


@functools.lru_cache(maxsize=256)
def _provenance(test_id: str) -> tuple[str, str]:
    # Per lookup otherwise: sanitize_name hashes the id.
    return (test_name(test_id), sanitize_name(test_id))


def test_name(test_id: str) -> str:
    """The stable part of a pytest node id: the test's name (with its parameter id),
    not its file, so provenance survives moving the file."""
    return test_id.rsplit("::", 1)[-1]


def _valid(code: object) -> bool:
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


def _header_value(request: Mapping[str, Any], name: str) -> str:
    headers = request.get("headers") or {}
    # We write the header in lower case; other recorders may not.
    value = headers.get(name)
    if value is None:
        value = _first(headers, name)
    if isinstance(value, list):
        value = value[0] if value else ""
    return value if isinstance(value, str) else ""


def _repeat_of(request: Mapping[str, Any]) -> int:
    headers = request.get("headers") or {}
    # We write the header in lower case; other recorders may not.
    value = headers.get(REPEAT_HEADER) or _first(headers, REPEAT_HEADER)
    if isinstance(value, list):
        value = value[0] if value else 0
    return int(value or 0)


def _body_bytes(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    raise TypeError(f"request body must be a string or null, got {type(body).__name__}")


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """Identity of a file's current content (an atomic replace changes the inode)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


@contextlib.contextmanager
def _directory_lock(directory: Path) -> Iterator[None]:
    """Exclusive across processes (xdist workers saving into one store). POSIX flock on
    the directory itself, so no lock file is left among the cassettes; where there is no
    fcntl (Windows) saves are not serialised across processes."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
