"""The batch wire protocols (OpenAI Batch API, Anthropic Message Batches) and the journal
``<dir>/<key>.json`` (key: provider setup and sorted custom ids, never the test), written
before the batch is created so any run takes in every answered line. A POSIX lock on
``<key>.lock`` marks its live owner; a free one means an adoptable journal."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import httpx

from pytest_recfair.errors import ProviderError
from pytest_recfair.fileio import atomic_write_text, remove_stale_temps
from pytest_recfair.providers.base import error_detail

OPENAI_ENDPOINT: Final = "/v1/chat/completions"
METADATA_KEY: Final = "recfair_key"  # the journal's content key, in an OpenAI batch's metadata
_RETRYABLE = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
_TRIES = 5
_CLOCK_SLACK = 120.0  # seconds between our clock and the service's
# headers of a synchronous request that describe its body, not the caller
_BODY_HEADERS = frozenset({"content-type", "content-length", "accept"})


class MalformedResults(ProviderError):
    """Results that are not JSONL of result objects: no re-poll mends them (set aside)."""


@dataclass(frozen=True)
class BatchState:
    """Where a batch is: ``done`` once results can be fetched (whatever the outcome)."""

    status: str  # the service's own word: in_progress, completed, expired, ended ...
    done: bool
    finished: int  # lines answered so far (succeeded or failed)
    failed: int
    total: int
    problem: str | None = None  # why the batch as a whole failed, if it did


@dataclass(frozen=True)
class LineResult:
    custom_id: str
    body: bytes | None  # the reply body as the synchronous endpoint sends it
    error: str | None  # why this line has no reply


class _Batches:
    """A service's batch client, retrying transient failures; ``probe``: a synchronous
    request, whose auth, version and extra headers the batch calls carry."""

    kind = what = path = ""
    # what differs: is a listed batch the journal's, where its results are, a line's reply
    created: Callable[[dict[str, Any], str, int, float, set[str]], bool]
    result_urls: Callable[[dict[str, Any]], list[str]]
    result: Callable[[dict[str, Any]], LineResult]

    def __init__(self, base_url: str, probe: httpx.Request, client: httpx.Client) -> None:
        self.base, self.probe, self.client = base_url.rstrip("/"), probe, client
        self.url = self.base + self.path
        self.headers = {k: v for k, v in probe.headers.items() if k.lower() not in _BODY_HEADERS}

    def call(self, method: str, url: str, **kw: Any) -> httpx.Response:
        last = ""
        for attempt in range(_TRIES):
            if attempt:
                time.sleep(min(30.0, 0.5 * 2**attempt))
            for fh in kw.get("files", {}).values():
                fh[1].seek(0)  # a retried upload starts the file again
            try:
                response = self.client.request(method, url, headers=self.headers, **kw)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code in _RETRYABLE:
                last = f"HTTP {response.status_code}: {error_detail(response)}"
                continue
            if response.status_code >= 400:
                raise ProviderError(
                    f"{self.what}: {method} {url} answered HTTP {response.status_code}: "
                    f"{error_detail(response)}. Check the key, the model and the base URL."
                )
            return response
        raise ProviderError(
            f"{self.what}: {method} {url} failed {_TRIES} times (last: {last}); the batch "
            "state is kept on disk, so re-running resumes where this stopped."
        )

    def json(self, method: str, url: str, **kw: Any) -> dict[str, Any]:
        response = self.call(method, url, **kw)
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ProviderError(
                f"{self.what}: {method} {url} did not answer with a JSON object; is the base "
                "URL the service's API?"
            )
        return data

    def find(self, key: str, total: int, since: float, claimed: set[str]) -> str | None:
        """The recent batch a journal of ``key`` created before a kill, if any."""
        data = self.json("GET", self.url, params={"limit": 100})
        for item in data.get("data") or []:
            if isinstance(item, dict) and self.created(item, key, total, since, claimed):
                return str(item.get("id"))
        return None

    def results(self, batch_id: str) -> Iterator[LineResult]:
        data = self.json("GET", f"{self.url}/{batch_id}")
        for url in self.result_urls(data):
            # a JSONL download, line by line (never the whole file in memory)
            with self.client.stream("GET", url, headers=self.headers) as response:
                if response.status_code >= 400:
                    response.read()
                    raise ProviderError(
                        f"{self.what}: GET {url} answered HTTP {response.status_code}: "
                        f"{error_detail(response)}; re-run to resume."
                    )
                for raw in (line for line in response.iter_lines() if line.strip()):
                    try:
                        item = json.loads(raw)
                    except ValueError as exc:
                        head = " ".join(raw.split())[:60]
                        raise MalformedResults(
                            f"batch {batch_id}: a results line is not JSON ({type(exc).__name__}"
                            f": {str(exc)[:80]}; starts {head!r})"
                        ) from None
                    if not isinstance(item, dict):
                        raise MalformedResults(
                            f"batch {batch_id}: a results line is a JSON {type(item).__name__}, "
                            "expected an object with custom_id"
                        )
                    yield self.result(item)


class OpenAIBatches(_Batches):
    """``/v1/files`` + ``/v1/batches``: JSONL in, output and error files out."""

    kind, what, path = "openai", "OpenAI Batch API", "/batches"

    @staticmethod
    def line(cid: str, body: str) -> dict[str, Any]:
        payload = json.loads(body)
        return {"custom_id": cid, "method": "POST", "url": OPENAI_ENDPOINT, "body": payload}

    def upload(self, jsonl: Path) -> str:
        with jsonl.open("rb") as fh:
            files = {"file": (jsonl.name, fh, "application/jsonl")}
            data = self.json("POST", f"{self.base}/files", data={"purpose": "batch"}, files=files)
        return str(data["id"])

    def create(self, file_id: str, work: dict[str, str], key: str) -> str:
        payload = {
            "input_file_id": file_id,
            "endpoint": OPENAI_ENDPOINT,
            "completion_window": "24h",
            "metadata": {METADATA_KEY: key},  # found again by find() after a kill
        }
        return str(self.json("POST", self.url, json=payload)["id"])

    def created(
        self, item: dict[str, Any], key: str, total: int, since: float, claimed: set[str]
    ) -> bool:
        meta = item.get("metadata")
        return isinstance(meta, dict) and meta.get(METADATA_KEY) == key

    def state(self, batch_id: str) -> BatchState:
        data = self.json("GET", f"{self.url}/{batch_id}")
        status = str(data.get("status"))
        counts = data.get("request_counts") or {}
        done = status in ("completed", "expired", "failed", "cancelled")
        problem = None
        if status == "failed":
            first = ((data.get("errors") or {}).get("data") or [{}])[0]
            problem = f"line {first.get('line')}: {first.get('message')}"
        completed, failed = int(counts.get("completed") or 0), int(counts.get("failed") or 0)
        total = int(counts.get("total") or 0)
        return BatchState(status, done, completed + failed, failed, total, problem)

    def result_urls(self, data: dict[str, Any]) -> list[str]:
        keys = ("output_file_id", "error_file_id")
        return [f"{self.base}/files/{data[key]}/content" for key in keys if data.get(key)]

    @staticmethod
    def result(item: dict[str, Any]) -> LineResult:
        custom_id = str(item.get("custom_id"))
        response = item.get("response")
        response = response if isinstance(response, dict) else {}
        status = response.get("status_code")
        if item.get("error") or status != 200:
            err = item.get("error") or (response.get("body") or {}).get("error") or {}
            message = err.get("message") if isinstance(err, dict) else err
            code = err.get("code") if isinstance(err, dict) else None
            what = f"HTTP {status}" if status else str(code or "error")
            return LineResult(custom_id, None, f"{what}: {message}")
        body = json.dumps(response.get("body"), ensure_ascii=False).encode("utf-8")
        return LineResult(custom_id, body, None)


class AnthropicBatches(_Batches):
    """``/v1/messages/batches``: requests in the create call, JSONL at ``results_url``."""

    kind, what, path = "anthropic", "Anthropic Message Batches", "/v1/messages/batches"

    @staticmethod
    def line(cid: str, body: str) -> dict[str, Any]:
        return {"custom_id": cid, "params": json.loads(body)}

    def upload(self, jsonl: Path) -> str:
        return ""  # the requests travel in the create call itself

    def create(self, file_id: str, work: dict[str, str], key: str) -> str:
        payload = {"requests": [self.line(cid, body) for cid, body in work.items()]}
        return str(self.json("POST", self.url, json=payload)["id"])

    def created(
        self, item: dict[str, Any], key: str, total: int, since: float, claimed: set[str]
    ) -> bool:
        """No journal names it, created after the journal was planned, as many requests: no
        metadata in Message Batches, so the best match (results match by custom id)."""
        if str(item.get("id")) in claimed:
            return False
        counts = item.get("request_counts") or {}
        size = sum(int(v or 0) for v in counts.values()) if isinstance(counts, dict) else -1
        try:  # RFC 3339
            at = datetime.fromisoformat(str(item.get("created_at")).replace("Z", "+00:00"))
        except ValueError:
            return False
        return size == total and at.timestamp() >= since - _CLOCK_SLACK

    def state(self, batch_id: str) -> BatchState:
        data = self.json("GET", f"{self.url}/{batch_id}")
        status = str(data.get("processing_status"))
        counts = {k: int(v or 0) for k, v in (data.get("request_counts") or {}).items()}
        failed = counts.get("errored", 0) + counts.get("canceled", 0) + counts.get("expired", 0)
        finished = failed + counts.get("succeeded", 0)
        total = finished + counts.get("processing", 0)
        return BatchState(status, status == "ended", finished, failed, total)

    def result_urls(self, data: dict[str, Any]) -> list[str]:
        return [str(data["results_url"])] if data.get("results_url") else []

    @staticmethod
    def result(item: dict[str, Any]) -> LineResult:
        custom_id = str(item.get("custom_id"))
        result = item.get("result")
        result = result if isinstance(result, dict) else {}
        kind = result.get("type")
        if kind == "succeeded":
            body = json.dumps(result.get("message"), ensure_ascii=False).encode("utf-8")
            return LineResult(custom_id, body, None)
        err = (result.get("error") or {}).get("error") or result.get("error") or {}
        message = err.get("message") if isinstance(err, dict) else None
        return LineResult(custom_id, None, f"{kind}" + (f": {message}" if message else ""))


JOURNAL_VERSION: Final = 2


BatchService = OpenAIBatches | AnthropicBatches
_STATES: Final = frozenset({"planned", "uploaded", "submitted", "done"})


def custom_id(case_id: str, body: bytes) -> str:
    """A line id both services accept (``[a-zA-Z0-9_-]{1,64}``), one per request, stable."""
    digest = hashlib.blake2b(case_id.encode("utf-8") + b"\0" + body, digest_size=16)
    return "r" + digest.hexdigest()


def content_key(owner: dict[str, str], custom_ids: Iterable[str]) -> str:
    """Same setup and lines (any order), same key."""
    digest = hashlib.blake2b(json.dumps(owner, sort_keys=True).encode("utf-8"), digest_size=12)
    for cid in sorted(custom_ids):
        digest.update(b"\0" + cid.encode("utf-8"))
    return "rf" + digest.hexdigest()


@dataclass
class Journal:
    """One batch on disk: ``entry`` holds key, state, kind, ids and every line's address."""

    path: Path
    owner: dict[str, str]
    entry: dict[str, Any]
    fd: int | None = None  # the held lock, None when another process holds it

    def save(self) -> None:
        doc = {"version": JOURNAL_VERSION, "owner": self.owner, "batches": [self.entry]}
        atomic_write_text(self.path, json.dumps(doc, indent=1) + "\n")

    def finish(self) -> None:
        """Every line is taken in: the journal goes, then its lock."""
        self.entry["state"] = "done"
        self.path.unlink(missing_ok=True)
        self.path.with_suffix(".jsonl").unlink(missing_ok=True)
        self.release(unlink=True)

    def quarantine(self, why: str | None) -> Path:
        """Set aside, never polled again; ``why`` saved in it (None: a damaged file, as is)."""
        if why is not None:
            self.entry.update(state="quarantined", why=why)
            self.save()
        target = self.path.with_name(self.path.stem + ".quarantined.json")
        os.replace(self.path, target)
        self.release(unlink=True)
        return target

    def release(self, *, unlink: bool = False) -> None:
        if self.fd is None:
            return
        if unlink:
            self.path.with_suffix(".lock").unlink(missing_ok=True)
        os.close(self.fd)
        self.fd = None


