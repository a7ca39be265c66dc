"""Record and replay recommender HTTP calls as vcrpy-format JSON cassettes.

Layout: one cassette per (test, seed entity), ``<root>/<test>/<entity>.json``, because
vcrpy scans a cassette linearly per request and a single 32,000-interaction file per
audit would take hours to replay. Files are plain vcrpy cassettes (JSON serializer,
format version 1), so ``vcr.VCR(serializer="json")`` and pytest-recording can read them.

Replay does not go through vcrpy: each file is loaded once into an index
``(method, host, path, canonical JSON body, repeat) -> deque of responses`` that the
httpx transport in ``pytest_recfair.providers.transport`` serves from. Two different
prompts never share a key; identical requests (entropy repeats) are told apart by the
repeat index, stored in the cassette as the request header ``x-recfair-repeat``.

This module is pure (no httpx): the transport converts httpx objects to and from
:class:`RecordedRequest` / :class:`RecordedResponse`. It is also the only module allowed
to import vcrpy, which it does not need at run time.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, cast
from urllib.parse import parse_qsl, quote, quote_plus, urlencode, urlsplit, urlunsplit

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
    "CassetteStore",
    "ModePolicy",
    "RecordMode",
    "RecordedRequest",
    "RecordedResponse",
    "canonical_body",
    "prompt_of",
    "sanitize_name",
]

from pytest_recfair.kinds import RECORD_MODES, RECORD_OPTION, RecordMode

#: vcrpy's cassette format version (``vcr.serialize.CASSETTE_FORMAT_VERSION``).
CASSETTE_FORMAT_VERSION: Final = 1
REPEAT_HEADER: Final = "x-recfair-repeat"
CASE_HEADER: Final = "x-recfair-case"
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
    f"re-record with {RECORD_OPTION}=new_episodes (keeps the recorded replies and adds "
    f"the missing ones) or delete the file and run with {RECORD_OPTION}=once"
)
_MIN_SECRET_LEN = 4


@dataclass(frozen=True, slots=True)
class ModePolicy:
    """What one record mode does; the store and the runner ask this, never the name."""

    #: Recorded replies are served (False: every request is recorded afresh).
    replays: bool
    #: A request without a recorded reply goes to the network: "never", only for an
    #: entity whose cassette file does not exist yet ("new_files"), or "always".
    network: Literal["never", "new_files", "always"]
    #: The old file is read (False: it is replaced unread).
    reads_old: bool
    #: Old interactions kept on save: all of them, those not re-recorded, or none.
    keeps: Literal["all", "not_rerecorded", "none"]

    @property
    def records(self) -> bool:
        """New interactions may be recorded and saved."""
        return self.network != "never"


#: One row per mode (same meaning as vcrpy / pytest-recording); a new mode is one row.
MODE_POLICIES: Final[Mapping[RecordMode, ModePolicy]] = {
    "none": ModePolicy(replays=True, network="never", reads_old=True, keeps="all"),
    "once": ModePolicy(replays=True, network="new_files", reads_old=True, keeps="all"),
    "new_episodes": ModePolicy(replays=True, network="always", reads_old=True, keeps="all"),
    "all": ModePolicy(replays=False, network="always", reads_old=True, keeps="not_rerecorded"),
    "rewrite": ModePolicy(replays=False, network="always", reads_old=False, keeps="none"),
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
            state = f"the cassette holds {recorded} interaction(s), none unplayed for this request"
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
    """The interactions of one (test, entity) cassette file."""

    __slots__ = (
        "canon",
        "dirty",
        "entries",
        "existed",
        "keys",
        "loaded",
        "new",
        "path",
        "played",
        "raw",
    )

    def __init__(self, path: Path) -> None:
        self.path = path
        self.existed = False
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

    def take(self, index: dict[Key, tuple[int, ...]], key: Key) -> _Reply | None:
        for position in index.get(key, ()):
            if not self.played[position]:
                self.played[position] = 1
                return self.entries[position]
        return None


class CassetteStore:
    """Per-(test, entity) vcrpy cassettes with an in-memory replay index.

    Modes (same meaning as vcrpy / pytest-recording):

    - ``none`` (default): replay only; a request without a recorded reply raises
      :class:`CassetteMiss`; the network is never used; nothing is written.
    - ``once``: an entity whose cassette exists is replayed only (a miss raises); an
      entity without one is recorded from the network and saved.
    - ``new_episodes``: replay what is recorded, record what is missing, append it.
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
        self._tapes: dict[tuple[str, str], _Tape] = {}
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

    def path_for(self, test_id: str, entity_id: str) -> Path:
        """``<root>/<sanitised test id>/<sanitised entity id>.json``."""
        return self.root / sanitize_name(test_id) / f"{sanitize_name(entity_id)}.json"

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
        self, test_id: str, entity_id: str, method: str, url: str, body: bytes, repeat: int
    ) -> RecordedResponse | None:
        """The next unplayed recorded reply for this request, or None (always in all/rewrite)."""
        if not self.policy.replays:
            return None
        parts = urlsplit(url)
        head = (method.upper(), (parts.hostname or "").lower(), parts.path or "/")
        try:
            raw: str | bytes = body.decode("utf-8")
        except UnicodeDecodeError:
            raw = body
        with self._lock:
            tape = self._tape(test_id, entity_id)
            reply = tape.take(tape.raw, (*head, raw, repeat))
            if reply is None and tape.entries:
                if tape.canon is None:
                    canon: dict[Key, tuple[int, ...]] = {}
                    for position, (m, host, path, stored, rep) in enumerate(tape.keys):
                        key = self._canon_key(m, host, path, stored, rep)
                        canon[key] = (*canon.get(key, ()), position)
                    tape.canon = canon
                reply = tape.take(tape.canon, self._canon_key(*head, body, repeat))
        if reply is None:
            return None
        status, reason, headers, text = reply
        return RecordedResponse(status, headers, text.encode("utf-8"), reason)

    def needs_network(self, test_id: str, entity_id: str) -> bool:
        """True when a miss for this entity is to be recorded from the network."""
        if self.policy.network == "new_files":
            with self._lock:
                return not self._tape(test_id, entity_id).existed
        return self.policy.network == "always"

    def miss(
        self,
        test_id: str,
        entity_id: str,
        method: str,
        url: str,
        body: bytes,
        repeat: int,
        *,
        case: object = None,
    ) -> CassetteMiss:
        """The error to raise when ``lookup`` found nothing and the network is not allowed."""
        with self._lock:
            tape = self._tape(test_id, entity_id)
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
            return bool(self._tape(test_id, entity_id).entries)

    # -- recording

    def record(
        self,
        test_id: str,
        entity_id: str,
        request: RecordedRequest,
        response: RecordedResponse,
    ) -> None:
        """Keep one interaction (headers and query scrubbed now) for the next ``flush``."""
        if not self.policy.records:
            raise CassetteError(
                f"cannot record test {test_id!r}, entity {entity_id!r}: record mode is "
                f"{self.mode!r} (replay only). Run with {RECORD_OPTION}=new_episodes or once "
                "to record."
            )
        interaction = self._interaction(request, response)
        with self._lock:
            tape = self._tape(test_id, entity_id)
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
                atomic_write_text(tape.path, self._serialize(self._to_save(tape)))
                tape.dirty = False
                written.append(tape.path)
            self._last_save = time.monotonic()
        return written

    def flush_entity(self, test_id: str, entity_id: str) -> Path | None:
        """Write this one cassette if it changed; its path, or None when nothing was due.

        For a caller that knows an entity is finished: its file is saved while the rest
        of the run goes on, instead of all files at the end.
        """
        with self._lock:
            tape = self._tapes.get((test_id, entity_id))
            if tape is None or not tape.dirty:
                return None
            atomic_write_text(tape.path, self._serialize(self._to_save(tape)))
            tape.dirty = False
            return tape.path

    def release(self, test_id: str, entity_ids: Iterable[str]) -> None:
        """Save (if changed) and forget these entities' cassettes: their audit is done.

        The audit streams entities through the store a chunk at a time, so its memory is
        bounded by one chunk's cassettes, not the whole recording.
        """
        with self._lock:
            for entity_id in entity_ids:
                tape = self._tapes.pop((test_id, entity_id), None)
                if tape is not None and tape.dirty:
                    atomic_write_text(tape.path, self._serialize(self._to_save(tape)))

    def __enter__(self) -> CassetteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()

    # -- internals

    def _tape(self, test_id: str, entity_id: str) -> _Tape:
        # Lazy: an entity's file is read on its first use, so a one-entity run reads one file.
        tape = self._tapes.get((test_id, entity_id))
        if tape is None:
            tape = _Tape(self.path_for(test_id, entity_id))
            # rewrite replaces the file, so the old one is never read (or validated).
            if self.policy.reads_old:
                self._load(tape)
            self._tapes[(test_id, entity_id)] = tape
        return tape

    def _load(self, tape: _Tape) -> None:
        try:
            text = tape.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as exc:
            raise self._bad_file(tape.path, f"cannot be read as UTF-8 text ({exc})") from None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise self._bad_file(tape.path, f"is not valid JSON ({exc})") from None
        interactions = data.get("interactions") if isinstance(data, dict) else None
        if not isinstance(interactions, list):
            raise self._bad_file(
                tape.path,
                'is not a vcrpy cassette (expected an object with an "interactions" list, '
                f"got {type(data).__name__}"
                + (f" with keys {sorted(data)[:5]}" if isinstance(data, dict) else "")
                + ")",
            )
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
                parts = urlsplit(uri)
                body = request.get("body")
                if not isinstance(body, str | None):
                    raise TypeError(f"request body must be a string or null, got {body!r:.40}")
                key = (
                    method.upper(),
                    (parts.hostname or "").lower(),
                    parts.path or "/",
                    body or "",
                    repeat,
                )
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise self._bad_file(
                    tape.path,
                    f"has a malformed interaction #{number} ({type(exc).__name__}: {exc}); "
                    "each needs request.method/uri/body/headers and "
                    "response.status.code/headers/body.string",
                ) from None
            raw_index[key] = (*raw_index.get(key, ()), number)
            keys.append(key)
            entries.append((code, reason, headers, resp_body or ""))
        if self.policy.records:
            tape.loaded = interactions
        tape.played = bytearray(len(interactions))
        tape.existed = True

    def _bad_file(self, path: Path, problem: str) -> CassetteError:
        return CassetteError(
            f"cassette {path} {problem}. Delete it and re-record with "
            f"{RECORD_OPTION}=once (or rewrite to re-record the whole test)."
        )

    def _interaction(self, request: RecordedRequest, response: RecordedResponse) -> dict[str, Any]:
        req_headers = _header_map(request.headers, SCRUBBED_REQUEST_HEADERS)
        # vcrpy keeps one value per request header.
        req_headers_v = {name: values[:1] for name, values in req_headers.items()}
        req_headers_v[REPEAT_HEADER] = [str(request.repeat)]
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
        # One interaction per line: compact (fast to load) yet diff-friendly in git.
        lines = ",\n".join(json.dumps(item, ensure_ascii=False) for item in interactions)
        text = (
            f'{{"interactions": [\n{lines}\n], "version": {CASSETTE_FORMAT_VERSION}}}\n'
            if interactions
            else f'{{"interactions": [], "version": {CASSETTE_FORMAT_VERSION}}}\n'
        )
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
