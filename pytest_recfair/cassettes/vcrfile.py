"""The cassette file format: vcrpy's (JSON serializer, format version 1), so vcrpy and
pytest-recording read the files; credential headers and query parameters are never
written. Older per-test cassettes and vcrpy's own are read through vcrpy's loader. And the
replay index of one file (:class:`Tape`). No httpx."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final, NamedTuple
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pytest_recfair import fileio
from pytest_recfair.cassettes import compact
from pytest_recfair.cassettes.miss import CassetteNote
from pytest_recfair.errors import CassetteError
from pytest_recfair.secrets import SECRET_HEADERS, SECRET_QUERY_PARAMS
from pytest_recfair.vocab import RECORD_OPTION

#: vcrpy's cassette format version (``vcr.serialize.CASSETTE_FORMAT_VERSION``).
CASSETTE_FORMAT_VERSION: Final = 1
REPEAT_HEADER: Final = "x-recfair-repeat"
CASE_HEADER: Final = "x-recfair-case"
#: The test name that recorded an interaction (provenance; see ``index.Tape.take``).
TEST_HEADER: Final = "x-recfair-test"

#: A request as replay matches it: method, host, path, body (canonical JSON text, or as
#: stored), repeat index.
Key = tuple[str, str, str, "str | bytes", int]


class RecordedRequest(NamedTuple):
    """One request as sent, before scrubbing (the store scrubs when it records)."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    repeat: int = 0
    case_id: str | None = None


class RecordedResponse(NamedTuple):
    """One reply; ``body`` is already decoded (no content-encoding left to undo). A
    named tuple: replay makes one per case, at a third of a frozen dataclass's cost."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    reason: str = ""


_UNSAFE = re.compile(r"[^a-z0-9._-]+")
_WINDOWS_RESERVED = frozenset(
    {"con", "prn", "aux", "nul"}
    | {f"com{i}" for i in range(1, 10)}
    | {f"lpt{i}" for i in range(1, 10)}
)
_MAX_NAME = 80


def sanitize_name(name: str) -> str:
    """A safe, stable, collision-free file name for ``name``: kept when already safe,
    else lowercased (case-insensitive file systems would merge ``Nolan`` and ``nolan``)
    with ``~`` and a SHA-256 prefix appended (``~`` never occurs in a kept name)."""
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


def interaction(request: RecordedRequest, response: RecordedResponse, test: str) -> dict[str, Any]:
    """One interaction as the file holds it, credential headers and query parameters
    dropped (the union list of :mod:`pytest_recfair.secrets`, on both sides)."""
    # vcrpy keeps one value per request header.
    req_headers = {name: values[:1] for name, values in _header_map(request.headers).items()}
    req_headers[REPEAT_HEADER] = [str(request.repeat)]
    if test:
        req_headers[TEST_HEADER] = [test]
    if request.case_id is not None:
        req_headers[CASE_HEADER] = [request.case_id]
    # The body is stored decoded, so the encoding header must go and the length fit.
    resp_headers = {
        name: [str(len(response.body))] if name.lower() == "content-length" else values
        for name, values in _header_map(response.headers).items()
        if name.lower() != "content-encoding"
    }
    return {
        "request": {
            "body": _decode_body(request.body, "the request") if request.body else None,
            "headers": req_headers,
            "method": request.method.upper(),
            "uri": _scrub_url(request.url),
        },
        "response": {
            "body": {"string": _decode_body(response.body, "the response")},
            "headers": resp_headers,
            "status": {"code": response.status, "message": response.reason},
        },
    }


def scrubbed(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` without the credential headers and query parameters of the one list, for
    interactions written before it grew (older versions dropped fewer names)."""
    out = dict(item)
    for side in ("request", "response"):
        part = item.get(side)
        if not isinstance(part, dict):
            return item
        part = out[side] = dict(part)
        headers = part.get("headers")
        if isinstance(headers, dict):
            part["headers"] = {
                k: v
                for k, v in headers.items()
                if not (isinstance(k, str) and k.lower() in SECRET_HEADERS)
            }
    uri = out["request"].get("uri")
    if isinstance(uri, str):
        out["request"]["uri"] = _scrub_url(uri)
    return out


def read_interactions(path: Path) -> list[dict[str, Any]]:
    """The interactions of a native cassette file ([] when there is none); a file that is
    not one raises CassetteError saying how to fix it."""
    try:
        data = fileio.loads(compact.read_text(path))
    except FileNotFoundError:
        return []
    except UnicodeDecodeError as exc:
        raise bad_file(path, f"cannot be read as UTF-8 text ({exc})") from None
    except ValueError as exc:
        raise bad_file(path, f"is not valid JSON ({exc})") from None
    except OSError as exc:  # unreadable, or a .json.gz that is not gzip
        raise bad_file(path, f"cannot be read ({exc})") from None
    interactions = data.get("interactions") if isinstance(data, dict) else None
    if not isinstance(interactions, list):
        raise bad_file(
            path,
            'is not a vcrpy cassette (expected an object with an "interactions" list, '
            f"got {type(data).__name__}"
            + (f" with keys {sorted(data)[:5]}" if isinstance(data, dict) else "")
            + ")",
        )
    return interactions


