"""A replayed audit served whole from the content store, kept after a clean replay (no
miss, failure or retry); the key digests everything the result depends on, so a hit is the
exact merge of a 1/1 shard. Not for shards or recording; ``RECFAIR_CACHE=off`` disables it."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

import numpy as np

from pytest_recfair.cassettes import cache, compact
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.engine.base import (
    AuditKind,
    AuditRequest,
    Merged,
    Rebuild,
    Scored,
    Scorer,
    Sent,
    shard_doc,
    shard_of_doc,
)
from pytest_recfair.errors import RecfairError
from pytest_recfair.prompts.grids import Grid
from pytest_recfair.prompts.seeds import Entity
from pytest_recfair.results import AttributeResult, pack_array
from pytest_recfair.settings import AuditSettings
from pytest_recfair.settings.values import Shard

_AUDIT: Final = b"audit"
_SCORED: Final = b"scored"
#: The prompt whose request stands for the provider's request-building settings.
_PROBE: Final = "\0recfair-replay-probe"


def prompts_digest(kind: AuditKind, built: Iterable[Sequence[Any]]) -> bytes:
    """The digest of the cases the kind built (the caller picks which)."""
    h = hashlib.blake2b(kind.name.encode(), digest_size=20)
    for cases in built:
        for case in cases:
            h.update(repr(case).encode("utf-8", "surrogatepass") + b"\0")
    return h.digest()


class StreamKey:
    """The key, mostly the cassettes' content (53 MB at paper scale: ~80 ms to hash, GIL
    released): in two threads when a hit is possible, else in the background."""

    def __init__(self, head: bytes, paths: Sequence[Path], now: bool) -> None:
        self.now = now  # a hit is possible: look it up
        self._head = head
        pool = ThreadPoolExecutor(1, thread_name_prefix="recfair-key")
        self._files: Future[bytes | None] = pool.submit(_files_digest, paths, 2 if now else 1)
        pool.shutdown(wait=False)  # the thread ends with its one task

    def value(self) -> bytes | None:
        """The key (waits for the background thread); None: a cassette could not be read."""
        files = self._files.result()
        if files is None:
            return None
        return hashlib.blake2b(self._head + files, digest_size=20).digest()


def key(
    request: AuditRequest,
    kind: AuditKind,
    grid: Grid,
    entities: Sequence[Entity],
    built: Callable[[], Iterable[Sequence[Any]]],
) -> StreamKey | None:
    """The cache key of streaming ``request``, or None when not served from this cache."""
    if cache.off() or (paths := exact_replay(request, entities)) is None:
        return None
    store = cast(CassetteStore, request.cassettes)
    models = [_identity(p) for p in (request.recommender, request.inputs.judge) if p is not None]
    h = hashlib.blake2b(cache.code_version(), digest_size=20)
    inputs = request.inputs  # by content: what was read is in the key, not the folders
    candidates = sorted(inputs.candidates.items()) if inputs.candidates else None
    for part in (
        kind.name,
        request.test_id,
        models,
        _stream_settings(request.settings),
        grid.digest,
        entities,
        (inputs.catalogue, candidates, sorted(inputs.absent)),
        sorted(request.failed.items()),
    ):
        h.update(repr(part).encode("utf-8", "surrogatepass") + b"\0")
    h.update(prompts_digest(kind, built()))
    cache.use(store.root / cache.CACHE_DIR)
    return StreamKey(h.digest(), paths, now=cache.warm())


def exact_replay(request: AuditRequest, entities: Sequence[Entity]) -> list[Path] | None:
    """The entities' cassettes when the audit replays only them (built-in providers; no shard,
    recording, pruning, imports, old layout): exact from a cache or in another process."""
    store, judge = request.cassettes, request.inputs.judge
    if store is None or request.shard is not None or not store.root.is_dir():
        return None  # (no cassette folder: a replay misses, and no folder is created)
    if _identity(request.recommender) is None or (judge is not None and _identity(judge) is None):
        return None
    paths = [store.unread_path(entity.id) for entity in entities]
    return None if None in paths else cast(list[Path], paths)


def _files_digest(paths: Sequence[Path], workers: int) -> bytes | None:
    """The digest of the cassettes' names and bytes (None: one is unreadable)."""
    h = hashlib.blake2b(digest_size=20)
    if workers <= 1 or len(paths) < 64:
        digests: Iterable[bytes | None] = map(_file_digest, paths)
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="recfair-key") as pool:
            digests = list(pool.map(_file_digest, paths, chunksize=32))
    for path, digest in zip(paths, digests, strict=True):
        if digest is None:
            return None
        h.update(path.name.encode("utf-8", "surrogatepass") + b"\0" + digest)
    return h.digest()


