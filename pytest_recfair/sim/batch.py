"""The simulator's OpenAI Batch API (with /v1/files) and Anthropic Message Batches: a batch
completes ``delay_s`` after creation, per-line faults drawn per ``custom_id`` from the seed
or named; replies are byte for byte the synchronous endpoint's (``reply_body``)."""

from __future__ import annotations

import hashlib
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
from pytest_recfair.sim.planted import stable_seed, unit

Answer = Callable[[str, str | None], str]  # (prompt, system) -> reply text
Kind = Literal["openai", "anthropic"]

_ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_WINDOW = 86_400
_INVALID = "invalid_request_error"
JSONL: Final = "application/jsonl"
_LINE_ERRORS = {  # an OpenAI result line's error for a line never answered
    outcome: {"code": code, "message": f"This request {text}."}
    for outcome, code, text in (
        ("expired", "batch_expired", "could not be executed before the completion window expired"),
        ("canceled", "batch_cancelled", "was not executed because the batch was cancelled"),
    )
}
# Fixed so that recorded cassettes are byte-identical from run to run.
CREATED: Final = 1_767_225_600  # 2026-01-01T00:00:00Z


@dataclass(frozen=True)
class BatchOptions:
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


@dataclass
class Response:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


def json_response(status: int, payload: object) -> Response:
    return Response(status, json.dumps(payload, ensure_ascii=False).encode("utf-8"))


def error_body(
    status: int, message: str, kind: str = _INVALID, code: str | None = None, *, to: Kind = "openai"
) -> dict[str, Any]:
    """An error body in the service's shape (Anthropic: a 404 is a ``not_found_error``)."""
    if to == "anthropic":
        kind = "not_found_error" if status == 404 else kind
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def fail(
    status: int, message: str, kind: str = _INVALID, code: str | None = None, *, to: Kind = "openai"
) -> Response:
    return json_response(status, error_body(status, message, kind, code, to=to))


