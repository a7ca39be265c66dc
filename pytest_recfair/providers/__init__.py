"""Recommenders under test: HTTP providers, the callable adapter, and the concurrent runner.

This package is the only place in pytest-recfair that imports httpx. The names below are
the documented entry points of users' conftest files (``run_cases`` with its options and
outcome); everything else is imported from the module that defines it.
"""

from __future__ import annotations

from pytest_recfair.providers.adapter import CallableProvider
from pytest_recfair.providers.http import from_config
from pytest_recfair.providers.runner import arun_cases, run_cases
from pytest_recfair.providers.runstate import RunOptions, RunOutcome

__all__ = ["CallableProvider", "RunOptions", "RunOutcome", "arun_cases", "from_config", "run_cases"]