def _file_digest(path: Path) -> bytes | None:
    """The digest of cassette ``path``'s format and bytes (None: unreadable); thread-safe."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    h = hashlib.blake2b(b"gz" if compact.is_compact(path) else b"json", digest_size=20)
    h.update(data)
    return h.digest()


def _stream_settings(settings: AuditSettings) -> AuditSettings:
    """Settings read only after the audit reset: an update run and later runs share entries."""
    return dataclasses.replace(
        settings, update=False, update_force=False, report=None, explore=False, plan=False
    )


def _identity(provider: object) -> tuple[str, tuple[str, str, str]] | None:
    """The provider's class and its request for a probe prompt (None: it cannot say)."""
    key_of = getattr(provider, "replay_key", None)
    probe = key_of(None, _PROBE) if key_of is not None else None
    if probe is None:
        return None
    cls = type(provider)
    return f"{cls.__module__}.{cls.__qualname__}", probe


@dataclass
class Recorder:
    """What a stream under ``key`` played, kept when the whole audit replayed cleanly."""

    key: StreamKey
    played: dict[str, tuple[list[int], int]] = field(default_factory=dict)
    clean: bool = True

    def chunk(self, request: AuditRequest, ids: Sequence[str], outcome: Any) -> None:
        """Note a chunk before its cassettes are released; a failure, retry or miss: not kept."""
        if outcome.errors or outcome.retries or request.cassettes is None:
            self.clean = False
            return
        for entity in ids:
            got = request.cassettes.played(entity)
            if got is None:
                self.clean = False
                return
            self.played[entity] = got

    def save(self, request: AuditRequest, scorer: Scorer, sent: Sent) -> bytes | None:
        """Keep the stream's result when it was clean; the key it was kept under."""
        key = self.key.value() if self.clean else None
        if key is None:
            return None
        try:
            doc = shard_doc(test_id=request.test_id, shard=Shard(1, 1), meta={}, cost=sent.cost,
                            packed=True, **scorer.payload(sent))  # fmt: skip
            doc["played"] = {k: [v[0], v[1]] for k, v in self.played.items()}
            # marshal, not JSON text: json.dumps of a paper-scale tally built ~14 MB of
            # string pieces at the run's peak; marshal writes the bytes at once
            cache.put(_AUDIT, key, doc)
        except (TypeError, ValueError):  # not plain data: this run is not kept
            return None
        return key


def served(key: bytes, request: AuditRequest, kind: AuditKind, rebuild: Rebuild) -> Merged | None:
    """The stream's scorer and counts kept under ``key``, or None (then streamed as usual)."""
    doc = cache.get(_AUDIT, key)
    if not isinstance(doc, dict):
        return None
    try:
        played = {str(k): (list(map(int, v[0])), int(v[1])) for k, v in doc.pop("played").items()}
        part = shard_of_doc(doc, Path(str(cache.folder())))
        merged = kind.merge(request.settings, [part], rebuild)
    except (RecfairError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None  # another version's or a damaged entry: streamed, and kept anew
    if request.cassettes is not None:
        request.cassettes.serve(played)
    return merged


def scored(scorer: Scorer, key: bytes | None) -> Scored:
    """The scorer's results, kept under ``key``: bootstrap intervals are not drawn again."""
    kept = None if key is None else cache.get(_SCORED, key)
    if isinstance(kept, dict):  # else not kept, or another version's or a damaged entry
        with contextlib.suppress(ValueError, TypeError, KeyError, IndexError, AttributeError):
            attributes = tuple(AttributeResult.from_dict(a) for a in kept["attributes"])
            return Scored(attributes, int(kept["merges"]), kept["extras"], kept["evidence"])
    done = scorer.scored()
    if key is not None:
        doc = {"attributes": [_packed(a) for a in done.attributes], "merges": done.merges,
               "extras": dict(done.extras), "evidence": dict(done.evidence)}  # fmt: skip
        with contextlib.suppress(TypeError, ValueError):  # not plain data: not kept
            cache.put(_SCORED, key, doc)
    return done


def _packed(attribute: AttributeResult) -> dict[str, Any]:
    """``to_dict`` with the matrix as its arrays' bytes (a fraction of lists' memory)."""
    d, m = attribute.to_dict(), attribute.matrix
    d["matrix"] |= {
        "sims": pack_array(m.sims, np.float64),
        "missing": pack_array(m.missing, np.bool_),
    }
    return d
