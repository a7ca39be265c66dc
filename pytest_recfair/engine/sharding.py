"""``--fairness-shard=I/N`` and ``--fairness-merge``: one audit across several CI jobs.

Shard I of N audits the entities at positions I-1, I-1+N, I-1+2N ... of the audit's
entity list (after subsampling): the shards are disjoint, together they are the whole
list, and each gets a near-equal share. A shard run (:func:`run_shard`) streams its share
through the kind's scorer and writes what the scorer's ``payload`` holds with the whole
audit's metadata and the runner's cost: a tally (matrix rows of its entities plus exact
sums, see :mod:`pytest_recfair.engine.overlap.tally`) for the list-overlap kind, or the
share's replies (``{"completions": {case id: reply}, "errors": {case id: error}}``) for
kinds that score across entities. A merge run (:class:`MergeSource`) checks that shards
1..N of one audit are all there with the same settings and asks the kind to merge them
(:func:`merge_results` unites tallies; :func:`replay` feeds the united replies through
the kind's scorer), so the merged numbers are those of the unsharded run with the same
bootstrap seed, without any recommender.

No pytest here.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pytest_recfair.engine import pipeline, registry, stream
from pytest_recfair.engine.base import (
    AuditInputs,
    AuditKind,
    AuditRequest,
    Merged,
    Rebuild,
    Scorer,
    Sent,
    Shard,
    select,
    shard_positions,
)
from pytest_recfair.engine.overlap.tally import Tally, merge
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.fileio import atomic_write_text
from pytest_recfair.prompts.grids import Grid
from pytest_recfair.prompts.seeds import Entity
from pytest_recfair.results import AuditMeta, AuditResult
from pytest_recfair.settings import AuditSettings

if TYPE_CHECKING:
    from pytest_recfair.providers import Completion

__all__ = [
    "SHARD_FORMAT",
    "KindInputs",
    "MergeSource",
    "Shard",
    "ShardResult",
    "ShardWritten",
    "collect",
    "load_shard",
    "merge_replies",
    "merge_results",
    "parse_shard",
    "replay",
    "run_shard",
    "select",
    "shard_path",
    "shard_positions",
    "write_shard",
]

SHARD_FORMAT: Final = "pytest-recfair-shard"
SHARD_VERSION: Final = 1
# metadata that may differ between the shards of one audit (merged separately)
_PER_SHARD_META: Final = frozenset({"model", "record_mode", "plugin_version"})
_SHARD_RE = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


def parse_shard(text: str, *, source: str = "--fairness-shard") -> Shard:
    """``"2/4"`` -> Shard(2, 4), with a one-line error naming ``source`` otherwise."""
    match = _SHARD_RE.fullmatch(str(text))
    if match is None:
        raise ConfigError(
            f"{source}: expected I/N with 1 <= I <= N (e.g. 2/4 for the second of four CI "
            f"jobs), got {text!r}."
        )
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= index <= count:
        raise ConfigError(
            f"{source}: expected I/N with 1 <= I <= N, got {text!r}; shards are numbered "
            f"1..{max(count, 1)}."
        )
    return Shard(index, count)


@dataclass(frozen=True)
class ShardResult:
    """One shard's output: which audit, which shard, its metadata and its tally (list
    overlap) or its replies (other kinds of audit)."""

    path: Path
    test_id: str
    shard: Shard
    meta: dict[str, Any]
    tally: Tally | None
    replies: dict[str, dict[str, Any]] | None = None
    #: list overlap: {"cases": prompts of the shard, "failed": [FailedPrompt fields]}
    failures: dict[str, Any] | None = None
    cost: float | None = None  # the runner's cost of the shard's prompts (None: unpriced)


def shard_path(root: Path, test_id: str, shard: Shard) -> Path:
    """``<root>/<test name>-<hash>.shard-I-of-N.json``: stable and safe on every OS."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", test_id.rsplit("::", 1)[-1])[:60] or "test"
    digest = hashlib.blake2b(test_id.encode("utf-8"), digest_size=5).hexdigest()
    return root / f"{slug}-{digest}.shard-{shard.index}-of-{shard.count}.json"


