"""pytest-recfair: fairness regression tests for LLM-based recommender systems.

``fairness`` (the marker), ``audit`` and ``judge`` load lazily: the pure modules can be
used from a notebook without importing pytest, numpy or httpx."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_recfair.vocab import PLUGIN_VERSION as __version__

__all__ = ["__version__", "audit", "fairness", "judge"]

if TYPE_CHECKING:
    import pytest  # noqa: TID251 - type only, never imported at run time

    from pytest_recfair.api import audit, judge

    fairness: pytest.MarkDecorator


def __getattr__(name: str) -> Any:
    if name == "fairness":
        from pytest_recfair.plugin import marker

        return marker()
    if name in ("audit", "judge"):
        from pytest_recfair import api

        return getattr(api, name)
    raise AttributeError(f"module 'pytest_recfair' has no attribute {name!r}")
