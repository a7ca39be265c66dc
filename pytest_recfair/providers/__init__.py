"""Recommenders under test: HTTP providers, the callable adapter, the concurrent runner (the
only package that imports httpx). Below: the entry points of users' conftest files."""

from __future__ import annotations

from pytest_recfair.providers.adapter import CallableProvider
from pytest_recfair.providers.http import from_config
from pytest_recfair.providers.runner import arun_cases, run_cases
from pytest_recfair.providers.runstate import RunOptions, RunOutcome

__all__ = ["CallableProvider", "RunOptions", "RunOutcome", "arun_cases", "from_config", "run_cases"]
