"""The kinds of audit, in one place: a new kind is a new module plus one line here."""

from __future__ import annotations

from pytest_recfair.engine.base import AuditKind
from pytest_recfair.engine.items import ITEMS
from pytest_recfair.engine.overlap import OVERLAP
from pytest_recfair.engine.positions import POSITIONS
from pytest_recfair.settings import AuditSettings

__all__ = ["KINDS", "select"]

#: Tried in order; the first kind that wants the settings runs. The list-overlap audit
#: (the FaiRLLM method) wants every settings object, so it comes last as the default.
KINDS: tuple[AuditKind, ...] = (ITEMS, POSITIONS, OVERLAP)


def select(settings: AuditSettings) -> AuditKind:
    """The kind of audit ``settings`` ask for."""
    for kind in KINDS:
        if kind.wants(settings):
            return kind
    raise LookupError("no kind of audit accepts these settings")  # unreachable: OVERLAP
