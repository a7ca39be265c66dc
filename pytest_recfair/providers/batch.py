"""Record prompt cases through a provider's batch API (OpenAI Batch API, Anthropic
Message Batches) at half the price of synchronous requests.

:func:`run_batch` builds every case's request exactly as the synchronous provider does,
sends them as batch lines, and hands each answered line back to ``record`` as the
(request, response) pair a synchronous call would have produced, so cassettes written
from it replay like any other. Lines the service could not answer are returned as
per-case errors: never recorded, never scored.

The batch ids are kept in a journal file (written atomically after every step), so an
interrupted run, re-started with the same cases, polls the batches it already submitted
instead of paying for them again. The journal is removed once every batch is done.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

from pytest_recfair import secrets
from pytest_recfair.cassettes.store import CassetteStore, RecordedRequest, RecordedResponse
from pytest_recfair.errors import ConfigError, ProviderError
from pytest_recfair.fileio import atomic_write_text
from pytest_recfair.providers.base import Completion, Provider, Usage
from pytest_recfair.providers.batch_api import (
    AnthropicBatches,
    BatchService,
    BatchState,
    OpenAIBatches,
    Submission,
)
from pytest_recfair.providers.runstate import CaseLike

__all__ = ["BATCH_PROVIDERS", "BatchOutcome", "cassette_recorder", "custom_id", "run_batch"]

#: Provider kinds with a batch API this plugin speaks.
BATCH_PROVIDERS: Final = ("openai", "anthropic")
JOURNAL_VERSION: Final = 1
MAX_LINES: Final = 50_000  # OpenAI's limit per batch; Anthropic allows 100,000

Record = Callable[[CaseLike, httpx.Request, httpx.Response], None]


@dataclass
class BatchOutcome:
    """What a batch recording produced."""

    recorded: int = 0
    errors: dict[str, str] = field(default_factory=dict)  # case id -> why it has no reply
    usage: Usage = field(default_factory=Usage)
    batches: list[str] = field(default_factory=list)  # every batch id polled
    submitted: int = 0  # batches created by this call (0 when it only resumed)


def custom_id(case_id: str, body: bytes) -> str:
    """A batch line id both services accept (``[a-zA-Z0-9_-]{1,64}``), stable across runs
    and different whenever the request differs (another model, temperature ...)."""
    digest = hashlib.blake2b(case_id.encode("utf-8") + b"\0" + body, digest_size=16)
    return "r" + digest.hexdigest()


def _service(provider: Provider, client: httpx.Client) -> BatchService:
    name = getattr(provider, "name", type(provider).__name__)
    if getattr(provider, "stream", False):
        raise ConfigError(
            f"--fairness-batch: provider {name!r} is set to stream replies; batch results "
            "are whole replies, so turn streaming off to record through a batch API."
        )
    probe = provider.build_request(None, "batch")
    base = str(getattr(provider, "base_url", ""))
    if name == "openai":
        return OpenAIBatches(base, probe, client)
    if name == "anthropic":
        return AnthropicBatches(base, probe, client)
    raise ConfigError(
        f"--fairness-batch: provider {name!r} has no batch API here; use one of "
        f"{', '.join(BATCH_PROVIDERS)}, or record with --fairness-record instead."
    )


class _Journal:
    """The batches of one recording, on disk: submitted ids survive an interrupted run."""

    def __init__(self, path: Path, owner: dict[str, str]) -> None:
        self.path = path
        self.owner = owner  # provider, model, base URL: a journal of another setup is refused
        self.entries: list[dict[str, Any]] = []
        if path.exists():
            self._load()

    def _load(self) -> None:
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
            entries = doc["batches"]
            owner = doc["owner"]
            if doc.get("version") != JOURNAL_VERSION or not isinstance(entries, list):
                raise ValueError("unknown version")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ProviderError(
                f"batch journal {self.path} is unreadable ({exc}); delete it to submit the "
                "batch again (already finished batches are then paid twice)."
            ) from None
        if owner != self.owner:
            raise ProviderError(
                f"batch journal {self.path} belongs to {owner}, not {self.owner}; finish that "
                "run with its settings or delete the journal."
            )
        self.entries = entries

    def save(self) -> None:
        if all(e.get("state") == "done" for e in self.entries):
            self.path.unlink(missing_ok=True)
            return
        doc = {"version": JOURNAL_VERSION, "owner": self.owner, "batches": self.entries}
        atomic_write_text(self.path, json.dumps(doc, indent=1) + "\n")

    def pending(self) -> list[dict[str, Any]]:
        return [e for e in self.entries if e.get("state") != "done"]


def run_batch(
    provider: Provider,
    cases: Sequence[CaseLike],
    *,
    journal: Path,
    record: Record,
    poll_interval: float = 10.0,
    max_poll_interval: float = 60.0,
    max_wait: float | None = None,
    max_lines: int = MAX_LINES,
    progress: Callable[[str], None] | None = None,
    transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> BatchOutcome:
    """Record ``cases`` through ``provider``'s batch API; see the module docstring.

    ``record(case, request, response)`` is called once per answered line with the
    synchronous request and a 200 response holding the reply body. Raises ProviderError
    when the service refuses the batch calls, or after ``max_wait`` seconds of polling
    (the journal keeps the ids: the next run resumes).
    """
    if hasattr(provider, "check_credentials"):
        provider.check_credentials()
    owner = {
        "provider": str(getattr(provider, "name", "")),
        "model": str(getattr(provider, "model", "")),
        "base_url": str(getattr(provider, "base_url", "")),
    }
    by_id = {custom_id(c.id, _request(provider, c).content): c for c in cases}
    book = _Journal(journal, owner)
    outcome = BatchOutcome()
    # httpx logs every request URL (INFO), httpcore the reply headers (DEBUG): scrubbed.
    with secrets.scrubbed_logs(), httpx.Client(transport=transport, timeout=60.0) as client:
        service = _service(provider, client)
        covered = {cid for e in book.pending() for cid in e["custom_ids"]}
        todo = [cid for cid in by_id if cid not in covered]
        for start in range(0, len(todo), max_lines):
            _submit(service, provider, book, todo[start : start + max_lines], by_id)
            outcome.submitted += 1
        _poll(
            service,
            provider,
            book,
            by_id,
            record,
            outcome,
            progress,
            sleep,
            (poll_interval, max_poll_interval, max_wait),
        )
    return outcome


def _request(provider: Provider, case: CaseLike) -> httpx.Request:
    return provider.build_request(case.system, case.prompt)


def _submit(
    service: BatchService,
    provider: Provider,
    book: _Journal,
    ids: Sequence[str],
    by_id: dict[str, CaseLike],
) -> None:
    """Upload (OpenAI) and create one batch; the journal is saved after each step."""
    work = [Submission(cid, _request(provider, by_id[cid])) for cid in ids]
    jsonl = book.path.with_suffix(f".{len(book.entries)}.jsonl")
    jsonl.parent.mkdir(parents=True, exist_ok=True)
    line = service.line
    with jsonl.open("w", encoding="utf-8") as fh:  # streamed: one line in memory at a time
        for w in work:
            fh.write(json.dumps(line(w), ensure_ascii=False, separators=(",", ":")) + "\n")
    entry: dict[str, Any] = {"kind": service.kind, "custom_ids": list(ids), "state": "uploading"}
    try:
        entry["file_id"] = service.upload(jsonl)
        book.entries.append(entry)
        entry["state"] = "uploaded"
        book.save()
        entry["batch_id"] = service.create(entry["file_id"], work)
        entry["state"] = "submitted"
        book.save()
    finally:
        jsonl.unlink(missing_ok=True)


def _poll(
    service: BatchService,
    provider: Provider,
    book: _Journal,
    by_id: dict[str, CaseLike],
    record: Record,
    outcome: BatchOutcome,
    progress: Callable[[str], None] | None,
    sleep: Callable[[float], None],
    timing: tuple[float, float, float | None],
) -> None:
    """Poll every pending batch until it is done, then take its results in."""
    interval, max_interval, max_wait = timing
    started = time.monotonic()
    for entry in book.pending():
        if entry["state"] == "uploaded":  # interrupted between upload and create
            work = [
                Submission(c, _request(provider, by_id[c]))
                for c in entry["custom_ids"]
                if c in by_id
            ]
            entry["batch_id"] = service.create(entry["file_id"], work)
            entry["state"] = "submitted"
            book.save()
        outcome.batches.append(str(entry["batch_id"]))
    while pending := book.pending():
        for entry in pending:
            state = service.state(entry["batch_id"])
            if progress is not None:
                progress(_progress_line(entry["batch_id"], state, time.monotonic() - started))
            if state.done:
                _collect(service, provider, entry, state, by_id, record, outcome)
                entry["state"] = "done"
                book.save()
        if not book.pending():
            break
        waited = time.monotonic() - started
        if max_wait is not None and waited >= max_wait:
            ids = ", ".join(e["batch_id"] for e in book.pending())
            raise ProviderError(
                f"batch {ids} still running after {waited:.0f} s (limit {max_wait:g} s); "
                f"re-run the same command later to resume polling (ids kept in {book.path})."
            )
        sleep(interval)
        interval = min(max_interval, interval * 1.5)


def _progress_line(batch_id: str, state: BatchState, elapsed: float) -> str:
    share = f"{state.finished}/{state.total}" if state.total else "?"
    failed = f", {state.failed} failed" if state.failed else ""
    return f"batch {batch_id}: {state.status} {share}{failed} ({elapsed:.0f} s)"


def _collect(
    service: BatchService,
    provider: Provider,
    entry: dict[str, Any],
    state: BatchState,
    by_id: dict[str, CaseLike],
    record: Record,
    outcome: BatchOutcome,
) -> None:
    """Record every answered line of a finished batch; everything else is an error."""
    batch_id = entry["batch_id"]
    seen: set[str] = set()
    for line in service.results(batch_id):
        case = by_id.get(line.custom_id)
        if case is None or line.custom_id in seen:
            continue  # recorded by an earlier, interrupted run, or not asked this time
        seen.add(line.custom_id)
        if line.body is None:
            outcome.errors[case.id] = f"batch {batch_id}: {line.error}"
            continue
        request = _request(provider, case)
        response = httpx.Response(
            200, headers={"content-type": "application/json"}, content=line.body, request=request
        )
        try:
            completion: Completion = provider.parse_response(response)
        except ProviderError as exc:
            outcome.errors[case.id] = f"batch {batch_id}: {exc}"
            continue
        record(case, request, response)
        outcome.recorded += 1
        if completion.usage is not None:
            outcome.usage = outcome.usage + completion.usage
    why = state.problem or f"no result for this line (batch status {state.status})"
    for cid in entry["custom_ids"]:
        if cid in by_id and cid not in seen:
            outcome.errors[by_id[cid].id] = f"batch {batch_id}: {why}"


def cassette_recorder(store: CassetteStore, test_id: str) -> Record:
    """``record`` for :func:`run_batch` that writes into ``store`` what a synchronous
    recording of the same request writes (the reply body with its JSON content type)."""

    def record(case: CaseLike, request: httpx.Request, response: httpx.Response) -> None:
        body = response.content
        store.record(
            test_id,
            case.entity_id,
            RecordedRequest(
                method=request.method,
                url=str(request.url),
                headers=tuple(request.headers.multi_items()),
                body=request.content,
                repeat=case.repeat,
                case_id=case.id,
            ),
            RecordedResponse(
                status=200,
                headers=(("content-type", "application/json"), ("content-length", str(len(body)))),
                body=body,
                reason="OK",
            ),
        )

    return record
