"""The kinds of audit, in one place: a new kind is a new module plus one line here;
everything else reaches a kind through :func:`kind_for` or :func:`named` only."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING

from pytest_recfair.engine.base import AuditKind
from pytest_recfair.errors import ConfigError
from pytest_recfair.report.sections import use as use_sections
from pytest_recfair.settings import AuditSettings

if TYPE_CHECKING:  # what named() imports, seen by the import-graph checks (tests/unit)
    from pytest_recfair.engine import exposure, items, positions, roleplay  # noqa: F401
    from pytest_recfair.engine.overlap import kind  # noqa: F401

#: Each kind by name: its module (the kind is the module's ``NAME``), imported when the
#: kind is first asked for, so an audit loads its own kind only (the four others cost a
#: list-overlap run 20-45 ms of CPU), and whether settings want it. Tried in order; the
#: list-overlap audit (the FaiRLLM method) wants every settings object: last, the default.
HOMES: dict[str, tuple[str, Callable[[AuditSettings], bool]]] = {
    "items": ("pytest_recfair.engine.items", lambda s: s.item_field is not None),
    "exposure": ("pytest_recfair.engine.exposure", lambda s: False),  # by name: kind=
    "positions": ("pytest_recfair.engine.positions", lambda s: s.candidates is not None),
    "roleplay": ("pytest_recfair.engine.roleplay", lambda s: s.questions is not None),
    "overlap": ("pytest_recfair.engine.overlap.kind", lambda s: True),
}
_KNOWN = ", ".join(HOMES)


def kind_for(settings: AuditSettings) -> AuditKind:
    """The kind of audit ``settings`` ask for (by name with ``kind=``)."""
    if settings.kind is not None:
        try:
            return named(settings.kind)
        except LookupError:
            raise ConfigError(
                f"@fairness(kind={settings.kind!r}): no such kind of audit; known: {_KNOWN}"
            ) from None
    return named(next(name for name, (_, wants) in HOMES.items() if wants(settings)))


def named(name: str) -> AuditKind:
    """The kind whose results ``AuditResult.extras[name]`` holds."""
    if name not in HOMES:
        raise LookupError(
            f"results of an unknown kind of audit {name!r} (known: {_KNOWN}); a kind is added "
            "in pytest_recfair/engine/registry.py"
        )
    kind: AuditKind = getattr(import_module(HOMES[name][0]), name.upper())
    return kind


def kinds() -> tuple[AuditKind, ...]:
    """Every kind, in the order tried (each module imported)."""
    return tuple(map(named, HOMES))


# the reports find a kind's sections through this lookup (report never imports the engine)
use_sections(lambda name: named(next(reversed(HOMES)) if name is None else name).sections)