def bad_file(path: Path, problem: str) -> CassetteError:
    return CassetteError(
        f"cassette {path} {problem}. Delete it and re-record with "
        f"{RECORD_OPTION}=once (or rewrite to re-record the whole test)."
    )


def stored_key(item: Mapping[str, Any]) -> Key:
    """A saved interaction's key as :func:`index_tape` keys it (body text unparsed)."""
    request = item["request"]
    asked = head(request["method"], request["uri"])
    return (*asked, request.get("body") or "", repeat_of(request.get("headers") or {}))


def serialize(interactions: list[dict[str, Any]]) -> str:
    """A cassette file's text: one interaction per line (compact, diff-friendly)."""
    lines = ",\n".join(json.dumps(item, ensure_ascii=False) for item in interactions)
    lines = f"\n{lines}\n" if interactions else ""
    return f'{{"interactions": [{lines}], "version": {CASSETTE_FORMAT_VERSION}}}\n'


def _scrub_url(url: str) -> str:
    parts = urlsplit(url)
    if not parts.query:
        return url
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(k, v) for k, v in pairs if k.lower() not in SECRET_QUERY_PARAMS]
    if len(kept) == len(pairs):
        return url
    return urlunsplit(parts._replace(query=urlencode(kept)))


def _header_map(headers: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in headers:
        if name.lower() not in SECRET_HEADERS:
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


def header_value(headers: Mapping[str, Any], name: str) -> str:
    """Request header ``name`` of an interaction's ``headers`` ("" when absent)."""
    # We write the header in lower case; other recorders may not.
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    if isinstance(value, list):
        value = value[0] if value else ""
    return value if isinstance(value, str) else ""


def repeat_of(headers: Mapping[str, Any]) -> int:
    return int(header_value(headers, REPEAT_HEADER) or 0)


class CompactPersister:
    """A vcrpy persister (``VCR.register_persister``, ``serializer="json"``) that reads and
    writes ``.json.gz`` as the store does, anything else as vcrpy's own."""

    @classmethod
    def load_cassette(cls, cassette_path: str | Path, serializer: Any) -> Any:
        from vcr.persisters.filesystem import CassetteDecodeError, CassetteNotFoundError
        from vcr.serialize import deserialize

        path = Path(cassette_path)
        try:
            text = compact.read_text(path)
        except FileNotFoundError:
            raise CassetteNotFoundError() from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CassetteDecodeError(f"cannot read cassette {path}: {exc}") from None
        if not text.strip():
            raise CassetteNotFoundError()  # as vcrpy: an empty file is recorded again
        return deserialize(text, serializer)

    @staticmethod
    def save_cassette(cassette_path: str | Path, cassette_dict: Any, serializer: Any) -> None:
        from vcr.serialize import serialize

        compact.write(Path(cassette_path), serialize(cassette_dict, serializer))


def legacy_dirs(root: Path) -> tuple[Path, ...]:
    """The folders of the old per-test layout under ``root`` (``<root>/<test>/``)."""
    if not root.is_dir():
        return ()
    # Hidden folders are not tests' (.recfair_cache). The listing's own file types: a stat
    # per cassette took longer than the folders' reading.
    with os.scandir(root) as entries:
        names = [e.name for e in entries if not e.name.startswith(".") and e.is_dir()]
    return tuple(sorted(root / name for name in names))


def vcr_files(paths: tuple[Path, ...]) -> Iterator[Path]:
    """Every cassette file under ``paths`` (files as given; folders searched recursively)."""
    for path in paths:
        if path.is_dir():
            suffixes = (".json", ".yaml", ".yml", compact.COMPACT)  # read_vcr's serializers
            yield from sorted(p for p in path.rglob("*") if p.name.endswith(suffixes))
        elif path.is_file():
            yield path
        else:
            raise CassetteError(
                f"vcrpy cassette path {path} does not exist; fix recfair_vcr_cassettes (a "
                "list of cassette files or folders) or remove the entry."
            )


def read_vcr(path: Path) -> list[dict[str, Any]]:
    """The interactions of a vcrpy cassette, in the store's JSON form (text bodies)."""
    # Imported here: a run with only native cassettes never imports vcrpy.
    from vcr.filters import decode_response
    from vcr.persisters.filesystem import CassetteNotFoundError
    from vcr.serializers import jsonserializer, yamlserializer

    serializer = yamlserializer if path.suffix in (".yaml", ".yml") else jsonserializer
    try:
        loaded = CompactPersister.load_cassette(path, serializer)
    except CassetteNotFoundError:
        return []
    except Exception as exc:  # vcrpy raises ValueError, yaml and JSON errors alike
        raise CassetteError(
            f"cassette {path} cannot be read by vcrpy ({type(exc).__name__}: {exc}). "
            "Delete it and re-record, or remove it from recfair_vcr_cassettes."
        ) from None
    out = []
    for request, response in zip(loaded[0], map(decode_response, loaded[1]), strict=True):
        out.append(
            {
                "request": {
                    "body": _text(path, request.body) or None,
                    "headers": {k: [v] for k, v in request.headers.items()},
                    "method": request.method,
                    "uri": request.uri,
                },
                "response": {
                    "body": {"string": _text(path, response["body"].get("string"))},
                    "headers": {
                        k: [v] if isinstance(v, str) else list(v)
                        for k, v in (response.get("headers") or {}).items()
                    },
                    "status": response["status"],
                },
            }
        )
    return out


def _text(path: Path, data: Any) -> str:
    if data is None:
        return ""
    if isinstance(data, str):
        return data
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise CassetteError(
            f"cassette {path} holds a body that is not UTF-8 text; pytest-recfair replays "
            "JSON APIs only. Remove that interaction or the file."
        ) from None


# -- the replay index of one file: (method, host, path, body, repeat) -> positions, the
# body as stored; a canonical-JSON index is built only when that misses

#: A recorded reply: status, reason, headers, body text.
Reply = tuple[int, str, tuple[tuple[str, str], ...], str]


def canonical_body(body: bytes | str | None) -> str | bytes:
    """JSON bodies as sorted-key, whitespace-free text; any other body unchanged (bytes)."""
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
    seen: Any = None  # the last reply's headers as read: most replies of a file have the same
    for number, item in enumerate(interactions):
        try:
            request, response = item["request"], item["response"]
            req_headers = request.get("headers") or {}
            method, uri = request["method"], request["uri"]
            status = response["status"]
            code, reason = status["code"], status.get("message") or ""
            resp_body = response["body"]["string"]
            listed = response.get("headers") or {}
            # equal to the last (in order too): that tuple, checked then, kept once
            if fresh := listed != seen or (len(listed) > 1 and [*listed] != [*seen]):
                seen = listed
                headers = tuple(
                    [
                        (name, value)
                        for name, values in listed.items()
                        for value in ([values] if isinstance(values, str) else values)
                    ]
                )
            if (
                not isinstance(method, str)
                or not isinstance(uri, str)
                or not isinstance(code, int)
                or not isinstance(reason, str)
                or not (resp_body is None or isinstance(resp_body, str))  # no union built per item
                or (fresh and not all(isinstance(value, str) for _, value in headers))
            ):
                raise TypeError("wrong field type")
            body = request.get("body")
            if not (body is None or isinstance(body, str)):
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
        entries.append((code, reason, headers, resp_body or ""))
        tape.tags.append(header_value(req_headers, TEST_HEADER))
        tape.cases.append(header_value(req_headers, CASE_HEADER))
        if 200 <= code < 300:  # valid: code is an int
            found = raw_index.get(key)
            raw_index[key] = (number,) if found is None else (*found, number)
        else:
            tape.stale += 1
    if records:
        tape.loaded = [i for i, e in zip(interactions, entries, strict=True) if valid(e[0])]
    tape.played = bytearray(len(interactions))
    tape.existed = True
    if tape.stale:
        then = (
            "they are asked again and dropped from the file on save"
            if recording
            else f"record them with {RECORD_OPTION}=new_episodes"
        )
        count = tape.stale
        warnings.warn(
            CassetteNote(
                f"cassette {tape.path}: {count} stored error repl{'y' if count == 1 else 'ies'} "
                f"(HTTP 4xx from an older version) treated as not recorded; {then}."
            ),
            stacklevel=2,
        )


@functools.lru_cache(maxsize=64)
def head(method: str, url: str) -> tuple[str, str, str]:
    # Per lookup otherwise: a replayed audit asks one URL tens of thousands of times.
    parts = urlsplit(url)
    return method.upper(), (parts.hostname or "").lower(), parts.path or "/"


@functools.lru_cache(maxsize=256)
def provenance(test_id: str) -> tuple[str, str]:
    """The node id's test name (with its parameter id: provenance survives moving the file)
    and its old folder's name; cached, per lookup otherwise: sanitize_name hashes the id."""
    return (test_id.rsplit("::", 1)[-1], sanitize_name(test_id))


def valid(code: object) -> bool:
    # Only a 2xx reply is model output; older versions also stored 4xx replies.
    return isinstance(code, int) and 200 <= code < 300
