"""A replayed audit served whole from a cache: no prompt built, no cassette read, nothing
parsed or scored again.

Replaying unchanged cassettes with unchanged settings and code gives the same scores on
every run. After a replay-only stream of the whole audit in which every entity was
replayed cleanly (no miss, no failed or retried prompt, no stale entry, no canonical
lookup), one memo entry (:mod:`pytest_recfair.replies.memo`, beside the cassettes) keeps
what a one-of-one shard would write (the kind's tally or replies, the prompts counted,
the runner's cost: :func:`~pytest_recfair.engine.base.shard_doc`) and what the
cassette store played of each entity; a second keeps the scores computed from it
(:class:`KeptScores`). A later run with the same key is the merge of that one shard: the
path that ``--fairness-merge`` takes and that merges exactly, so the result is the same
as the stream's.

The key is a digest of everything the stream's result depends on: the package's source
and data files, Python's and numpy's versions, the kind, the test id, every setting (but
those the plugin reads after the audit: update, report, explore, plan), the
provider's class and the request it would send for a probe prompt (the model and every
request-building parameter), the grid, the entities, the kind's inputs, the content of
the files the settings name, the prompts known to have failed, and every entity's
cassette content key (:func:`~pytest_recfair.cassettes.tapecache.digest`). An entry is
never stale (any change is another key) and the folder is safe to delete;
``RECFAIR_CACHE=off`` switches it off with the other replay caches. Not used for a
shard, recording modes, pruning, imported vcrpy cassettes or a provider (or judge) that
does not say what request it builds (``replay_key``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from pytest_recfair import packing
from pytest_recfair.cassettes import tapecache
from pytest_recfair.engine import base
from pytest_recfair.engine.base import (
    AuditKind,
    AuditRequest,
    Merged,
    Rebuild,
    Scored,
    Scorer,
    Sent,
)
from pytest_recfair.errors import RecfairError
from pytest_recfair.prompts.grids import Grid
from pytest_recfair.prompts.seeds import Entity
from pytest_recfair.replies import memo
from pytest_recfair.results import AttributeResult
from pytest_recfair.settings import AuditSettings
from pytest_recfair.settings.run import Shard

__all__ = ["KeptScores", "Recorder", "StreamKey", "key", "served"]

_FORMAT: Final = b"recfair-audit-replay-1"
#: The prompt whose request stands for the provider's request-building settings.
_PROBE: Final = "\0recfair-replay-probe"
#: Settings that name files whose content the prompts or scores depend on.
_FILE_SETTINGS: Final = (
    "seeds",
    "grid",
    "templates",
    "catalogue",
    "candidates",
    "questions",
    "absent",
)


@functools.cache
def _code_version() -> bytes:
    package = Path(__file__).resolve().parents[1]
    files = sorted(
        str(p.relative_to(package))
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )
    return memo.code_version(_FORMAT, files, np.__version__.encode())


class StreamKey:
    """The stream's cache key. Most of it is the cassettes' content (53 MB at paper scale:
    ~80 ms to read and hash). When a hit is possible it is computed at once, the files
    hashed in two threads; on a first run (an empty memo: nothing to look up) in a
    background thread while the audit streams, needed only to keep the result. Reading
    and hashing release the GIL, so either way it overlaps other work."""

    def __init__(self, compute: Callable[[int], bytes | None], now: bool) -> None:
        self.now = now  # computed up front: look it up
        self._value: Future[bytes | None] = Future()
        if now:
            self._value.set_result(compute(2))
            return
        pool = ThreadPoolExecutor(1, thread_name_prefix="recfair-key")
        self._value = pool.submit(compute, 1)
        pool.shutdown(wait=False)  # the thread ends with its one task

    def value(self) -> bytes | None:
        """The key (waits for the background thread); None: not served from this cache
        (a cassette could not be read)."""
        return self._value.result()


def key(
    request: AuditRequest, kind: AuditKind, grid: Grid, entities: Sequence[Entity]
) -> StreamKey | None:
    """The cache key of streaming ``request`` (every entity, replay only), or None when
    the audit is not served from this cache."""
    store, inputs = request.cassettes, request.inputs
    if store is None or request.shard is not None:
        return None
    models = [_identity(request.recommender)]
    if inputs.judge is not None:
        models.append(_identity(inputs.judge))
    if None in models:
        return None
    h = hashlib.blake2b(digest_size=20)
    for part in (
        kind.name,
        request.test_id,
        models,
        _stream_settings(request.settings),
        grid.digest,
        entities,
        _inputs(request),
        sorted(request.failed.items()),
    ):
        h.update(repr(part).encode("utf-8", "surrogatepass") + b"\0")
    _named_files(h, request)
    paths = []
    for entity in entities:
        path = store.unread_path(entity.id)
        if path is None:
            return None
        paths.append((entity.id.encode("utf-8", "surrogatepass") + b"\0", path))
    if paths:  # the memo beside the cassettes (one folder: the store's root)
        tapecache.use_for(paths[0][1])
    head = h.digest()

    def compute(workers: int) -> bytes | None:
        out = hashlib.blake2b(_code_version() + head, digest_size=20)
        for (name, _), digest in zip(
            paths, _file_keys([p for _, p in paths], workers), strict=True
        ):
            if digest is None:
                return None
            out.update(name + digest)
        return out.digest()

    return StreamKey(compute, now=memo.fine())


def _file_keys(paths: Sequence[Path], workers: int) -> Iterable[bytes | None]:
    if workers <= 1 or len(paths) < 64:
        return map(tapecache.file_key, paths)
    with ThreadPoolExecutor(workers, thread_name_prefix="recfair-key") as pool:
        return list(pool.map(tapecache.file_key, paths, chunksize=32))


def _stream_settings(settings: AuditSettings) -> AuditSettings:
    """The settings with those read only by the plugin after the audit (what to do with
    its result) reset: a ``--fairness-update`` run and the runs after it share entries."""
    return dataclasses.replace(
        settings, update=False, update_force=False, report=None, explore=False, plan=False
    )


def _identity(provider: object) -> tuple[str, tuple[str, str, str]] | None:
    """The provider's class and the request it would send for a probe prompt (its model
    and every request-building setting); None: it cannot say (not served from here)."""
    key_of = getattr(provider, "replay_key", None)
    probe = key_of(None, _PROBE) if key_of is not None else None
    if probe is None:
        return None
    cls = type(provider)
    return f"{cls.__module__}.{cls.__qualname__}", probe


def _inputs(request: AuditRequest) -> tuple[Any, ...]:
    inputs = request.inputs
    candidates = sorted(inputs.candidates.items()) if inputs.candidates else None
    return (inputs.catalogue, candidates, sorted(inputs.absent), inputs.where)


def _named_files(h: Any, request: AuditRequest) -> None:
    """The content of the files the settings name (resolved as the plugin resolves them:
    the test file's folder, then the rootdir), which a kind may read by name."""
    s = request.settings
    where = (*request.inputs.where, Path.cwd())
    for name in _FILE_SETTINGS:
        value = getattr(s, name, None)
        if not isinstance(value, str) or not value:
            continue
        for folder in where:
            path = folder / value
            try:
                h.update(name.encode() + b"\0" + path.read_bytes())
                break
            except OSError:
                continue


@dataclass
class Recorder:
    """What a stream under ``key`` did, kept when the whole audit was replayed cleanly."""

    key: StreamKey
    played: dict[str, tuple[list[int], int]] = field(default_factory=dict)
    clean: bool = True

    def chunk(self, request: AuditRequest, ids: Sequence[str], outcome: Any) -> None:
        """Note a chunk (before its cassettes are released): a failed or retried prompt,
        or an entity not replayed from the cassette cache, keeps the run from the cache."""
        if outcome.errors or outcome.retries or request.cassettes is None:
            self.clean = False
            return
        for entity in ids:
            got = request.cassettes.played(entity)
            if got is None:
                self.clean = False
                return
            self.played[entity] = got[1], got[2]

    def save(self, request: AuditRequest, scorer: Scorer, sent: Sent) -> bytes | None:
        """Keep the stream's result when it was clean; the key it was kept under."""
        key = self.key.value() if self.clean else None
        if key is None:
            return None
        try:
            doc = base.shard_doc(
                test_id=request.test_id,
                shard=Shard(1, 1),
                meta={},
                cost=sent.cost,
                packed=True,
                **scorer.payload(sent),
            )
            doc["played"] = {k: [v[0], v[1]] for k, v in self.played.items()}
            # marshal, not JSON text: json.dumps of a paper-scale tally built ~14 MB of
            # string pieces at the run's peak; marshal writes the bytes at once
            memo.store(key, doc, now=True)
        except (TypeError, ValueError):  # not plain data: this run is not kept
            return None
        return key


def served(key: bytes, request: AuditRequest, kind: AuditKind, rebuild: Rebuild) -> Merged | None:
    """The stream's scorer and counts kept under ``key`` (the store told what they
    played), or None: not kept, or not readable (the audit is streamed as usual)."""
    doc = memo.lookup(key)
    if not isinstance(doc, dict):
        return None
    try:
        played = {str(k): (list(map(int, v[0])), int(v[1])) for k, v in doc.pop("played").items()}
        part = base.shard_of_doc(doc, Path(str(memo.folder())))
        merged = kind.merge(request.settings, [part], rebuild)
    except (RecfairError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None  # another version's or a damaged entry: streamed, and kept anew
    store = request.cassettes
    if store is not None:
        for entity, (positions, last) in played.items():
            store.serve(entity, positions, last)
    return merged


class KeptScores:
    """A scorer whose :meth:`scored` is kept under the stream's key as well: the
    bootstrap intervals of unchanged scores are not drawn again (they depend on nothing
    but the scores and the settings, both in the key)."""

    def __init__(self, scorer: Scorer, key: bytes | None) -> None:
        self.scorer = scorer
        self.key = None if key is None else key + b"scored"

    def add(self, cases: Sequence[Any], outcome: Any) -> None:
        self.scorer.add(cases, outcome)

    def payload(self, sent: Sent) -> dict[str, Any]:
        return self.scorer.payload(sent)

    def scored(self) -> Scored:
        kept = None if self.key is None else _scored_of(memo.lookup(self.key))
        if kept is not None:
            return kept
        scored = self.scorer.scored()
        if self.key is not None:
            doc = {
                "attributes": [_packed(a) for a in scored.attributes],
                "merges": scored.merges,
                "extras": dict(scored.extras),
                "evidence": dict(scored.evidence),
            }
            with contextlib.suppress(TypeError, ValueError):  # not plain data: not kept
                memo.store(self.key, doc, now=True)
        return scored


def _packed(attribute: AttributeResult) -> dict[str, Any]:
    """``to_dict`` with the similarity matrix as the bytes of its arrays (marshal-able, a
    fraction of the memory of lists of floats; ``matrix_from_dict`` reads both)."""
    d = attribute.to_dict()
    matrix = attribute.matrix
    d["matrix"]["sims"] = packing.pack(matrix.sims, np.float64)
    d["matrix"]["missing"] = packing.pack(matrix.missing, np.bool_)
    return d


def _scored_of(doc: Any) -> Scored | None:
    if not isinstance(doc, dict):
        return None
    try:
        attributes = tuple(AttributeResult.from_dict(a) for a in doc["attributes"])
        return Scored(attributes, int(doc["merges"]), doc["extras"], doc["evidence"])
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None
