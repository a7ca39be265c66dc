"""Request and reply bodies in the services' own shapes (OpenAI chat, Anthropic messages).

Shared by the synchronous endpoint (``server``) and the batch endpoints (``batch``), so a
reply that arrives through a batch is byte for byte the body the synchronous endpoint
would have sent. Stdlib only.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

__all__ = [
    "CREATED",
    "anthropic_message",
    "chat_completion",
    "content_text",
    "prompt_parts",
]

# Fixed so that recorded cassettes are byte-identical from run to run.
CREATED: Final = 1_767_225_600  # 2026-01-01T00:00:00Z


def content_text(content: object) -> str:
    """Message content as text: a string, or a list of ``{"type": "text"}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def prompt_parts(payload: dict[str, Any]) -> tuple[str | None, list[str]]:
    """(system text or None, user message texts) of an OpenAI or Anthropic request body."""
    messages = payload.get("messages")
    if not isinstance(messages, list):
        return None, []
    systems = [
        content_text(m.get("content"))
        for m in messages
        if isinstance(m, dict) and m.get("role") in ("system", "developer")
    ]
    if payload.get("system") is not None:  # Anthropic: a top-level field
        systems.insert(0, content_text(payload["system"]))
    users = [
        content_text(m.get("content"))
        for m in messages
        if isinstance(m, dict) and m.get("role") == "user"
    ]
    return "\n".join(systems) or None, users


def _tokens(users: list[str], system: str | None, text: str) -> tuple[int, int]:
    return sum(len(u.split()) for u in users) + len((system or "").split()), len(text.split())


def chat_completion(
    body: bytes, payload: dict[str, Any], text: str, default_model: str
) -> dict[str, Any]:
    """The OpenAI ``chat.completion`` object answering ``payload`` with ``text``."""
    system, users = prompt_parts(payload)
    prompt_tokens, completion_tokens = _tokens(users, system, text)
    digest = hashlib.blake2b(body, digest_size=12).hexdigest()
    return {
        "id": f"chatcmpl-sim-{digest}",
        "object": "chat.completion",
        "created": CREATED,
        "model": str(payload.get("model") or default_model),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        "system_fingerprint": "fp_recfair_sim",
    }


def anthropic_message(
    body: bytes, payload: dict[str, Any], text: str, default_model: str
) -> dict[str, Any]:
    """The Anthropic ``message`` object answering ``payload`` with ``text``."""
    system, users = prompt_parts(payload)
    prompt_tokens, completion_tokens = _tokens(users, system, text)
    digest = hashlib.blake2b(body, digest_size=12).hexdigest()
    return {
        "id": f"msg_sim_{digest}",
        "type": "message",
        "role": "assistant",
        "model": str(payload.get("model") or default_model),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens},
    }
