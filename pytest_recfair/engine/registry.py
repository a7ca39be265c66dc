"""The kinds of audit, in one place: a new kind is a new module plus one line here;
everything else reaches a kind through :func:`kind_for` or :func:`named` only."""

from __future__ import annotations

from pytest_recfair.engine.base import AuditKind
from pytest_recfair.engine.exposure import EXPOSURE
from pytest_recfair.engine.items import ITEMS
from pytest_recfair.engine.overlap.kind import OVERLAP
from pytest_recfair.engine.positions import POSITIONS
from pytest_recfair.engine.roleplay import ROLEPLAY
from pytest_recfair.errors import ConfigError
from pytest_recfair.report.sections import use as use_sections
from pytest_recfair.settings import AuditSettings

#: Tried in order; the first kind that wants the settings runs. The list-overlap audit
#: (the FaiRLLM method) wants every settings object, so it comes last as the default.
KINDS: tuple[AuditKind, ...] = (ITEMS, EXPOSURE, POSITIONS, ROLEPLAY, OVERLAP)
_KNOWN = ", ".join(k.name for k in KINDS)


def kind_for(settings: AuditSettings) -> AuditKind:
    """The kind of audit ``settings`` ask for (by name with ``kind=``)."""
    if settings.kind is not None:
        try:
            return named(settings.kind)
        except LookupError:
            raise ConfigError(
                f"@fairness(kind={settings.kind!r}): no such kind of audit; known: {_KNOWN}"
            ) from None
    return next(kind for kind in KINDS if kind.wants(settings))  # the last wants all


def named(name: str) -> AuditKind:
    """The kind whose results ``AuditResult.extras[name]`` holds."""
    found = next((kind for kind in KINDS if kind.name == name), None)
    if found is None:
        raise LookupError(
            f"results of an unknown kind of audit {name!r} (known: {_KNOWN}); a kind is added "
            "in pytest_recfair/engine/registry.py"
        )
    return found


# the reports find a kind's sections through this lookup (report never imports the engine)
use_sections(lambda name: (KINDS[-1] if name is None else named(name)).sections)