@dataclass
class JournalDir:
    """The journals of one cassette directory, for one provider setup (``owner``)."""

    root: Path
    owner: dict[str, str]
    mine: list[Journal] = field(default_factory=list)  # locked by this process
    busy: set[str] = field(default_factory=set)  # custom ids a live process is paying for
    others: int = 0  # journals of another setup (other model, provider, URL): left alone
    notes: list[str] = field(default_factory=list)  # journals set aside, and why

    @contextlib.contextmanager
    def planning(self) -> Iterator[None]:
        """Exclusive across processes while journals are scanned and planned."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root, os.O_RDONLY)
        try:
            flock(fd, block=True)
            yield
        finally:
            os.close(fd)

    def scan(self) -> None:
        """Adopt every journal of this setup that no live process holds."""
        remove_stale_temps(self.root)  # a killed run's journal writes
        for path in sorted(self.root.glob("rf*.json")):
            if path.name.endswith(".quarantined.json"):
                continue
            doc = _read(path)
            if doc is None:
                continue  # finished by another process meanwhile
            owner, entry = doc if isinstance(doc, tuple) else (None, {})
            if owner is not None and owner != self.owner:
                self.others += 1
                continue
            fd = _try_lock(path.with_suffix(".lock"))
            if fd is None:
                self.busy.update(entry.get("lines") or ())
                continue
            if not path.exists():  # finished between the read and the lock
                os.close(fd)
                continue
            why = doc if isinstance(doc, str) else _inconsistent(self.owner, path, entry)
            journal = Journal(path, self.owner, entry, fd)
            if why is None:
                self.mine.append(journal)
                continue
            target = journal.quarantine(None)  # damaged, foreign or inconsistent: never used
            self.notes.append(
                f"batch: journal {path} set aside as {target.name} ({why}); the prompts this run "
                "asks are submitted in a new batch (if the batch it names already ran, look it "
                "up at the service: its lines would be paid twice)"
            )

    def plan(self, kind: str, lines: dict[str, dict[str, Any]]) -> Journal:
        """A journal for ``lines`` (id -> cassette address), saved and locked before any call."""
        key = content_key(self.owner, lines)
        path = self.root / f"{key}.json"
        fd = _try_lock(path.with_suffix(".lock"))
        if fd is None:  # pragma: no cover - scan() saw it busy; planning holds the dir
            raise ProviderError(f"batch journal {path} is held by another process; re-run.")
        entry: dict[str, Any] = {"key": key, "kind": kind, "state": "planned"}
        entry.update(planned_at=time.time(), custom_ids=list(lines), lines=lines)
        journal = Journal(path, self.owner, entry, fd)
        journal.save()
        self.mine.append(journal)
        return journal

    def claimed(self) -> set[str]:
        """Batch ids named by any journal here (a look-up must not take another's)."""
        out: set[str] = set()
        for path in self.root.glob("rf*.json"):
            doc = _read(path)
            if isinstance(doc, tuple) and doc[1].get("batch_id"):
                out.add(str(doc[1]["batch_id"]))
        return out

    def release(self) -> None:
        for journal in self.mine:
            journal.release()


def _inconsistent(owner: dict[str, str], path: Path, entry: dict[str, Any]) -> str | None:
    """Why a journal of this setup is not what this setup writes, or None."""
    lines: dict[str, dict[str, Any]] = entry["lines"]
    if not lines or sorted(entry.get("custom_ids") or ()) != sorted(lines):
        return "its 'custom_ids' do not list its lines"
    if entry["key"] != path.stem or entry["key"] != content_key(owner, lines):
        return "its key does not match its setup and lines"
    need = {"uploaded": "file_id", "submitted": "batch_id"}.get(entry["state"])
    empty_ok = need == "file_id" and owner.get("provider") == "anthropic"  # no file there
    if need is not None and not (entry.get(need) or (empty_ok and need in entry)):
        return f"state {entry['state']!r} without a {need}"
    for cid, line in lines.items():
        body, case = line.get("body"), line.get("case")
        if not isinstance(body, str) or not isinstance(case, str):
            return f"line {cid} has no request body or case id"
        if custom_id(case, body.encode("utf-8")) != cid:
            return f"line {cid} is not the request its id names"
        try:
            model = json.loads(body).get("model", owner["model"])
        except (ValueError, AttributeError):
            return f"line {cid}'s request is not a JSON object"
        if model != owner["model"]:
            return f"line {cid} asks model {model!r}, not {owner['model']!r}"
    return None


def _read(path: Path) -> tuple[dict[str, str], dict[str, Any]] | str | None:
    """(owner, entry) of a journal; None when it is gone; why, when it is no journal."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        return f"unreadable: {exc}"
    try:
        doc = json.loads(text)
    except ValueError as exc:
        why: str | None = f"not JSON: {exc}"
    else:
        why = _malformed(doc)
    if why is None:
        return doc["owner"], doc["batches"][0]
    return f"malformed: {why}; expected a version-{JOURNAL_VERSION} journal"


def _malformed(doc: Any) -> str | None:
    """Why a journal's JSON is not a journal, or None."""
    if not isinstance(doc, dict):
        return f"top level is {type(doc).__name__}, not an object"
    if doc.get("version") != JOURNAL_VERSION:
        return f"version {doc.get('version')!r}"
    batches = doc.get("batches")
    if not isinstance(doc.get("owner"), dict) or not isinstance(batches, list) or not batches:
        return "no owner object or no batches list"
    entry = batches[0]
    if not isinstance(entry, dict):
        return "batch entry is not an object"
    lines = entry.get("lines")
    if not isinstance(lines, dict) or not all(isinstance(v, dict) for v in lines.values()):
        return "'lines' is not an object of line objects"
    if entry.get("state") not in _STATES or not isinstance(entry.get("key"), str):
        return f"state {entry.get('state')!r} or key {entry.get('key')!r} unknown"
    for name in ("batch_id", "file_id"):
        if name in entry and not isinstance(entry[name], str):
            return f"{name} is {type(entry[name]).__name__}, not a string"
    return None


def flock(fd: int, *, block: bool) -> bool:
    """An exclusive POSIX lock on ``fd``; False when another process holds it."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no cross-process exclusion
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def _try_lock(path: Path) -> int | None:
    """The held lock on ``path`` (created if missing), or None when a process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    if flock(fd, block=False):
        return fd
    os.close(fd)
    return None
