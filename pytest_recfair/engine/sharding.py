"""``--fairness-shard=I/N`` and ``--fairness-merge``: one audit across several CI jobs; a
merge checks shards 1..N agree on settings and inputs (by content), so its numbers are the
unsharded run's. No pytest here."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Final, NoReturn

import jsonschema

from pytest_recfair.engine import registry, replaymemo, stream
from pytest_recfair.engine.base import (
    SHARD_FORMAT,
    SHARD_VERSION,
    AuditInputs,
    AuditKind,
    AuditRequest,
    ShardResult,
    shard_doc,
    shard_of_doc,
    shard_share,
)
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.fileio import atomic_write_text
from pytest_recfair.prompts.grids import Grid
from pytest_recfair.prompts.seeds import Entity
from pytest_recfair.results import AuditMeta, AuditResult
from pytest_recfair.settings import AuditSettings
from pytest_recfair.settings.values import Shard


def shard_path(root: Path, test_id: str, shard: Shard) -> Path:
    """``<root>/<test name>-<hash>.shard-I-of-N.json``: stable and safe on every OS."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", test_id.rsplit("::", 1)[-1])[:60] or "test"
    digest = hashlib.blake2b(test_id.encode("utf-8"), digest_size=5).hexdigest()
    return root / f"{slug}-{digest}.shard-{shard.index}-of-{shard.count}.json"


def write_shard(path: Path, doc: Mapping[str, Any]) -> None:
    """Write a :func:`shard_doc` atomically: never half a file."""
    atomic_write_text(path, json.dumps(doc, separators=(",", ":"), allow_nan=False) + "\n")


def collect(
    paths: Iterable[Path], skipped: list[str] | None = None
) -> dict[str, list[ShardResult]]:
    """Shard results by test id, from files and directories (``skipped``: files passed over)."""
    found: dict[str, list[ShardResult]] = {}
    for given in paths:
        if given.is_dir():
            why = {p: _not_shard(p) for p in sorted(given.rglob("*.json"))}
            files = [p for p, no in why.items() if no is None]
            if skipped is not None:
                skipped.extend(no for no in why.values() if no is not None)
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


def load_shard(path: Path) -> ShardResult:
    """One shard file, checked by ``schemas/shard.schema.json``; else a DataError naming it."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"), parse_constant=_not_json)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
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
    try:
        error = jsonschema.exceptions.best_match(_validator().iter_errors(_cut(doc)))
    except RecursionError:
        raise DataError(f"shard result {path}: nested too deeply; re-run that shard.") from None
    if error is not None:
        where, node = "$", doc
        for step in error.absolute_path:
            if isinstance(node, list) and len(node) > _SHORT:  # cut: no place in the file
                break
            where, node = where + (f"[{step}]" if isinstance(step, int) else f".{step}"), node[step]
        raise DataError(
            f"shard result {path}: invalid at {where}: {error.message}; expected what "
            "--fairness-shard=I/N writes (schemas/shard.schema.json): re-run that shard."
        )
    return shard_of_doc(doc, path)


def _not_json(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    node = resources.files("pytest_recfair").joinpath("schemas", "shard.schema.json")
    return jsonschema.Draft202012Validator(json.loads(node.read_text(encoding="utf-8")))


_SHORT = 4  # arrays kept whole: pairs (usage), triples (evidence lists)


def _cut(x: Any) -> Any:
    """``x`` with each long array cut to what the schema's item checks see: per type the
    least and greatest number or first value, one row of all rows' cells, every object
    (500 entities: 6 s to check whole, 0.07 s cut)."""
    if isinstance(x, dict):
        return {k: _cut(v) for k, v in x.items()}
    if not isinstance(x, list):
        return x
    if len(x) <= _SHORT:
        return [_cut(v) for v in x]
    out = [_cut(v) for v in x if type(v) is dict]
    cells = [c for v in x if type(v) is list for c in v]
    out += [_cut(cells)] if cells else []
    for kind in {type(v) for v in x} - {dict, list}:
        same = [v for v in x if type(v) is kind]
        out += [min(same), max(same)] if kind in (int, float, bool) else same[:1]
    return out


_FORMAT_RE = re.compile(rb'"format"\s*:\s*"' + re.escape(SHARD_FORMAT.encode()) + rb'"')


def _not_shard(path: Path) -> str | None:
    """Why a merge directory's .json is passed over; None: a shard ("format" in 4 KiB)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        return f"{path.name} (unreadable: {exc.strerror or exc})"
    if _FORMAT_RE.search(head) is not None:
        return None
    if not head:
        return f"{path.name} (empty)"
    if head.lstrip()[:1] not in (b"{", b"["):
        return f"{path.name} (not JSON)"
    return f'{path.name} (no "format": "{SHARD_FORMAT}")'


#: The merge run's seeds, grid and kind's inputs: compared with the shards', and rebuilt from.
KindInputs = Callable[[], tuple[Sequence[Entity], Grid, AuditInputs]]


