"""What replay says when it finds nothing (:class:`CassetteMiss`; :class:`CassetteNote`, a
warning that stops nothing) and the record modes as data (:data:`MODE_POLICIES`): the store
and the runner ask the policy, never the mode's name."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import astuple, dataclass, replace
from pathlib import Path
from typing import Any, Final, Literal, cast

from pytest_recfair.errors import CassetteError
from pytest_recfair.vocab import ENTITIES_OPTION, PLAN_OPTION, RECORD_OPTION, RecordMode


class CassetteNote(UserWarning):
    """Something about the stored cassettes worth knowing that stops nothing."""


@dataclass(eq=False, repr=False)
class CassetteMiss(CassetteError):
    """Replay found no recorded reply for a request and the mode forbids the network."""

    test_id: str
    entity_id: str
    prompt: str
    path: Path
    mode: str = "none"
    request_line: str = ""
    repeat: int = 0
    recorded: int | None = None
    missing: int | None = None
    asked: int | None = None
    differed: str = ""

    def __post_init__(self) -> None:
        path, missing = self.path, self.missing
        if self.recorded is None and not path.parent.is_dir():  # a misspelt folder, say so first
            record = (
                RERECORD_HINT
                if missing is None
                else f"{RECORD_OPTION}=new_episodes would send {missing:,} prompts live (the "
                f"count and cost first, sending nothing: {_PLAN})"
            )
            super().__init__(
                f"no recorded reply for test {self.test_id!r}: the cassette folder "
                f"{path.parent} does not exist; check recfair_cassette_dir (the folder the "
                f"recording run wrote), or record into it: {record}."
            )
            return
        prompt, repeat = self.prompt, self.repeat
        shown = prompt if len(prompt) <= 300 else prompt[:297] + "..."
        line = self.request_line
        where = f" ({line}, repeat {repeat})" if line else f" (repeat {repeat})"
        state = (
            "the cassette file does not exist"
            if self.recorded is None
            else f"the cassette holds {self.recorded} interaction(s), none valid and unplayed "
            "for this request"
        )
        super().__init__(
            f"no recorded reply for test {self.test_id!r}, entity {self.entity_id!r}{where}: "
            f"prompt {shown!r}; cassette {path}: {state}"
            + (f"; {self.differed}" if self.differed else "")
            + f"; record mode is {self.mode!r}, which does not call the network for it. "
            f"{_hint(missing, self.asked)}"
        )

    def with_difference(self, differed: str) -> CassetteMiss:
        """This miss, saying how the request differs from what was recorded for it."""
        return replace(self, differed=differed)

    def counted(self, missing: int, asked: int) -> CassetteMiss:
        """This miss, saying how many of the ``asked`` prompts have no recording at all
        (neither a reply nor a failure noted while recording)."""
        return replace(self, missing=missing, asked=asked)

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its fields (args holds the message), so xdist can pickle the error.
        return (CassetteMiss, astuple(self))


#: The run that shows what recording the missing replies would send and cost, sending none.
_PLAN: Final = f"{RECORD_OPTION}=new_episodes {PLAN_OPTION}"


def _hint(missing: int | None, asked: int | None) -> str:
    """What to do: how many prompts a recording run would send, and never a blind one
    (a prompt failed while recording is replayed as failed, :mod:`.failures`)."""
    if missing is None or asked is None:
        return f"To fix, {RERECORD_HINT}."
    text = (
        f"This prompt was never recorded (no reply and no failure noted while recording); "
        f"{missing:,} of the {asked:,} prompts asked in this batch are like it, so "
        f"{RECORD_OPTION}=new_episodes would send at least {missing:,} prompts live. "
        f"See the exact count and cost first, sending nothing: {_PLAN}."
    )
    if 2 * missing > asked:
        text += (
            " Most prompts are unrecorded: if you did not mean to change the audit, make the "
            f"entity count ({ENTITIES_OPTION}, recfair_entities, the marker's entities=), "
            "grid, templates and model match the recording instead."
        )
    return text


def _text_of(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []  # text parts (OpenAI, Gemini)
    found = [p if isinstance(p, str) else p.get("text") for p in parts if isinstance(p, str | dict)]
    texts = [p for p in found if isinstance(p, str)]
    return "\n".join(texts) if texts else None


def prompt_of(body: bytes | str | None, case: object = None) -> str:
    """The user message of a chat request (OpenAI, Anthropic, Gemini shapes), for messages."""
    prompt = getattr(case, "prompt", None)
    if isinstance(prompt, str):
        return prompt
    raw = body.encode("utf-8") if isinstance(body, str) else (body or b"")
    obj: Any = None
    with contextlib.suppress(ValueError):  # not JSON (or not UTF-8): its opening instead
        obj = json.loads(raw)
    if isinstance(obj, dict):
        for field in ("messages", "contents"):
            turns = obj.get(field)
            if isinstance(turns, list):
                for turn in reversed(turns):
                    if isinstance(turn, dict) and turn.get("role", "user") == "user":
                        text = _text_of(turn.get("content", turn.get("parts")))
                        if text is not None:
                            return text
        for field in ("prompt", "input"):
            if isinstance(obj.get(field), str):
                return cast(str, obj[field])
    return raw[:300].decode("utf-8", "replace")


#: How to record what a replay-only run missed (said by every miss).
RERECORD_HINT: Final = (
    f"record the missing replies with {RECORD_OPTION}=new_episodes (or once: both keep "
    "the recorded replies and ask only what is missing)"
)


@dataclass(frozen=True, slots=True)
class ModePolicy:
    """What one record mode does; the store and the runner ask this, never the name."""

    #: Recorded replies are served (False: every request is recorded afresh).
    replays: bool
    #: A request without a recorded reply may go to the network (and be recorded).
    records: bool
    #: The old file is read (False: it is replaced unread).
    reads_old: bool
    #: Old interactions kept on save: all of them, those not re-recorded, or none.
    keeps: Literal["all", "not_rerecorded", "none"]


#: One row per mode (names as in vcrpy / pytest-recording); a new mode is one row. With a
#: store keyed by what was asked and shared by every test, "once" (record a file that does
#: not exist yet) and "new_episodes" coincide: each asks exactly the requests without a
#: valid recording, so an interrupted or partial recording is simply resumed.
MODE_POLICIES: Final[Mapping[RecordMode, ModePolicy]] = {
    "none": ModePolicy(replays=True, records=False, reads_old=True, keeps="all"),
    "once": ModePolicy(replays=True, records=True, reads_old=True, keeps="all"),
    "new_episodes": ModePolicy(replays=True, records=True, reads_old=True, keeps="all"),
    "all": ModePolicy(replays=False, records=True, reads_old=True, keeps="not_rerecorded"),
    "rewrite": ModePolicy(replays=False, records=True, reads_old=False, keeps="none"),
}


def request_difference(recorded: list[str], sent: bytes | str) -> str:
    """What differs between ``sent`` and the nearest of the ``recorded`` request bodies
    of the same prompt (model, messages, parameters: the JSON fields that differ), for a
    pipeline's miss."""
    if not recorded:
        return "no request to this endpoint was recorded for this prompt"
    now = _json(sent.decode("utf-8", "replace") if isinstance(sent, bytes) else sent)
    best = min((_fields_differ(_json(body), now, "") for body in recorded), key=len)
    if not best:
        return "the request matches a recording already replayed for this prompt (asked again)"
    shown = "; ".join(best[:3]) + (f"; and {len(best) - 3} more" if len(best) > 3 else "")
    return f"what differs from the recording of this prompt: {shown}"


def _json(text: str) -> Any:
    with contextlib.suppress(ValueError):
        return json.loads(text)
    return text


def _fields_differ(old: Any, new: Any, where: str) -> list[str]:
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new), key=str):
            name = f"{where}.{key}" if where else str(key)
            if key not in old:
                out.append(f"{name} added ({_short(new[key])})")
            elif key not in new:
                out.append(f"{name} removed (was {_short(old[key])})")
            else:
                out.extend(_fields_differ(old[key], new[key], name))
        return out
    name = where or "body"
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [f"{name}: {len(old)} items recorded, {len(new)} now"]
        out = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            role = b.get("role") if isinstance(b, dict) else None
            out.extend(_fields_differ(a, b, f"{where}[{i}]" + (f" ({role})" if role else "")))
        return out
    if isinstance(old, str) and isinstance(new, str) and max(len(old), len(new)) > 80:
        # a long text (a system prompt): shown from shortly before where it changes
        at = next(
            (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b),
            min(len(old), len(new)),
        )
        start = max(0, at - 30)
        cut = "..." if start else ""
        old, new = cut + old[start:], cut + new[start:]
    return [f"{name}: {_short(old)} recorded, {_short(new)} now"]


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
