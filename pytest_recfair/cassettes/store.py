"""Record and replay recommender HTTP calls as vcrpy-format JSON cassettes: one per seed
entity, shared by every test (an interaction is found by what was asked, never by the
test). Replay serves from an index (:class:`.vcrfile.Tape`), not vcrpy; only valid (2xx)
replies replay."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_recfair import fileio
from pytest_recfair.cassettes.compact import (
    COMPACT,
    PLAIN,
    cassette_files,
    is_compact,
    plain_name,
    write,
)
from pytest_recfair.cassettes.miss import MODE_POLICIES, CassetteMiss, ModePolicy, prompt_of
from pytest_recfair.cassettes.vcrfile import (
    TEST_HEADER,
    Key,
    RecordedRequest,
    RecordedResponse,
    Reply,
    Tape,
    canonical_body,
    head,
    index_tape,
    interaction,
    legacy_dirs,
    provenance,
    read_interactions,
    read_vcr,
    sanitize_name,
    scrubbed,
    serialize,
    stored_key,
    valid,
    vcr_files,
)
from pytest_recfair.errors import CassetteError, ConfigError
from pytest_recfair.secrets import FILTERED, MIN_CASSETTE_SECRET_CHARS, forms, is_secret_value
from pytest_recfair.vocab import RECORD_MODES, RECORD_OPTION, RecordMode

#: (case id, key, reply) of one recorded interaction.
RecordedEntry = tuple[str, Key, Reply]


class CassetteStore:
    """Per-entity vcrpy cassettes shared by all tests, with an in-memory replay index;
    what each record mode does is its row in ``miss.MODE_POLICIES``."""

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
        compact: bool | None = None,
    ) -> None:
        if mode not in RECORD_MODES:
            raise ConfigError(
                f"record mode must be one of {', '.join(RECORD_MODES)}; got {mode!r}. "
                f"Pass e.g. {RECORD_OPTION}=none (replay only) or new_episodes."
            )
        root = Path(root) if isinstance(root, str) else root
        if not isinstance(root, Path):
            raise TypeError(f"root must be a pathlib.Path, got {type(root).__name__}: {root!r}")
        if autosave is not None and not (isinstance(autosave, int | float) and autosave >= 0):
            raise ConfigError(
                f"autosave must be a number of seconds >= 0 or None (save only on flush), "
                f"got {autosave!r}"
            )
        self.root, self.mode = root, mode
        self.policy: ModePolicy = MODE_POLICIES[mode]
        # Changed cassettes saved at most this often: an interrupted (paid) recording run
        # keeps nearly everything it already got.
        self.autosave = autosave
        self._last_save = time.monotonic()
        self._secrets: list[str] = []
        self._tapes: dict[str, Tape] = {}
        # Cassettes recorded by vcrpy / pytest-recording: read (by vcrpy) on the first miss.
        self.imports = tuple(Path(p) for p in imports)
        self._foreign: Tape | None = None
        self._paths: dict[str, Path] = {}  # kept when nothing records (no file appears)
        # Entities served from the replay pass's cache: positions played, for a later load
        self._served: dict[str, tuple[list[int], int]] = {}
        # (file name, stored key) of every interaction replayed or recorded, for pruning
        self.usage = usage
        # Files written by rewrite in this run, shared by its stores (one per test): a later
        # test sharing an entity keeps what earlier tests recorded into it.
        self.rewritten = rewritten
        self._lock = threading.RLock()
        # New files: compact (.json.gz), plain, or None: compact when the folder holds one
        self.compact = compact
        self.add_secrets(secrets)
        fileio.remove_stale_temps(root)  # a killed run's cassettes, never renamed into place

    def add_secrets(self, values: Iterable[str | None]) -> None:
        """Values (API keys) replaced by ``<filtered>`` anywhere in saved cassettes; under
        ``MIN_CASSETTE_SECRET_CHARS`` (4) characters, None or empty: ignored."""
        if isinstance(values, str):
            raise TypeError("add_secrets() takes a list of values, got one str; wrap it: [key]")
        with self._lock:
            for value in values:
                if not isinstance(value, str | None):
                    raise TypeError(
                        f"add_secrets() values must be str, got {type(value).__name__}; pass "
                        "the key strings themselves"
                    )
                # None / "" (unset variables) or too short to replace everywhere safely
                if not is_secret_value(value, minimum=MIN_CASSETTE_SECRET_CHARS):
                    continue
                if value not in self._secrets:
                    self._secrets.append(value)
            # Longest first, so a secret containing another is replaced whole.
            self._secrets.sort(key=len, reverse=True)

    def path_for(self, entity_id: str) -> Path:
        """``<root>/<sanitised entity id>.json`` or ``.json.gz``: an existing file keeps its
        format (compact when both exist: a conversion was interrupted)."""
        if entity_id in self._paths:
            return self._paths[entity_id]
        name = sanitize_name(entity_id)
        packed, plain = self.root / f"{name}{COMPACT}", self.root / f"{name}{PLAIN}"
        path = packed if packed.is_file() else plain if plain.is_file() else None
        if path is None:
            if self.compact is None:
                self.compact = any(is_compact(p) for p in cassette_files(self.root))
            path = packed if self.compact else plain
        if not self.policy.records:
            self._paths[entity_id] = path
        return path

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
        """The next unplayed recorded reply for this request (``case_id``'s first), or None
        (always in all/rewrite). ``body`` as sent, or its text already decoded."""
        reply = self.reply(test_id, entity_id, method, url, body, repeat, case_id)
        if reply is None:
            return None
        status, reason, headers, text = reply
        return RecordedResponse(status, headers, text.encode("utf-8"), reason)

    def reply(
        self,
        test_id: str,
        entity_id: str,
        method: str,
        url: str,
        body: bytes | str,
        repeat: int,
        case_id: str | None,
    ) -> Reply | None:
        """``lookup``'s reply as the index holds it (the replay pass parses its text)."""
        if not self.policy.replays:
            return None
        asked = head(method, url)
        raw: str | bytes = body
        if isinstance(body, bytes):
            with contextlib.suppress(UnicodeDecodeError):
                raw = body.decode("utf-8")
        tests = provenance(test_id)
        with self._lock:
            tape = self._tape(entity_id)
            reply = tape.take(tape.raw, (*asked, raw, repeat), tests, case_id)
            if reply is None and (tape.entries or self.imports):
                key = self._canon_key(*asked, body, repeat)  # built once, for both indexes
                if tape.entries:
                    reply = tape.take(self._canon_index(tape), key, tests, case_id)
                if reply is None and self.imports:
                    if self._foreign is None:  # read by vcrpy once
                        foreign = Tape(self.root / "<vcrpy cassettes>")
                        items = [i for path in vcr_files(self.imports) for i in read_vcr(path)]
                        index_tape(foreign, items, records=False, recording=self.policy.records)
                        self._foreign = foreign
                    return self._foreign.take(self._canon_index(self._foreign), key, tests, case_id)
            if reply is not None and self.usage is not None:
                self.usage.add((tape.path.name, tape.keys[tape.last]))
        return reply

    def _canon_index(self, tape: Tape) -> dict[Key, tuple[int, ...]]:
        # Built on the first raw miss only (another JSON encoder, a scrubbed secret)
        if tape.canon is None:
            canon: dict[Key, tuple[int, ...]] = {}
            for position, (m, host, path, stored, rep) in enumerate(tape.keys):
                if valid(tape.entries[position][0]):
                    key = self._canon_key(m, host, path, stored, rep)
                    canon[key] = (*canon.get(key, ()), position)
            tape.canon = canon
        return tape.canon

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
            count = len(tape.entries) if tape.existed else None  # None: no file
        verb, host, url = head(method, url)
        prompt, line = prompt_of(body, case), f"{verb} {host}{url}"
        return CassetteMiss(test_id, entity_id, prompt, tape.path, self.mode, line, repeat, count)

    def recorded(self, entity_id: str, case_id: str | None = None) -> list[RecordedEntry]:
        """(case id, key, reply) of each valid interaction in the entity's cassette, in
        recorded order; with ``case_id`` only that prompt's (vcrpy interception may now play
        them: kept by a prune)."""
        with self._lock:
            tape = self._tape(entity_id)
            entries = zip(tape.cases, tape.keys, tape.entries, strict=True)
            found = [e for e in entries if valid(e[2][0]) and case_id in (None, e[0])]
            if case_id is not None and self.usage is not None:
                self.usage.update((tape.path.name, key) for _, key, _ in found)
        return found

    def can_replay(self, test_id: str, entity_id: str) -> bool:
        """False when ``lookup`` cannot find anything for this entity: mode all/rewrite,
        or no interaction in its cassette file (recordings of this run are not replayed)."""
        if not self.policy.replays:
            return False
        with self._lock:
            return bool(self._tape(entity_id).entries)

    def unread_path(self, entity_id: str) -> Path | None:
        """The entity's cassette when nothing of it was read yet and a replay from a cache
        (engine/replaymemo.py) would be exact (no recording, pruning, imports, old layout)."""
        policy = self.policy
        if policy.records or not policy.replays or self.usage is not None or self.imports:
            return None
        if entity_id in self._tapes or entity_id in self._served:
            return None
        path = self.path_for(entity_id)
        if self._legacy_dirs and any((d / plain_name(path)).is_file() for d in self._legacy_dirs):
            return None
        return path

    def played(self, entity_id: str) -> tuple[list[int], int] | None:
        """(positions played, the last one) of an entity served whole or replayed from a
        tape without stale entries or a canonical lookup; else None. Asked before release."""
        served = self._served.get(entity_id)
        if served is not None:
            return list(served[0]), served[1]
        tape = self._tapes.get(entity_id)
        if tape is None or tape.stale or tape.canon is not None:
            return None
        return [p for p, done in enumerate(tape.played) if done], tape.last

    def serve(self, played: Mapping[str, tuple[list[int], int]]) -> None:
        """entity -> (positions, last): replies served elsewhere (a cache, another process)."""
        self._served.update((e, (list(at), last)) for e, (at, last) in played.items())

    def record(
        self, test_id: str, entity_id: str, request: RecordedRequest, response: RecordedResponse
    ) -> None:
        """Keep one interaction (headers and query scrubbed now) for the next ``flush``;
        only a valid (2xx) reply: an error is not model output, and would replay forever."""
        if not self.policy.records:
            raise CassetteError(
                f"cannot record test {test_id!r}, entity {entity_id!r}: record mode is "
                f"{self.mode!r} (replay only). Run with {RECORD_OPTION}=new_episodes or once "
                "to record."
            )
        if not valid(response.status):
            return
        item = interaction(request, response, provenance(test_id)[0])
        with self._lock:
            tape = self._tape(entity_id)
            if self.usage is not None:
                # the key as the saved file will hold it: secrets in the body scrubbed
                method, host, path, body, repeat = stored_key(item)
                saved = str(self._scrub_value(body))
                self.usage.add((tape.path.name, (method, host, path, saved, repeat)))
            tape.new.append(item)
            tape.dirty = True
            if self.autosave is not None and time.monotonic() - self._last_save >= self.autosave:
                self.flush()

    def flush(self) -> list[Path]:
        """Write every cassette changed since the last flush (atomically, scrubbed)."""
        with self._lock:
            dirty = [tape for tape in self._tapes.values() if tape.dirty]
            for tape in dirty:
                self._save(tape)
            self._last_save = time.monotonic()
        return [tape.path for tape in dirty]

    def flush_entity(self, test_id: str, entity_id: str) -> Path | None:
        """Write this (finished) entity's cassette if it changed: its path, else None."""
        with self._lock:
            tape = self._tapes.get(entity_id)
            if tape is None or not tape.dirty:
                return None
            self._save(tape)
            return tape.path

    def release(self, test_id: str, entity_ids: Iterable[str]) -> None:
        """Save (if changed) and forget these entities' cassettes: their audit is done, so
        the store holds one chunk's cassettes, not the whole recording."""
        with self._lock:
            for entity_id in entity_ids:
                tape = self._tapes.pop(entity_id, None)
                if tape is not None and tape.dirty:
                    self._save(tape)

    def migrate_legacy(self) -> list[Path]:
        """Move every cassette of the old per-test layout into the shared per-entity files,
        each interaction with its old folder (the test's node id) as provenance."""
        with self._lock:
            self._legacy_dirs = dirs = legacy_dirs(self.root)
            names = sorted({p.name for d in dirs for p in d.glob("*.json")})
            for name in names:
                tape = Tape(self.root / name)
                self._load(tape, keep=True)
                self._save(tape)
        return [self.root / name for name in names]

    def __enter__(self) -> CassetteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()

    @functools.cached_property
    def _legacy_dirs(self) -> tuple[Path, ...]:
        return legacy_dirs(self.root)  # listed once, on the first load

    def _tape(self, entity_id: str) -> Tape:
        # Lazy: an entity's file is read on its first use, so a one-entity run reads one file.
        tape = self._tapes.get(entity_id)
        if tape is None:
            tape = Tape(self.path_for(entity_id))
            # rewrite replaces the file, so the old one is never read (or validated),
            # unless this run wrote it: then it holds this run's recordings, kept as new.
            if self.policy.reads_old:
                self._load(tape)
            elif self.rewritten is not None and tape.path in self.rewritten:
                index_tape(
                    tape, read_interactions(tape.path), records=True, recording=self.policy.records
                )
                tape.new, tape.loaded = tape.loaded, []
            served = self._served.pop(entity_id, None)
            if served is not None and len(tape.played) > max(served[0], default=-1):
                for position in served[0]:
                    tape.played[position] = 1
                tape.last = served[1]
            self._tapes[entity_id] = tape
        return tape

    def _save(self, tape: Tape) -> None:
        keeps = self.policy.keeps
        with _directory_lock(tape.path.parent):
            if keeps == "not_rerecorded":
                # Re-recorded requests replace their old interactions (vcrpy's "all" save).
                # Keys only here: canonicalising every body while recording would cost each
                # live request a JSON round trip that only this mode needs.
                fresh = {self._key_of_saved(item) for item in tape.new}
                items = [i for i in tape.loaded if self._key_of_saved(i) not in fresh] + tape.new
            else:
                items = tape.new if keeps == "none" else [*tape.loaded, *tape.new]
            if keeps != "none" and _stamp(tape.path) != tape.stamp:
                # another process (an xdist worker) saved to this file since it was read:
                # its interactions kept, instead of last writer wins
                ours = {self._key_of_saved(item) for item in items}
                others = [
                    item
                    for item in read_interactions(tape.path)
                    if valid(item["response"]["status"]["code"])
                    and self._key_of_saved(item) not in ours
                ]
                tape.loaded.extend(others)
                items += others
            # Written with the one credential list, also what older versions stored; then each
            # secret value itself, its JSON-escaped and its URL-encoded forms replaced.
            text = serialize([scrubbed(item) for item in items])
            for form in (form for secret in self._secrets for form in forms(secret)):
                text = text.replace(form, FILTERED)
            write(tape.path, text)
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

    def _load(self, tape: Tape, *, keep: bool = False) -> None:
        """The entity's native file plus its files in the old per-test layout (via vcrpy)."""
        tape.stamp = _stamp(tape.path)  # before reading: a change after it is seen at save
        name = plain_name(tape.path)  # the old layout wrote .json only
        tape.legacy = [d / name for d in self._legacy_dirs if (d / name).is_file()]
        items = read_interactions(tape.path)
        for old in tape.legacy:
            for item in read_vcr(old):
                headers = item["request"]["headers"]
                # provenance: the old folder is the sanitised node id of the test
                headers.setdefault(TEST_HEADER, [old.parent.name])
                items.append(item)
        if tape.stamp is not None or tape.legacy:  # the file was there when read
            index_tape(
                tape, items, records=keep or self.policy.records, recording=self.policy.records
            )

    def _key_of_saved(self, item: Mapping[str, Any]) -> Key:
        return self._canon_key(*stored_key(item))

    def _scrub_value(self, value: str | bytes) -> str | bytes:
        for secret in self._secrets:
            if isinstance(value, str):
                value = value.replace(secret, FILTERED)
            else:
                value = value.replace(secret.encode("utf-8"), FILTERED.encode("utf-8"))
        return value


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """Identity of a file's current content (an atomic replace changes the inode)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


@contextlib.contextmanager
def _directory_lock(directory: Path) -> Iterator[None]:
    """Exclusive across processes (xdist workers saving into one store): flock on the
    directory itself, so no lock file is left; without fcntl (Windows) not serialised."""
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