@dataclass(frozen=True)
class ShardWritten:
    path: Path
    scored: int  # entities this shard scored
    total: int  # entities of the whole audit


def run_shard(request: AuditRequest, root: Path) -> ShardWritten:
    """Score and write ``request.shard``'s share under ``root`` (too many failures stop it)."""
    shard = request.shard
    assert shard is not None, "run_shard: the request names no shard"
    run = stream.run(request)
    stream.check_failures(request.settings, request.test_id, run.sent)
    path = shard_path(root, request.test_id, shard)
    digests = inputs_digests(registry.kind_for(request.settings), request)
    write_shard(path, shard_doc(test_id=request.test_id, shard=shard, meta=run.meta.to_dict(),
                                cost=run.sent.cost, inputs=digests,
                                **run.scorer.payload(run.sent)))  # fmt: skip
    return ShardWritten(path, len(shard_share(run.entities, shard)), len(run.entities))


@dataclass
class MergeSource:
    """The shard results given to ``--fairness-merge``, read on first use."""

    paths: tuple[Path, ...]
    found: dict[str, list[ShardResult]] | None = None
    skipped: list[str] = field(default_factory=list)  # .json files that are no shard

    def result(self, settings: AuditSettings, test_id: str, kind_inputs: KindInputs) -> AuditResult:
        """The merged, ungated result of ``test_id``, once its shards' inputs are this run's."""
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
        kind = registry.kind_for(settings)
        files = ", ".join(str(p.path) for p in parts)
        seeds, grid, inputs = kind_inputs()
        whole = AuditRequest(settings, None, seeds, grid, test_id, inputs=inputs)
        try:
            merged = kind.merge(settings, parts, lambda: (stream.all_cases(kind, whole), inputs))
            meta = AuditMeta.from_dict(merged.meta, kind.name)
        except DataError as exc:
            _check_inputs(test_id, parts, inputs_digests(kind, whole))  # names what changed
            raise DataError(f"{exc}{self._skipped_note()}") from None
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise DataError(
                f"--fairness-merge: the shards of {test_id} ({files}) hold malformed data "
                f"({type(exc).__name__}: {exc}); expected the files --fairness-shard writes: "
                "re-run those shards."
            ) from None
        _check_settings(settings, meta, files)
        result = stream.finish(settings, meta, merged.scorer, merged.sent)
        names = [a.attribute for a in result.attributes]
        if settings.attr is not None and names and not any(settings.attr in n for n in names):
            raise ConfigError(
                f"--fairness-merge: {test_id} now audits attr={settings.attr!r}, its shards "
                f"({files}) scored {', '.join(sorted(set(names)))}; re-run the shards."
            )
        _check_inputs(test_id, parts, inputs_digests(kind, whole))  # after the words above
        return result

    def _skipped_note(self) -> str:
        if not self.skipped:
            return ""
        return f" Passed over, not shard files: {', '.join(self.skipped[:5])}."


def inputs_digests(kind: AuditKind, request: AuditRequest) -> dict[str, str]:
    """The whole audit's inputs by content, so a file's name or path never matters."""
    whole, catalogue = dataclasses.replace(request, shard=None), request.inputs.catalogue
    parts: dict[str, Any] = {
        "seeds": stream.entities_of(request, kind),
        "grid": request.grid.digest,
        "prompts": replaymemo.prompts_digest(kind, [stream.all_cases(kind, whole)]),
        "catalogue": catalogue and (catalogue.items, catalogue.categorical, catalogue.numeric),
    }
    return {
        name: hashlib.blake2b(repr(part).encode("utf-8", "surrogatepass")).hexdigest()[:32]
        for name, part in parts.items()
    }


def _check_inputs(test_id: str, parts: Sequence[ShardResult], now: Mapping[str, str]) -> None:
    for part in parts:
        differ = sorted(k for k, v in (part.inputs or now).items() if now.get(k) != v)
        if differ:
            raise ConfigError(
                f"--fairness-merge: {test_id} now has other {', '.join(differ)} (compared by "
                f"content) than its shard {part.shard} ({part.path}); re-run the shards with "
                "the current files, or merge with the files they used."
            )


#: Where each setting the merge compares is set, for the message.
_HOW: Final = {
    "k": "marker k=",
    "model": "recfair_model",
    "repeats": "marker repeats=",
    "seed": "--fairness-seed=N, which also seeds the bootstrap",
}


def _check_settings(settings: AuditSettings, meta: AuditMeta, files: str) -> None:
    """Another k, model, repeats or seed would gate the shards' numbers as this test's."""
    differ = {
        name: f"{name} {value!r} here, {getattr(meta, name)!r} in the shards"
        for name in _HOW
        if (value := getattr(settings, name)) is not None and value != getattr(meta, name, value)
    }
    if differ:
        raise ConfigError(
            f"--fairness-merge: {meta.test_id} now differs from its shards ({files}): "
            f"{'; '.join(differ.values())}; re-run the shards with the current settings, or "
            f"merge with theirs ({'; '.join(_HOW[n] for n in differ)})."
        )
