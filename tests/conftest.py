"""Shared test set-up. Helpers live in the ``tests.support`` package."""

from __future__ import annotations

# Import the package (and numpy with it) in this process before any in-process pytester
# run: pytester restores sys.modules after each run, and numpy cannot be imported twice.
# The engine and providers packages too: the plugin and the engine import them lazily
# with ``from pytest_recfair import engine`` / ``providers``, which would find a dropped
# run's package on the parent package afterwards, while a ``from
# pytest_recfair.providers.adapter import ...`` imports a fresh copy: two generations of
# CallableProvider, and an isinstance check that fails between them.
import pytest_recfair.engine
import pytest_recfair.plugin
import pytest_recfair.providers
import pytest_recfair.sim  # noqa: F401
