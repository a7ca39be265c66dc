"""pytest-recfair: fairness regression tests for LLM-based recommender systems.

``from pytest_recfair import fairness`` gives the ``@pytest.mark.fairness`` marker.
It is loaded lazily so that the pure modules (metrics, parse, prompts, report) can be
used from a notebook without importing pytest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["__version__", "fairness"]

if TYPE_CHECKING:
    import pytest  # noqa: TID251 - type only, never imported at run time

    fairness: pytest.MarkDecorator


def __getattr__(name: str) -> Any:
    if name == "fairness":
        from pytest_recfair.plugin import marker

        return marker()
    raise AttributeError(f"module 'pytest_recfair' has no attribute {name!r}")
