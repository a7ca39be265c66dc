"""The simulator's batch endpoints: OpenAI Batch API and Anthropic Message Batches.

OpenAI: ``/v1/files`` (multipart upload, purpose "batch"; ``/{id}``, ``/{id}/content``),
``/v1/batches`` (``/{id}``, ``/{id}/cancel``); a batch goes validating -> in_progress ->
completed (or expired, failed, cancelled) with an output and an error file. Anthropic:
``/v1/messages/batches`` (``/{id}``, ``/{id}/cancel``, ``/{id}/results``). A batch
completes ``delay_s`` after creation; per-line faults are drawn per ``custom_id`` from the
seed (``error_rate``: a 500; ``expire_rate``: unprocessed) or named (``error_ids``).
Replies come from the same recommender, in the synchronous endpoint's body shapes.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any, Final, Literal

from pytest_recfair.errors import ConfigError
from pytest_recfair.sim.catalogue import stable_seed, unit
from pytest_recfair.sim.wire import CREATED, prompt_parts, reply_body

Answer = Callable[[str, str | None], str]  # (prompt, system) -> reply text
Reply = tuple[int, bytes, str]  # status, body, content type
Kind = Literal["openai", "anthropic"]

_ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_WINDOW = 86_400
JSONL: Final = "application/jsonl"


@dataclass(frozen=True)
class BatchOptions:
    """How simulated batches behave."""

    delay_s: float = 0.0  # seconds from creation to completion
    error_rate: float = 0.0  # share of lines answered with an HTTP 500
    expire_rate: float = 0.0  # share of lines left unprocessed (the batch expires)
    error_ids: frozenset[str] = frozenset()  # custom_ids that always fail
    seed: int = 0

    def __post_init__(self) -> None:
        if self.delay_s < 0 or not 0 <= self.error_rate <= 1 or not 0 <= self.expire_rate <= 1:
            raise ConfigError(
                f"batch options: delay_s must be >= 0 and error_rate, expire_rate in [0, 1]; "
                f"got delay_s={self.delay_s!r}, error_rate={self.error_rate!r}, "
                f"expire_rate={self.expire_rate!r}."
            )


@dataclass
class _Line:
    custom_id: str
    payload: dict[str, Any]
    body: bytes


@dataclass
class _Batch:
    id: str
    kind: Kind
    lines: list[_Line]
    created: float  # clock()
    created_at: int  # epoch seconds (fixed base + offset, for stable bodies)
    endpoint: str = ""
    input_file_id: str = ""
    errors: list[dict[str, Any]] = field(default_factory=list)  # validation errors
    cancelled: bool = False
    results: list[dict[str, Any]] | None = None  # finished lines, in input order
    output_file_id: str | None = None
    error_file_id: str | None = None
    metadata: dict[str, str] | None = None
    wall: float = field(default_factory=time.time)  # Anthropic's times are the real ones


def _json(status: int, payload: object) -> Reply:
    return status, json.dumps(payload, ensure_ascii=False).encode("utf-8"), "application/json"


def _openai_error(status: int, message: str) -> Reply:
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    return _json(status, {"error": error})


def _anthropic_error(status: int, message: str, kind: str = "invalid_request_error") -> Reply:
    return _json(status, {"type": "error", "error": {"type": kind, "message": message}})


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class BatchEngine:
    """Files and batches of one simulator, answered by ``answer(prompt, system)``."""

    def __init__(
        self,
        answer: Answer,
        *,
        model: str,
        options: BatchOptions | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.answer = answer
        self.model = model
        self.options = options or BatchOptions()
        self.clock = clock
        self.files: dict[str, tuple[str, str, bytes]] = {}  # id -> filename, purpose, data
        self.batches: dict[str, _Batch] = {}
        self.created = 0  # batches created (a resumed client must not add one)
        self._serial = 0

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        """Answer one request to a batch or file endpoint."""
        parts = path.strip("/").split("/")[1:]  # without "v1"
        if parts[:2] == ["messages", "batches"]:
            return self._anthropic(method, parts[2:], headers, body)
        if parts[0] == "files":
            return self._files(method, parts[1:], headers, body)
        return self._openai(method, parts[1:], body)

    def _next(self, prefix: str) -> str:
        self._serial += 1
        return f"{prefix}{stable_seed(self.options.seed, prefix, self._serial):016x}"

    # -- OpenAI files ------------------------------------------------------------------

    def _files(self, method: str, rest: list[str], headers: dict[str, str], body: bytes) -> Reply:
        if not rest:
            if method != "POST":
                return _openai_error(405, f"{method} /v1/files is not supported; use POST.")
            return self._upload(headers.get("content-type", ""), body)
        file = self.files.get(rest[0])
        if file is None:
            return _openai_error(404, f"No such File object: {rest[0]}")
        if rest[1:] == ["content"]:
            return 200, file[2], JSONL
        if rest[1:]:
            return _openai_error(404, f"Unknown path /v1/files/{'/'.join(rest)}")
        return _json(200, self._file_object(rest[0]))

    def _upload(self, content_type: str, body: bytes) -> Reply:
        if not content_type.startswith("multipart/form-data"):
            return _openai_error(
                400, "Upload a file as multipart/form-data (fields file, purpose)."
            )
        message = BytesParser(policy=HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode("latin-1") + body
        )
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            data = part.get_payload(decode=True)
            if isinstance(name, str) and isinstance(data, bytes):
                fields[name] = (part.get_filename(), data)
        if "file" not in fields or "purpose" not in fields:
            return _openai_error(400, "Missing required multipart fields: file and purpose.")
        purpose = fields["purpose"][1].decode("utf-8", "replace").strip()
        if purpose != "batch":
            return _openai_error(400, f"purpose must be 'batch' for batch input, got {purpose!r}.")
        file_id = self._next("file-")
        self.files[file_id] = (fields["file"][0] or "input.jsonl", purpose, fields["file"][1])
        return _json(200, self._file_object(file_id))

    def _file_object(self, file_id: str) -> dict[str, Any]:
        name, purpose, data = self.files[file_id]
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": CREATED,
            "filename": name,
            "purpose": purpose,
        }

    # -- OpenAI batches ----------------------------------------------------------------

    def _openai(self, method: str, rest: list[str], body: bytes) -> Reply:
        if not rest:
            if method == "GET":  # the list, newest first (the client looks its key up)
                batches = [b for b in reversed(self.batches.values()) if b.kind == "openai"]
                data = [self._openai_object(b) for b in batches[:100]]
                return _json(200, {"object": "list", "data": data, "has_more": False})
            if method != "POST":
                return _openai_error(405, f"{method} /v1/batches is not supported here; use POST.")
            return self._create_openai(body)
        batch = self.batches.get(rest[0])
        if batch is None or batch.kind != "openai":
            return _openai_error(404, f"No such Batch object: {rest[0]}")
        if rest[1:] == ["cancel"] and method == "POST":
            if self._phase(batch) in ("validating", "in_progress"):
                batch.cancelled = True
            return _json(200, self._openai_object(batch))
        if rest[1:] or method != "GET":
            return _openai_error(404, f"Unknown path /v1/batches/{'/'.join(rest)}")
        return _json(200, self._openai_object(batch))

    def _create_openai(self, body: bytes) -> Reply:
        try:
            request = json.loads(body)
            file_id = str(request["input_file_id"])
            endpoint = str(request["endpoint"])
            window = request.get("completion_window", "24h")
            metadata = request.get("metadata")
            if metadata is not None and not isinstance(metadata, dict):
                raise TypeError("metadata")
        except (ValueError, KeyError, TypeError):
            return _openai_error(
                400, "Expected JSON with input_file_id, endpoint, completion_window."
            )
        if endpoint != "/v1/chat/completions":
            return _openai_error(
                400, f"endpoint {endpoint!r} is not served; use /v1/chat/completions."
            )
        if window != "24h":
            return _openai_error(400, f"completion_window must be '24h', got {window!r}.")
        if file_id not in self.files:
            return _openai_error(404, f"No such File object: {file_id}")
        lines, errors = _parse_openai_lines(self.files[file_id][2], endpoint)
        batch = self._new_batch("openai", lines, endpoint=endpoint, input_file_id=file_id)
        batch.errors = errors
        batch.metadata = {str(k): str(v) for k, v in (metadata or {}).items()} or None
        return _json(200, self._openai_object(batch))

    def _new_batch(
        self, kind: Kind, lines: list[_Line], endpoint: str = "", input_file_id: str = ""
    ) -> _Batch:
        prefix = "batch_" if kind == "openai" else "msgbatch_"
        self.created += 1
        created_at = CREATED + self.created  # stable bodies: a fixed base
        batch = _Batch(
            self._next(prefix), kind, lines, self.clock(), created_at, endpoint, input_file_id
        )
        self.batches[batch.id] = batch
        return batch

    def _phase(self, batch: _Batch) -> str:
        """validating -> in_progress -> (finished: completed / expired); or failed, cancelled."""
        if batch.errors:
            return "failed"
        if batch.results is not None:
            return "finished"
        if batch.cancelled:
            return "cancelled"
        elapsed = self.clock() - batch.created
        if elapsed >= self.options.delay_s:
            self._finish(batch)
            return "finished"
        return "validating" if elapsed < 0.1 * self.options.delay_s else "in_progress"

    def _openai_object(self, batch: _Batch) -> dict[str, Any]:
        phase = self._phase(batch)
        total = len(batch.lines)
        t0 = batch.created_at
        obj: dict[str, Any] = {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.endpoint,
            "errors": {"object": "list", "data": batch.errors} if batch.errors else None,
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": phase,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": t0,
            "in_progress_at": None if phase in ("validating", "failed") else t0,
            "expires_at": t0 + _WINDOW,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": t0 if phase == "failed" else None,
            "expired_at": None,
            "cancelling_at": t0 if phase == "cancelled" else None,
            "cancelled_at": t0 if phase == "cancelled" else None,
            "request_counts": {"total": total, "completed": 0, "failed": 0},
            "metadata": batch.metadata,
        }
        if phase == "in_progress" and self.options.delay_s:
            share = (self.clock() - batch.created) / self.options.delay_s
            obj["request_counts"]["completed"] = min(total, int(total * share))
        if phase == "finished":
            results = batch.results or []
            expired = sum(1 for r in results if r["outcome"] == "expired")
            ok = sum(1 for r in results if r["outcome"] == "succeeded")
            obj["status"] = "expired" if expired else "completed"
            obj["finalizing_at"] = t0
            obj["expired_at" if expired else "completed_at"] = t0
            obj["request_counts"] = {"total": total, "completed": ok, "failed": total - ok}
        return obj

    # -- Anthropic message batches -----------------------------------------------------

    def _anthropic(
        self, method: str, rest: list[str], headers: dict[str, str], body: bytes
    ) -> Reply:
        origin = f"http://{headers.get('host', 'localhost')}"
        if not rest:
            if method == "GET":  # the list, newest first
                found = [b for b in reversed(self.batches.values()) if b.kind == "anthropic"]
                data = [self._anthropic_object(b, origin) for b in found[:100]]
                return _json(200, {"data": data, "has_more": False})
            if method != "POST":
                return _anthropic_error(405, f"{method} is not supported here; use POST.")
            return self._create_anthropic(body)
        batch = self.batches.get(rest[0])
        if batch is None or batch.kind != "anthropic":
            return _anthropic_error(404, f"No message batch {rest[0]!r}.", "not_found_error")
        if rest[1:] == ["cancel"] and method == "POST":
            if self._phase(batch) in ("validating", "in_progress"):
                batch.cancelled = True
                self._finish(batch)
            return _json(200, self._anthropic_object(batch, origin))
        if rest[1:] == ["results"] and method == "GET":
            if self._phase(batch) != "finished":
                return _anthropic_error(400, f"Batch {batch.id} is still processing.")
            lines = [json.dumps(r["line"], ensure_ascii=False) for r in batch.results or []]
            return 200, ("\n".join(lines) + "\n").encode("utf-8"), JSONL
        if rest[1:] or method != "GET":
            return _anthropic_error(404, f"Unknown path {'/'.join(rest)!r}.", "not_found_error")
        return _json(200, self._anthropic_object(batch, origin))

    def _create_anthropic(self, body: bytes) -> Reply:
        try:
            requests = json.loads(body)["requests"]
            lines = [
                _Line(str(r["custom_id"]), dict(r["params"]), _compact(r["params"]))
                for r in requests
            ]
        except (ValueError, KeyError, TypeError):
            return _anthropic_error(400, 'Expected {"requests": [{"custom_id", "params"}]}.')
        ids = [line.custom_id for line in lines]
        bad = [i for i in ids if not _ANTHROPIC_ID.fullmatch(i)]
        if not lines or bad or len(set(ids)) != len(ids):
            why = f"invalid custom_id {bad[0]!r}" if bad else "custom_ids must be unique"
            return _anthropic_error(400, "requests: " + (why if lines else "empty"))
        return _json(200, self._anthropic_object(self._new_batch("anthropic", lines), ""))

    def _anthropic_object(self, batch: _Batch, origin: str) -> dict[str, Any]:
        phase = self._phase(batch)
        counts = {"processing": len(batch.lines), "succeeded": 0, "errored": 0}
        counts |= {"canceled": 0, "expired": 0}
        ended = phase == "finished"
        if ended:
            counts["processing"] = 0
            for r in batch.results or []:
                counts[r["outcome"]] += 1
        t0 = batch.wall  # a client looks a lost batch up by its creation time
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "ended_at": _iso(t0) if ended else None,
            "created_at": _iso(t0),
            "expires_at": _iso(t0 + _WINDOW),
            "archived_at": None,
            "cancel_initiated_at": _iso(t0) if batch.cancelled else None,
            "results_url": f"{origin}/v1/messages/batches/{batch.id}/results" if ended else None,
        }

    # -- answering ---------------------------------------------------------------------

    def _finish(self, batch: _Batch) -> None:
        """Answer every line once (or cancel / expire / fail it) and store the results."""
        batch.results = [self._result(batch, line) for line in batch.lines]
        if batch.kind != "openai":
            return
        good = [r["line"] for r in batch.results if r["outcome"] == "succeeded"]
        bad = [r["line"] for r in batch.results if r["outcome"] != "succeeded"]
        batch.output_file_id = self._store_jsonl(good) if good else None
        batch.error_file_id = self._store_jsonl(bad) if bad else None

    def _store_jsonl(self, lines: list[dict[str, Any]]) -> str:
        file_id = self._next("file-")
        data = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode("utf-8")
        self.files[file_id] = ("batch_output.jsonl", "batch_output", data)
        return file_id

    def _draw(self, what: str, custom_id: str, rate: float) -> bool:
        return rate > 0 and unit(self.options.seed, what, custom_id) < rate

    def _result(self, batch: _Batch, line: _Line) -> dict[str, Any]:
        opts = self.options
        if batch.cancelled:
            outcome, detail = "canceled", None
        elif self._draw("batch-expire", line.custom_id, opts.expire_rate):
            outcome, detail = "expired", None
        elif line.custom_id in opts.error_ids or self._draw(
            "batch-error", line.custom_id, opts.error_rate
        ):
            outcome, detail = "errored", "The server had an error processing this line (simulated)."
        else:
            system, users = prompt_parts(line.payload)
            try:
                text = self.answer(users[-1] if users else "", system)
                outcome, detail = "succeeded", text
            except Exception as exc:  # a user callable failed: that line errors
                outcome, detail = "errored", f"recommender raised {type(exc).__name__}: {exc}"
        shape = _openai_line if batch.kind == "openai" else _anthropic_line
        return {"outcome": outcome, "line": shape(self, line, outcome, detail)}


def _compact(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _parse_openai_lines(data: bytes, endpoint: str) -> tuple[list[_Line], list[dict[str, Any]]]:
    """The lines of an input file, or validation errors (code, line, message) for a bad one."""
    lines: list[_Line] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, raw in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
            custom_id, url, body = str(item["custom_id"]), item["url"], item["body"]
            if item.get("method") != "POST" or url != endpoint or not isinstance(body, dict):
                raise ValueError(f"method must be POST, url {endpoint}, body an object")
            if custom_id in seen:
                raise ValueError(f"custom_id {custom_id!r} is not unique")
        except (ValueError, KeyError, TypeError) as exc:
            errors.append(
                {"code": "invalid_request", "line": number, "message": str(exc), "param": None}
            )
            continue
        seen.add(custom_id)
        lines.append(_Line(custom_id, body, _compact(body)))
    if not lines and not errors:
        errors.append({"code": "empty_file", "line": None, "message": "no requests", "param": None})
    return lines, errors


def _openai_line(
    engine: BatchEngine, line: _Line, outcome: str, detail: str | None
) -> dict[str, Any]:
    ident = f"{stable_seed(engine.options.seed, 'req', line.custom_id, line.body):016x}"
    base: dict[str, Any] = {"id": f"batch_req_{ident}", "custom_id": line.custom_id}
    if outcome == "succeeded":
        body = reply_body(line.body, line.payload, detail or "", engine.model, anthropic=False)
        return {
            **base,
            "response": {"status_code": 200, "request_id": f"req_{ident}", "body": body},
            "error": None,
        }
    if outcome == "errored":
        error = {"message": detail, "type": "server_error", "param": None, "code": None}
        response = {"status_code": 500, "request_id": f"req_{ident}", "body": {"error": error}}
        return {**base, "response": response, "error": None}
    code = "batch_expired" if outcome == "expired" else "batch_cancelled"
    message = "This request could not be executed before the completion window expired."
    if outcome != "expired":
        message = "This request was not executed because the batch was cancelled."
    return {**base, "response": None, "error": {"code": code, "message": message}}


def _anthropic_line(
    engine: BatchEngine, line: _Line, outcome: str, detail: str | None
) -> dict[str, Any]:
    if outcome == "succeeded":
        message = reply_body(line.body, line.payload, detail or "", engine.model, anthropic=True)
        result: dict[str, Any] = {"type": "succeeded", "message": message}
    elif outcome == "errored":
        result = {
            "type": "errored",
            "error": {"type": "error", "error": {"type": "api_error", "message": detail}},
        }
    else:
        result = {"type": outcome}
    return {"custom_id": line.custom_id, "result": result}
