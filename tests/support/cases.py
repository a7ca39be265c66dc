"""A stand-in for prompts.PromptCase with only the fields the provider runner reads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    """The fields of prompts.PromptCase that the runner reads."""

    id: str
    prompt: str
    entity_id: str = "e1"
    repeat: int = 0
    system: str | None = None