def write_shard(path: Path, doc: Mapping[str, Any]) -> None:
    """Write one shard's result (:func:`shard_doc`) atomically: a reader never sees half
    a file."""
    atomic_write_text(path, json.dumps(doc, separators=(",", ":"), allow_nan=False) + "\n")


def shard_doc(
    *,
    test_id: str,
    shard: Shard,
    meta: Mapping[str, Any],
    tally: Tally | None = None,
    replies: Mapping[str, Mapping[str, Any]] | None = None,
    failures: Mapping[str, Any] | None = None,
    cost: float | None = None,
    packed: bool = False,
) -> dict[str, Any]:
    """One shard's result as the JSON document a shard file holds (``packed``: the
    tally's similarity rows as bytes, for the replay cache; not JSON)."""
    doc: dict[str, Any] = {
        "format": SHARD_FORMAT,
        "version": SHARD_VERSION,
        "test_id": test_id,
        "shard": {"index": shard.index, "count": shard.count},
        "meta": dict(meta),
    }
    if cost is not None:
        doc["cost"] = cost
    if tally is not None:
        doc["tally"] = tally.to_dict(packed=packed)
        if failures is not None:
            doc["failures"] = dict(failures)
    else:
        doc["replies"] = {k: dict(v) for k, v in (replies or {}).items()}
    return doc


def load_shard(path: Path) -> ShardResult:
    """Read one shard file; DataError naming the file for anything that is not one."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(
            f"shard result {path}: cannot be read as JSON ({exc}); re-run that shard."
        ) from None
    if not isinstance(doc, dict) or doc.get("format") != SHARD_FORMAT:
        raise DataError(
            f'shard result {path}: not a pytest-recfair shard file (no "format": '
            f"{SHARD_FORMAT!r}); give the JSON files written by --fairness-shard=I/N."
        )
    if doc.get("version") != SHARD_VERSION:
        raise DataError(
            f"shard result {path}: format version {doc.get('version')!r}, this plugin "
            f"reads {SHARD_VERSION}; re-run the shards with this version."
        )
    return shard_of_doc(doc, path)


def shard_of_doc(doc: dict[str, Any], path: Path) -> ShardResult:
    """The ShardResult of a shard document (DataError naming ``path`` when malformed)."""
    try:
        info = doc["shard"]
        shard = parse_shard(f"{info['index']}/{info['count']}", source=str(path))
        tally = Tally.from_dict(doc["tally"]) if "replies" not in doc else None
        replies = None if tally is not None else _replies(doc["replies"])
        failures = _failures(doc.get("failures"))
        cost = None if doc.get("cost") is None else float(doc["cost"])
        meta = dict(doc["meta"])
        return ShardResult(path, str(doc["test_id"]), shard, meta, tally, replies, failures, cost)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise DataError(
            f"shard result {path}: malformed ({type(exc).__name__}: {exc}); re-run that shard."
        ) from None


def _replies(value: Any) -> dict[str, dict[str, Any]]:
    """The replies part of a shard file: completions and errors, each keyed by case id."""
    if not isinstance(value, dict) or set(value) != {"completions", "errors"}:
        raise ValueError('"replies" holds "completions" and "errors"')
    if not all(isinstance(v, dict) for v in value.values()):
        raise TypeError('"completions" and "errors" are objects keyed by case id')
    for case_id, reply in value["completions"].items():
        if not isinstance(reply, dict) or not isinstance(reply.get("text"), str):
            raise ValueError(f"the reply to case {case_id} has no text string")
    return {"completions": dict(value["completions"]), "errors": dict(value["errors"])}


def _failures(value: Any) -> dict[str, Any] | None:
    """The failures part of a list-overlap shard file (absent: none were counted)."""
    if value is None:
        return None
    cases, failed = int(value["cases"]), list(value["failed"])
    if not all(isinstance(f, dict) for f in failed):
        raise TypeError('"failures" lists one object per failed prompt')
    return {"cases": cases, "failed": failed}


def collect(
    paths: Iterable[Path], skipped: list[str] | None = None
) -> dict[str, list[ShardResult]]:
    """Shard results by test id, from files and directories (searched for *.json; the
    files passed over are named in ``skipped``, with why)."""
    found: dict[str, list[ShardResult]] = {}
    for given in paths:
        if given.is_dir():
            every = sorted(given.rglob("*.json"))
            files = [p for p in every if _is_shard_file(p)]
            if skipped is not None:
                skipped.extend(_why_not_shard(p) for p in every if p not in files)
        elif given.is_file():
            files = [given]
        else:
            raise ConfigError(
                f"--fairness-merge: {given} does not exist; give shard JSON files or the "
                "directories the shard jobs wrote them to."
            )
        for file in files:
            result = load_shard(file)
            found.setdefault(result.test_id, []).append(result)
    return found


_FORMAT_RE = re.compile(rb'"format"\s*:\s*"' + re.escape(SHARD_FORMAT.encode()) + rb'"')


def _is_shard_file(path: Path) -> bool:
    """A shard file, also re-indented (its "format" key within the first 4 KiB)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return _FORMAT_RE.search(head) is not None


