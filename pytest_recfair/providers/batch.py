"""Record prompt cases through a provider's batch API at half the price, each answered line
as the synchronous call would be; a journal (:mod:`.batch_api`) saved before the batch is
created lets a killed run resume the batch already paid for."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Final

import httpx

from pytest_recfair import secrets
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.cassettes.vcrfile import RecordedRequest
from pytest_recfair.errors import ConfigError, ProviderError
from pytest_recfair.providers.base import Completion, Provider, Usage
from pytest_recfair.providers.batch_api import (
    AnthropicBatches,
    BatchService,
    BatchState,
    Journal,
    JournalDir,
    LineResult,
    MalformedResults,
    OpenAIBatches,
    custom_id,
)
from pytest_recfair.providers.runstate import CaseLike
from pytest_recfair.providers.transport import decoded_reply

#: Provider kinds with a batch API this plugin speaks.
SERVICES: dict[str, type[BatchService]] = {"openai": OpenAIBatches, "anthropic": AnthropicBatches}
MAX_LINES: Final = 50_000  # OpenAI's limit per batch; Anthropic allows 100,000

Record = Callable[[CaseLike, httpx.Request, httpx.Response], None]


@dataclass
class BatchOutcome:
    recorded: int = 0
    errors: dict[str, str] = field(default_factory=dict)  # case id -> why it has no reply
    usage: Usage = field(default_factory=Usage)
    batches: list[str] = field(default_factory=list)  # every batch id polled
    submitted: int = 0  # batches created by this call (0 when it only resumed)


def run_batch(
    provider: Provider,
    cases: Sequence[CaseLike],
    *,
    journals: Path,
    record: Record,
    test_id: str = "",
    poll_interval: float = 10.0,
    max_wait: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> BatchOutcome:
    """Record ``cases`` through the batch API, journals in ``journals``: ``record(case,
    request, response)`` once per answered line, also of an adopted journal (its ``case``
    carries its ``test_id``). ProviderError when the service refuses, or after ``max_wait``
    seconds of polling (the journals keep the ids: the next run resumes)."""
    if hasattr(provider, "check_credentials"):
        provider.check_credentials()
    asked = {}
    for case in cases:
        request = provider.build_request(case.system, case.prompt)
        asked[custom_id(case.id, request.content)] = (case, request)
    # The setup a journal belongs to: another provider, model or URL never adopts it.
    setup = {"provider": "name", "model": "model", "base_url": "base_url"}
    owner = {key: str(getattr(provider, name, "")) for key, name in setup.items()}
    book = JournalDir(journals, owner)
    outcome, say = BatchOutcome(), progress or (lambda line: None)
    name = getattr(provider, "name", type(provider).__name__)
    if getattr(provider, "stream", False):
        raise ConfigError(
            f"--fairness-batch: provider {name!r} is set to stream replies; batch results "
            "are whole replies, so turn streaming off to record through a batch API."
        )
    if name not in SERVICES:
        raise ConfigError(
            f"--fairness-batch: provider {name!r} has no batch API here; use one of "
            f"{', '.join(SERVICES)}, or record with --fairness-record instead."
        )
    # httpx logs every request URL (INFO), httpcore the reply headers (DEBUG): scrubbed.
    with secrets.scrubbed_logs(), httpx.Client(timeout=60.0) as client:
        base, probe = str(getattr(provider, "base_url", "")), provider.build_request(None, "batch")
        service = SERVICES[name](base, probe, client)
        try:
            with book.planning():
                fresh = _plan(book, service.kind, asked, test_id, outcome)
            for note in book.notes:
                say(note)
            if book.others:
                say(
                    f"batch: {book.others} journal(s) in {book.root} belong to another "
                    "provider, model or base URL; run with those settings to take them in"
                )
            for journal in book.mine:
                _start(service, book, journal, outcome, fresh=journal in fresh)
            poll = _Poll(service, book, provider, asked, record, outcome, say)
            poll.run(poll_interval, max_wait)
        finally:
            book.release()
    return outcome


def _plan(
    book: JournalDir,
    kind: str,
    asked: dict[str, tuple[CaseLike, httpx.Request]],
    test_id: str,
    outcome: BatchOutcome,
) -> list[Journal]:
    """Adopt interrupted journals; journal (before any call) the lines none covers. Lines a
    live process is paying for are errors here, never submitted again."""
    book.scan()
    covered = {cid for journal in book.mine for cid in journal.entry["lines"]}
    for cid, (case, _) in asked.items():
        if cid in book.busy and cid not in covered:
            outcome.errors[case.id] = (
                f"being recorded by another running batch (journal in {book.root}); "
                "re-run when it has finished to replay it"
            )
    todo = [cid for cid in asked if cid not in covered and cid not in book.busy]
    fresh = []
    for start in range(0, len(todo), MAX_LINES):
        lines: dict[str, dict[str, Any]] = {}  # where each reply goes, the body it answers
        for cid in todo[start : start + MAX_LINES]:
            case, request = asked[cid]
            address = {"test": test_id, "entity": case.entity_id, "repeat": case.repeat}
            lines[cid] = {**address, "case": case.id, "body": request.content.decode("utf-8")}
        fresh.append(book.plan(kind, lines))
    return fresh


def _start(
    service: BatchService, book: JournalDir, journal: Journal, outcome: BatchOutcome, *, fresh: bool
) -> None:
    """Bring a journal to "submitted", saved after each step: an interrupted run's first
    looks its batch up (created before the kill?), then uploads (OpenAI) and creates it."""
    entry = journal.entry
    if entry["state"] == "submitted":
        return
    total = len(entry["lines"])
    if not fresh:
        found = service.find(entry["key"], total, float(entry["planned_at"]), book.claimed())
        if found is not None:
            entry["batch_id"], entry["state"] = found, "submitted"
            journal.save()
            return
    work = {cid: address["body"] for cid, address in entry["lines"].items()}
    new = entry["state"] == "planned"  # an uploaded file is a resumed submission
    if new:
        jsonl = journal.path.with_suffix(".jsonl")
        try:
            with jsonl.open("w", encoding="utf-8") as fh:  # one line in memory at a time
                for cid, body in work.items():
                    line = service.line(cid, body)
                    fh.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
            entry["file_id"] = service.upload(jsonl)
        finally:
            jsonl.unlink(missing_ok=True)
        entry["state"] = "uploaded"
        journal.save()
    entry["batch_id"] = service.create(str(entry.get("file_id", "")), work, entry["key"])
    entry["state"] = "submitted"
    journal.save()
    outcome.submitted += int(new)


@dataclass
class _Poll:  # the run's journals polled: the asked lines and where answered lines go
    service: BatchService
    book: JournalDir
    provider: Provider
    asked: dict[str, tuple[CaseLike, httpx.Request]]
    record: Record
    outcome: BatchOutcome
    say: Callable[[str], None]

    def run(self, interval: float, max_wait: float | None) -> None:
        """Poll every journal's batch until it is done, then take its results in."""
        started, mine = time.monotonic(), self.book.mine
        self.outcome.batches.extend(str(j.entry["batch_id"]) for j in mine)
        while pending := [j for j in mine if j.entry["state"] == "submitted"]:
            for journal in pending:
                batch_id = str(journal.entry["batch_id"])
                state = self.service.state(batch_id)
                share = f"{state.finished}/{state.total}" if state.total else "?"
                failed = f", {state.failed} failed" if state.failed else ""
                elapsed = time.monotonic() - started
                self.say(f"batch {batch_id}: {state.status} {share}{failed} ({elapsed:.0f} s)")
                if state.done:
                    self.collect(journal, state)
            if not any(j.entry["state"] == "submitted" for j in mine):
                break
            waited = time.monotonic() - started
            if max_wait is not None and waited >= max_wait:
                ids = ", ".join(str(j.entry["batch_id"]) for j in pending)
                raise ProviderError(
                    f"batch {ids} still running after {waited:.0f} s (limit {max_wait:g} s); "
                    "re-run the same command later to resume polling (ids kept in "
                    f"{self.book.root})."
                )
            time.sleep(interval)
            interval = min(60.0, interval * 1.5)

    def collect(self, journal: Journal, state: BatchState) -> None:
        """Record every answered line of a finished batch (asked by this run or not); asked
        lines without a reply are errors. Unreadable results quarantine the journal."""
        batch_id = str(journal.entry["batch_id"])
        lines: dict[str, dict[str, Any]] = journal.entry["lines"]
        seen: set[str] = set()
        try:
            for line in self.service.results(batch_id):
                address = lines.get(line.custom_id)
                if address is None or line.custom_id in seen:
                    continue  # not a line of this journal, or said twice
                seen.add(line.custom_id)
                self.take(batch_id, line, address)
        except MalformedResults as exc:
            where = journal.quarantine(str(exc))
            why = (
                f"results unreadable ({exc}); quarantined as {where} (never polled again); "
                "re-run to ask these prompts again"
            )
        else:
            why = state.problem or f"no result for this line (batch status {state.status})"
            journal.finish()
        for cid in lines:
            if cid in self.asked and cid not in seen:
                self.outcome.errors[self.asked[cid][0].id] = f"batch {batch_id}: {why}"

    def take(self, batch_id: str, line: LineResult, address: dict[str, Any]) -> None:
        """Record one result line, or (if this run asked it) say why it has no reply."""
        case: CaseLike
        if line.custom_id in self.asked:
            case, request = self.asked[line.custom_id]
        else:  # a line of an adopted journal: the probe's method, URL and headers
            at = address  # recorded all the same, for the test that asked it
            case = SimpleNamespace(
                id=str(at["case"]), entity_id=str(at["entity"]), repeat=int(at["repeat"]),
                test_id=at["test"],
            )  # fmt: skip
            probe, body = self.service.probe, str(address["body"]).encode("utf-8")
            headers = [(k, v) for k, v in probe.headers.multi_items() if k != "content-length"]
            request = httpx.Request(probe.method, probe.url, headers=headers, content=body)
        error, outcome = line.error, self.outcome
        if line.body is not None:
            json_type = {"content-type": "application/json"}
            response = httpx.Response(200, headers=json_type, content=line.body, request=request)
            try:
                completion: Completion = self.provider.parse_response(response)
            except ProviderError as exc:
                error = str(exc)
            else:
                self.record(case, request, response)
                outcome.recorded += 1
                if completion.usage is not None:
                    outcome.usage = outcome.usage + completion.usage
                return
        if line.custom_id in self.asked:
            outcome.errors[case.id] = f"batch {batch_id}: {error}"


def cassette_recorder(store: CassetteStore, test_id: str) -> Record:
    """``record`` for :func:`run_batch`: into ``store``, as a synchronous recording."""

    def record(case: CaseLike, request: httpx.Request, response: httpx.Response) -> None:
        owner, entity = str(getattr(case, "test_id", "") or test_id), case.entity_id
        url, body = str(request.url), request.content
        if store.lookup(owner, entity, request.method, url, body, case.repeat, case_id=case.id):
            return  # recorded already (by a run killed while it took the results in)
        headers = tuple(request.headers.multi_items())
        asked = RecordedRequest(request.method, url, headers, body, case.repeat, case.id)
        json_type = [("content-type", "application/json")]
        store.record(owner, entity, asked, decoded_reply(200, json_type, response.content, "OK"))

    return record
