"""Transport failures are not model output: count them, and decide whether an audit goes on.
A prompt with no valid response after its retries (5xx/429, a body not the provider's JSON,
a timeout, a callable that raised) is never scored nor recorded; a reply is data, not here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pytest_recfair.errors import ConfigError
from pytest_recfair.secrets import scrub

NEUTRAL: Final = "neutral"
_FIRST_ERRORS: Final = 3
_ERROR_CHARS: Final = 300


@dataclass(frozen=True, slots=True)
class FailedPrompt:
    """One prompt that got no valid response; ``group`` is ``attribute=value`` or neutral."""

    case_id: str
    entity: str
    group: str
    error: str


@dataclass(frozen=True)
class FailureSummary:
    """The failed prompts of one audit, in case order."""

    total: int
    failed: tuple[FailedPrompt, ...] = ()

    @property
    def count(self) -> int:
        return len(self.failed)

    @property
    def share(self) -> float:
        return self.count / self.total if self.total else 0.0

    def by_group(self) -> dict[str, int]:
        """Failed prompts per ``attribute=value`` (and ``neutral``), most first."""
        return dict(Counter(f.group for f in self.failed).most_common())

    def within(self, max_failed: float) -> bool:
        """Is the share of failed prompts at most ``max_failed`` (0 allows none)?"""
        return self.count == 0 or self.share <= max_failed

    def message(self, test_id: str, max_failed: float) -> str:
        """Why the audit stops: counts per value, the first errors, what to do next."""
        allowed = f"max_failed={max_failed:g}" if max_failed else "no failure is allowed"
        firsts = []  # each error on one line, cut to _ERROR_CHARS
        for f in self.failed[:_FIRST_ERRORS]:
            one = " ".join(f.error.split()).rstrip(".")
            cut = one if len(one) <= _ERROR_CHARS else one[: _ERROR_CHARS - 3] + "..."
            firsts.append(f"[{f.case_id}] {cut}")
        counts = ", ".join(f"{g} {n}" for g, n in self.by_group().items())
        return scrub(
            f"{test_id}: {self.count} of {self.total} prompts ({self.share:.1%}) got no valid "
            f"response after their retries ({allowed}). Failed per value: "
            f"{counts}. First errors: {'; '.join(firsts)}. Failed prompts are never scored "
            "or recorded: re-run to ask them again (what was recorded is kept), or allow a "
            "share with @fairness(max_failed=0.05) or the ini key recfair_max_failed."
        )


def group_of(attribute: str | None, value: str | None) -> str:
    return NEUTRAL if attribute is None or value is None else f"{attribute}={value}"


def summarize(cases: Sequence[Any], errors: Mapping[str, str]) -> FailureSummary:
    """The failed prompts among ``cases``; ``errors`` maps case id -> error text."""
    failed = tuple(
        FailedPrompt(c.id, c.entity, group_of(c.attribute, c.value), errors[c.id])
        for c in cases
        if c.id in errors
    )
    return FailureSummary(total=len(cases), failed=failed)


def check_max_failed(value: object, name: str = "max_failed") -> float:
    """A share in [0, 1) (``0.05``, ``"5%"``), or a one-line ConfigError naming ``name``."""
    share: object = value
    if isinstance(value, str):
        text = value.strip()
        try:
            share = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            share = None
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share < 1:
        raise ConfigError(
            f"{name}: expected the share of prompts allowed to fail, a number in [0, 1) "
            f"such as 0.01 or '1%', got {value!r}; use 0 to allow none"
        )
    return float(share)
