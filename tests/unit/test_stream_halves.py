"""engine/stream.py: a replay's second half in a forked process gives the one-process
result to the last bit, in the one-process order, for a tally (list overlap, with repeats
and failed prompts) and for a pooled kind whose cases come in an order of their own (role
play with ``role_effect``: all with-role questions of a chunk, then its no-role ones).
``_in_two`` is forced here (it refuses a Python callable in a real run) and the chunks are
small, so every audit has several. Replies quote a signed URL: taken in as they are, not
scrubbed as a shard file's are (the evidence would differ)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from pytest_recfair.engine import stream
from pytest_recfair.engine.base import AuditInputs, AuditRequest
from pytest_recfair.prompts.grids import load_grid
from pytest_recfair.prompts.seeds import load_seeds
from pytest_recfair.settings import resolve

pytestmark = pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="POSIX only")
SEEDS = load_seeds("directors")
GRID = load_grid("faireval")


def _text(system: str | None, prompt: str) -> int:
    return hashlib.sha256(f"{system}|{prompt}".encode()).digest()[0]


def recommender(prompt: str, system: str | None = None) -> str:
    """Deterministic replies (lists, yes/no, a letter, a reason); now and then a failure."""
    h = _text(system, prompt)
    if h % 17 == 0:
        raise RuntimeError("the model's endpoint failed")
    if "yes/no" in prompt.lower():
        return ["Yes.", "No."][h % 2]
    if "(C)" in prompt:
        return ["A", "B", "C"][h % 3]
    if "recommend" in prompt.lower() or "list" in prompt.lower():
        titles = [f"Film {(h + i * 7) % 40}" for i in range(10)]
        lines = [f"{i}. {t}" for i, t in enumerate(titles, 1)]  # a reply quoting a URL with a
        return "\n".join([*lines, "(Source: https://db.example.org/list?sig=9f8e7d)"])  # sig
    return "Because."


def _run(marker: dict[str, Any], halves: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    forks: list[int] = []

    class Counted(stream.Child):
        def __init__(self, work: Any) -> None:
            forks.append(1)
            super().__init__(work)

    monkeypatch.setattr(stream, "CHUNK_PROMPTS", 24)
    monkeypatch.setattr(stream, "_in_two", lambda *_: halves)
    monkeypatch.setattr(stream, "Child", Counted)
    settings = resolve(marker=marker, ini={"recfair_n_resamples": "50"})
    request = AuditRequest(settings, recommender, SEEDS, GRID, "t::x", inputs=AuditInputs())
    result = json.dumps(stream.measure(request).to_dict(), sort_keys=True, default=str)
    return result, len(forks)


@pytest.mark.parametrize(
    "marker",
    [
        {"attr": "religion", "entities": 30, "repeats": 2, "max_failed": 0.5},
        {"kind": "roleplay", "attr": "religion", "questions": "smoke", "role_effect": True,
         "max_failed": 0.5},
    ],
    ids=["list overlap", "role play with role_effect"],
)  # fmt: skip
def test_the_second_half_in_a_forked_process_gives_the_one_process_result(
    marker: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    one, none = _run(marker, False, monkeypatch)
    two, forked = _run(marker, True, monkeypatch)
    assert (none, forked) == (0, 1)
    if "kind" not in marker:  # some prompts failed: their order is part of the result
        assert sum(json.loads(one)["failed"].values()) > 0
    assert two == one