def _why_not_shard(path: Path) -> str:
    """Why a .json file in a merge directory was passed over, for the error that follows."""
    try:
        size = path.stat().st_size
        head = path.read_bytes()[:4096] if size else b""
    except OSError as exc:
        return f"{path.name} (unreadable: {exc.strerror or exc})"
    if not size:
        return f"{path.name} (empty)"
    if head.lstrip()[:1] not in (b"{", b"["):
        return f"{path.name} (not JSON)"
    return f'{path.name} (no "format": "{SHARD_FORMAT}")'


def merge_results(results: Sequence[ShardResult]) -> tuple[dict[str, Any], Tally]:
    """The metadata and tally of the whole audit from its shards 1..N (each once)."""
    meta = _merged_meta(results)
    tallies = [r.tally for r in results if r.tally is not None]
    if len(tallies) != len(results):
        raise DataError(_mixed(results))
    tally = merge(tallies)
    models = {str(r.meta.get("model")) for r in results}
    meta["model"] = models.pop() if len(models) == 1 else ",".join(sorted(tally.models))
    return meta, tally


def merge_replies(results: Sequence[ShardResult]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The metadata and the united replies (completions, errors) of a kind's audit whose
    shards wrote replies; the shards' entities are disjoint, so no case id repeats."""
    meta = _merged_meta(results)
    parts = [r.replies for r in results if r.replies is not None]
    if len(parts) != len(results):
        raise DataError(_mixed(results))
    completions: dict[str, Any] = {}
    errors: dict[str, Any] = {}
    for part in parts:
        completions.update(part["completions"])
        errors.update(part["errors"])
    models = {str(r.meta.get("model")) for r in results}
    meta["model"] = models.pop() if len(models) == 1 else ",".join(sorted(models))
    return meta, {"completions": completions, "errors": errors}


def _mixed(results: Sequence[ShardResult]) -> str:
    where = ", ".join(str(r.path) for r in results)
    return (
        f"--fairness-merge: the shards of {results[0].test_id} hold different kinds of "
        f"result (files {where}); re-run all shards with the same plugin version and options."
    )


def _merged_meta(results: Sequence[ShardResult]) -> dict[str, Any]:
    """The audit's metadata once shards 1..N are each there once with the same settings."""
    first = results[0]
    test_id, count = first.test_id, first.shard.count
    where = ", ".join(str(r.path) for r in results)
    if any(r.shard.count != count for r in results):
        raise DataError(
            f"--fairness-merge: the shards of {test_id} were split different ways "
            f"({sorted({str(r.shard) for r in results})}; files {where}); merge one run's shards."
        )
    seen = sorted(r.shard.index for r in results)
    if seen != list(range(1, count + 1)):
        missing = sorted(set(range(1, count + 1)) - set(seen))
        twice = sorted({i for i in seen if seen.count(i) > 1})
        raise DataError(
            f"--fairness-merge: {test_id} needs shards 1..{count} once each; "
            + (f"missing {', '.join(f'{i}/{count}' for i in missing)}" if missing else "")
            + ("; " if missing and twice else "")
            + (f"given twice {', '.join(f'{i}/{count}' for i in twice)}" if twice else "")
            + f" (files {where})."
        )
    models = sorted({str(r.meta.get("model")) for r in results})
    if len(models) > 1:
        raise DataError(
            f"--fairness-merge: the shards of {test_id} audited different models "
            f"({', '.join(models)}; files {where}); merge the shards of one model's run."
        )
    key = {k: v for k, v in first.meta.items() if k not in _PER_SHARD_META}
    for r in results[1:]:
        other = {k: v for k, v in r.meta.items() if k not in _PER_SHARD_META}
        if other != key:
            diff = sorted(k for k in set(key) | set(other) if key.get(k) != other.get(k))
            raise DataError(
                f"--fairness-merge: shard {r.shard} of {test_id} ({r.path}) audited with other "
                f"settings than shard {first.shard} ({', '.join(diff)} differ); re-run all shards "
                "with the same options."
            )
    return dict(first.meta)


# --- shard and merge runs -------------------------------------------------------------

#: What a merge needs to rebuild a kind's prompts: seeds, grid and the kind's inputs.
KindInputs = Callable[[], tuple[Sequence[Entity], Grid, AuditInputs]]


@dataclass(frozen=True)
class ShardWritten:
    path: Path
    scored: int  # entities this shard scored
    total: int  # entities of the whole audit


def run_shard(request: AuditRequest, root: Path) -> ShardWritten:
    """Score ``request.shard``'s share of the entities and write its result under ``root``;
    too many failed prompts stop the shard job, as they would stop the whole run."""
    shard = request.shard
    if shard is None:
        raise ValueError("run_shard: the request names no shard")
    run = pipeline.run(request)
    pipeline.check_failures(request.settings, request.test_id, run.sent)
    path = shard_path(root, request.test_id, shard)
    doc = shard_doc(
        test_id=request.test_id,
        shard=shard,
        meta=run.meta.to_dict(),
        cost=run.sent.cost,
        **run.scorer.payload(run.sent),
    )
    write_shard(path, doc)
    return ShardWritten(path, len(select(run.entities, shard)), len(run.entities))


@dataclass
class MergeSource:
    """The shard results given to ``--fairness-merge``, read once on first use."""

    paths: tuple[Path, ...]
    found: dict[str, list[ShardResult]] | None = None
    used: set[str] = field(default_factory=set)
    skipped: list[str] = field(default_factory=list)  # .json files that are no shard

    def result(self, settings: AuditSettings, test_id: str, kind_inputs: KindInputs) -> AuditResult:
        """The merged (ungated) AuditResult of ``test_id``; ``kind_inputs`` is called
        only by kinds whose merge rebuilds the prompts."""
        if self.found is None:
            self.found = collect(self.paths, self.skipped)
        parts = self.found.get(test_id)
        where = ", ".join(str(p) for p in self.paths)
        if not parts:
            raise DataError(
                f"--fairness-merge: no shard result for {test_id} in {where}; run "
                f"`pytest --fairness --fairness-shard=I/N` for I = 1..N first and give "
                f"the files (or their directories) they wrote.{self._skipped_note()}"
            )
        kind = registry.select(settings)
        files = ", ".join(str(p.path) for p in parts)
        try:
            merged = kind.merge(settings, parts, _rebuild(settings, kind, test_id, kind_inputs))
            meta = AuditMeta.from_dict(merged.meta)
        except DataError as exc:
            raise DataError(f"{exc}{self._skipped_note()}") from None
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise DataError(
                f"--fairness-merge: the shards of {test_id} ({files}) hold malformed data "
                f"({type(exc).__name__}: {exc}); expected the files --fairness-shard writes: "
                "re-run those shards."
            ) from None
        _check_settings(settings, meta, files)
        if meta.seed != settings.seed:
            raise ConfigError(
                f"--fairness-merge: the shards of {test_id} ran with --fairness-seed="
                f"{meta.seed}, this run has {settings.seed}; merge with the shards' seed "
                "(it also seeds the bootstrap)."
            )
        self.used.add(test_id)
        result = pipeline.finish(settings, meta, merged.scorer, merged.sent)
        names = [a.attribute for a in result.attributes]
        if settings.attr is not None and names and not any(settings.attr in n for n in names):
            raise ConfigError(
                f"--fairness-merge: {test_id} now audits attr={settings.attr!r}, its shards "
                f"({files}) scored {', '.join(sorted(set(names)))}; re-run the shards."
            )
        return result

    def _skipped_note(self) -> str:
        if not self.skipped:
            return ""
        return f" Passed over, not shard files: {', '.join(self.skipped[:5])}."

    def unused(self) -> list[str]:
        """Tests with shard results that this run did not merge (not collected, skipped)."""
        return sorted(set(self.found or {}) - self.used)


def _check_settings(settings: AuditSettings, meta: AuditMeta, files: str) -> None:
    """The merge run's settings must be the shards': another k, grid or model would gate
    the shards' numbers as if they were this test's."""
    wanted = {"k": settings.k, "grid": settings.grid, "model": settings.model}
    wanted["repeats"] = settings.repeats
    differ = [
        f"{name} {value!r} here, {getattr(meta, name)!r} in the shards"
        for name, value in wanted.items()
        if value is not None and value != getattr(meta, name)
    ]
    if differ:
        raise ConfigError(
            f"--fairness-merge: {meta.test_id} now differs from its shards ({files}): "
            f"{'; '.join(differ)}; re-run the shards with the current settings."
        )


def _rebuild(
    settings: AuditSettings, kind: AuditKind, test_id: str, kind_inputs: KindInputs
) -> Rebuild:
    def rebuild() -> tuple[list[Any], AuditInputs]:
        seeds, grid, inputs = kind_inputs()
        request = AuditRequest(settings, None, seeds, grid, test_id, inputs=inputs)
        return stream.all_cases(kind, request), inputs

    return rebuild


def merged_cost(parts: Sequence[ShardResult]) -> float | None:
    """The shards' runner costs added up (None when the shards were not priced)."""
    costs = [p.cost for p in parts if p.cost is not None]
    return sum(costs) if costs else None


def replay(
    settings: AuditSettings,
    parts: Sequence[ShardResult],
    rebuild: Rebuild,
    start: Callable[[Sequence[str], Sequence[Any], AuditInputs], Scorer],
) -> Merged:
    """Merge reply shards: the united replies go through a fresh scorer (``start``:
    entity ids, first entity's prompts, inputs -> scorer) over the whole audit's prompts,
    as the unsharded run scored them."""
    from pytest_recfair.providers import RunOutcome, Usage

    meta, replies = merge_replies(parts)
    cases, inputs = rebuild()
    completions = {k: _completion(v) for k, v in replies["completions"].items()}
    errors = {k: str(v) for k, v in replies["errors"].items()}
    missing = [c.id for c in cases if c.id not in completions and c.id not in errors]
    if missing:
        where = ", ".join(str(p.path) for p in parts)
        raise DataError(
            f"--fairness-merge: the shards of {parts[0].test_id} ({where}) hold no reply for "
            f"{len(missing)} of its {len(cases)} prompts; the merge run must use the "
            "seeds, grid and inputs the shards used (re-run the shards after a change)."
        )
    usage = sum((c.usage for c in completions.values() if c.usage), Usage())
    outcome = RunOutcome(completions, errors, usage, merged_cost(parts))
    entities = list(dict.fromkeys(c.entity_id for c in cases))
    first = [c for c in cases if c.entity_id == entities[0]] if entities else []
    scorer = start(entities, first, inputs)
    scorer.add(cases, outcome)
    sent = Sent()
    sent.add(cases, outcome)
    return Merged(meta, scorer, sent)


def _completion(d: Mapping[str, Any]) -> Completion:
    from pytest_recfair.providers import Completion, Usage

    usage = d.get("usage")
    return Completion(
        text=str(d["text"]),
        finish_reason=d.get("finish_reason"),
        usage=None if usage is None else Usage(int(usage[0]), int(usage[1])),
        model=d.get("model"),
    )
