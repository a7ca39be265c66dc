"""The default budget of a run that sends prompts to a service (docs/quickstart.md).

A first recording should never turn into a large bill by accident: with neither
``recfair_max_requests`` nor ``recfair_max_cost`` set, a run asks an HTTP recommender at
most :data:`DEFAULT_MAX_REQUESTS` prompts and, when ``recfair_prices`` is set, spends at
most :data:`DEFAULT_MAX_COST` USD by the plan's estimate. A plan past it stops before
anything is sent, with a one-line message naming the key to raise. An in-process
recommender (a callable) costs nothing and sends nothing: no default applies to it.

Pure (stdlib only), like the rest of ``settings``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pytest_recfair.settings import AuditSettings

__all__ = ["DEFAULT_MAX_COST", "DEFAULT_MAX_REQUESTS", "limits"]

#: Live prompts one run may send to an HTTP recommender unless recfair_max_requests is set
#: (the quickstart's first recording, 20 entities, asks ~720).
DEFAULT_MAX_REQUESTS: Final = 2_000
#: Estimated USD one run may spend unless recfair_max_cost is set (needs recfair_prices).
DEFAULT_MAX_COST: Final = 5.0


def limits(settings: AuditSettings, *, network: bool) -> tuple[int | None, float | None]:
    """(max requests, max cost) of this run: the settings' own when either is set, else
    the defaults for a recommender reached over the network (None: no limit)."""
    requests, cost = settings.max_requests, settings.max_cost
    if not network or requests is not None or cost is not None:
        return requests, cost  # a budget the user set is the budget
    return DEFAULT_MAX_REQUESTS, DEFAULT_MAX_COST if settings.prices is not None else None