def content_text(content: object) -> str:
    """Message content as text: a string, or a list of ``{"type": "text"}`` parts."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else ()
    texts = [p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text"]
    return "".join(map(str, texts))


def prompt_parts(payload: dict[str, Any]) -> tuple[str | None, list[str]]:
    """(system text or None, user message texts) of an OpenAI or Anthropic request body."""
    messages = payload.get("messages")
    if not isinstance(messages, list):
        return None, []
    texts = [
        (m.get("role"), content_text(m.get("content"))) for m in messages if isinstance(m, dict)
    ]
    systems = [text for role, text in texts if role in ("system", "developer")]
    if payload.get("system") is not None:  # Anthropic: a top-level field
        systems.insert(0, content_text(payload["system"]))
    return "\n".join(systems) or None, [text for role, text in texts if role == "user"]


def reply_body(
    body: bytes, payload: dict[str, Any], text: str, default_model: str, *, anthropic: bool
) -> dict[str, Any]:
    """The OpenAI ``chat.completion`` (or Anthropic ``message``) answering ``payload``."""
    system, users = prompt_parts(payload)
    prompt_tokens = sum(len(u.split()) for u in users) + len((system or "").split())
    completion_tokens = len(text.split())
    digest = hashlib.blake2b(body, digest_size=12).hexdigest()
    model = str(payload.get("model") or default_model)
    if anthropic:
        return {
            "id": f"msg_sim_{digest}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens},
        }
    message = {"role": "assistant", "content": text, "refusal": None}
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    return {
        "id": f"chatcmpl-sim-{digest}",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [choice],
        "usage": usage | {"total_tokens": prompt_tokens + completion_tokens},
        "system_fingerprint": "fp_recfair_sim",
    }


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _compact(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


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
        self.answer, self.model, self.clock = answer, model, clock
        self.options = options or BatchOptions()
        self.files: dict[str, tuple[str, str, bytes]] = {}  # id -> filename, purpose, data
        self.batches: dict[str, _Batch] = {}
        self.created = 0  # batches created (a resumed client must not add one)
        self._serial = 0

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Response:
        parts = path.strip("/").split("/")[1:]  # without "v1"
        if parts[:2] == ["messages", "batches"]:
            return self._batches("anthropic", method, parts[2:], headers, body)
        if parts[0] == "files":
            return self._files(method, parts[1:], headers, body)
        return self._batches("openai", method, parts[1:], headers, body)

    def _next(self, prefix: str) -> str:
        self._serial += 1
        return f"{prefix}{stable_seed(self.options.seed, prefix, self._serial):016x}"

    def _files(
        self, method: str, rest: list[str], headers: dict[str, str], body: bytes
    ) -> Response:
        if not rest:
            if method != "POST":
                return fail(405, f"{method} /v1/files is not supported; use POST.")
            return self._upload(headers.get("content-type", ""), body)
        file = self.files.get(rest[0])
        if file is None:
            return fail(404, f"No such File object: {rest[0]}")
        if rest[1:] == ["content"]:
            return Response(200, file[2], content_type=JSONL)
        if rest[1:]:
            return fail(404, f"Unknown path /v1/files/{'/'.join(rest)}")
        return json_response(200, self._file_object(rest[0]))

    def _upload(self, content_type: str, body: bytes) -> Response:
        if not content_type.startswith("multipart/form-data"):
            return fail(400, "Upload a file as multipart/form-data (fields file, purpose).")
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
            return fail(400, "Missing required multipart fields: file and purpose.")
        purpose = fields["purpose"][1].decode("utf-8", "replace").strip()
        if purpose != "batch":
            return fail(400, f"purpose must be 'batch' for batch input, got {purpose!r}.")
        name, data = fields["file"]
        return json_response(200, self._store(name or "input.jsonl", purpose, data))

    def _store(self, name: str, purpose: str, data: bytes) -> dict[str, Any]:
        file_id = self._next("file-")
        self.files[file_id] = (name, purpose, data)
        return self._file_object(file_id)

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

    def _batches(
        self, kind: Kind, method: str, rest: list[str], headers: dict[str, str], body: bytes
    ) -> Response:
        openai = kind == "openai"
        origin = f"http://{headers.get('host', 'localhost')}"
        if not rest:
            if method == "GET":  # the list, newest first (the client looks its key up)
                found = [b for b in reversed(self.batches.values()) if b.kind == kind][:100]
                data = [self._object(b, origin) for b in found]
                return json_response(200, {**({"object": "list"} if openai else {}), "data": data,
                                   "has_more": False})  # fmt: skip
            if method != "POST":
                where = "/v1/batches " if openai else ""
                return fail(405, f"{method} {where}is not supported here; use POST.", to=kind)
            return self._create_openai(body) if openai else self._create_anthropic(body)
        batch = self.batches.get(rest[0])
        if batch is None or batch.kind != kind:
            what = f"No such Batch object: {rest[0]}"
            return fail(404, what if openai else f"No message batch {rest[0]!r}.", to=kind)
        if rest[1:] == ["cancel"] and method == "POST":
            if self._phase(batch) in ("validating", "in_progress"):
                batch.cancelled = True
                if not openai:  # Anthropic ends a cancelled batch at once
                    self._finish(batch)
        elif rest[1:] == ["results"] and method == "GET" and not openai:
            if self._phase(batch) != "finished":
                return fail(400, f"Batch {batch.id} is still processing.", to=kind)
            lines = [json.dumps(r["line"], ensure_ascii=False) for r in batch.results or []]
            return Response(200, ("\n".join(lines) + "\n").encode("utf-8"), content_type=JSONL)
        elif rest[1:] or method != "GET":
            path = "/".join(rest)
            what = f"Unknown path /v1/batches/{path}" if openai else f"Unknown path {path!r}."
            return fail(404, what, to=kind)
        return json_response(200, self._object(batch, origin))

    def _create_openai(self, body: bytes) -> Response:
        try:
            request = json.loads(body)
            file_id, endpoint = str(request["input_file_id"]), str(request["endpoint"])
            window, metadata = request.get("completion_window", "24h"), request.get("metadata")
            if not isinstance(metadata, dict | None):
                raise TypeError("metadata")
        except (ValueError, KeyError, TypeError):
            return fail(400, "Expected JSON with input_file_id, endpoint, completion_window.")
        if endpoint != "/v1/chat/completions":
            return fail(400, f"endpoint {endpoint!r} is not served; use /v1/chat/completions.")
        if window != "24h":
            return fail(400, f"completion_window must be '24h', got {window!r}.")
        if file_id not in self.files:
            return fail(404, f"No such File object: {file_id}")
        lines, errors = _parse_openai_lines(self.files[file_id][2], endpoint)
        batch = self._new_batch("openai", lines, endpoint=endpoint, input_file_id=file_id)
        batch.errors = errors
        batch.metadata = {str(k): str(v) for k, v in (metadata or {}).items()} or None
        return json_response(200, self._object(batch, ""))

    def _create_anthropic(self, body: bytes) -> Response:
        try:
            lines = [
                _Line(str(r["custom_id"]), dict(r["params"]), _compact(r["params"]))
                for r in json.loads(body)["requests"]
            ]
        except (ValueError, KeyError, TypeError):
            return fail(400, 'Expected {"requests": [{"custom_id", "params"}]}.', to="anthropic")
        ids = [line.custom_id for line in lines]
        bad = [i for i in ids if not _ANTHROPIC_ID.fullmatch(i)]
        if not lines or bad or len(set(ids)) != len(ids):
            why = f"invalid custom_id {bad[0]!r}" if bad else "custom_ids must be unique"
            return fail(400, "requests: " + (why if lines else "empty"), to="anthropic")
        return json_response(200, self._object(self._new_batch("anthropic", lines), ""))

    def _new_batch(
        self, kind: Kind, lines: list[_Line], endpoint: str = "", input_file_id: str = ""
    ) -> _Batch:
        self.created += 1
        created_at = CREATED + self.created  # stable bodies: a fixed base
        prefix = "batch_" if kind == "openai" else "msgbatch_"
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

    def _object(self, batch: _Batch, origin: str) -> dict[str, Any]:
        phase = self._phase(batch)
        outcomes = [r["outcome"] for r in batch.results or []]
        total = len(batch.lines)
        if batch.kind == "anthropic":
            ended = phase == "finished"
            counts = {"processing": 0 if ended else total}
            counts |= dict.fromkeys(("succeeded", "errored", "canceled", "expired"), 0)
            for outcome in outcomes if ended else ():
                counts[outcome] += 1
            t = batch.wall  # a client looks a lost batch up by its creation time
            url = f"{origin}/v1/messages/batches/{batch.id}/results"
            return {
                "id": batch.id,
                "type": "message_batch",
                "processing_status": "ended" if ended else "in_progress",
                "request_counts": counts,
                "ended_at": _iso(t) if ended else None,
                "created_at": _iso(t),
                "expires_at": _iso(t + _WINDOW),
                "archived_at": None,
                "cancel_initiated_at": _iso(t) if batch.cancelled else None,
                "results_url": url if ended else None,
            }
        t0 = batch.created_at
        expired = "expired" in outcomes
        status = {"finished": "expired" if expired else "completed"}.get(phase, phase)
        ok = completed = outcomes.count("succeeded")  # 0 before the batch finishes
        if phase == "in_progress" and self.options.delay_s:
            share = (self.clock() - batch.created) / self.options.delay_s
            completed = min(total, int(total * share))
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.endpoint,
            "errors": {"object": "list", "data": batch.errors} if batch.errors else None,
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": t0,
            "in_progress_at": None if phase in ("validating", "failed") else t0,
            "expires_at": t0 + _WINDOW,
            "finalizing_at": t0 if phase == "finished" else None,
            "completed_at": t0 if status == "completed" else None,
            "failed_at": t0 if phase == "failed" else None,
            "expired_at": t0 if status == "expired" else None,
            "cancelling_at": t0 if phase == "cancelled" else None,
            "cancelled_at": t0 if phase == "cancelled" else None,
            "request_counts": {
                "total": total,
                "completed": completed,
                "failed": total - ok if phase == "finished" else 0,
            },
            "metadata": batch.metadata,
        }

    def _finish(self, batch: _Batch) -> None:
        batch.results = [self._result(batch, line) for line in batch.lines]
        if batch.kind != "openai":
            return
        for ok, name in ((True, "output_file_id"), (False, "error_file_id")):
            lines = [r["line"] for r in batch.results if (r["outcome"] == "succeeded") == ok]
            data = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode()
            stored = self._store("batch_output.jsonl", "batch_output", data) if lines else None
            setattr(batch, name, stored and stored["id"])

    def _draw(self, what: str, custom_id: str, rate: float) -> bool:
        return rate > 0 and unit(self.options.seed, what, custom_id) < rate

    def _result(self, batch: _Batch, line: _Line) -> dict[str, Any]:
        opts, cid = self.options, line.custom_id
        detail = "The server had an error processing this line (simulated)."
        if batch.cancelled:
            outcome = "canceled"
        elif self._draw("batch-expire", cid, opts.expire_rate):
            outcome = "expired"
        elif cid in opts.error_ids or self._draw("batch-error", cid, opts.error_rate):
            outcome = "errored"
        else:
            system, users = prompt_parts(line.payload)
            try:
                detail, outcome = self.answer(users[-1] if users else "", system), "succeeded"
            except Exception as exc:  # a user callable failed: that line errors
                outcome, detail = "errored", f"recommender raised {type(exc).__name__}: {exc}"
        anthropic, body = batch.kind == "anthropic", None
        if outcome == "succeeded":
            body = reply_body(line.body, line.payload, detail, self.model, anthropic=anthropic)
        elif outcome == "errored":
            kind = "api_error" if anthropic else "server_error"
            body = error_body(500, detail, kind, to=batch.kind)
        if anthropic:
            key = {"succeeded": "message", "errored": "error"}.get(outcome)
            result = {"type": outcome, **({key: body} if key else {})}
            return {"outcome": outcome, "line": {"custom_id": cid, "result": result}}
        ident = f"{stable_seed(opts.seed, 'req', cid, line.body):016x}"
        status = 200 if outcome == "succeeded" else 500
        response = body and {"status_code": status, "request_id": f"req_{ident}", "body": body}
        out = {"id": f"batch_req_{ident}", "custom_id": cid, "response": response}
        return {"outcome": outcome, "line": out | {"error": _LINE_ERRORS.get(outcome)}}


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
