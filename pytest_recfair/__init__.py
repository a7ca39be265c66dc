"""pytest-recfair: fairness regression tests for LLM-based recommender systems."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
