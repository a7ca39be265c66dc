"""Shared test set-up. Helpers live in the ``tests.support`` package."""

from __future__ import annotations

# Import the package (and numpy with it) in this process before any in-process pytester
# run: pytester restores sys.modules after each run, and numpy cannot be imported twice.
# The audit package too: the plugin imports it lazily with ``from pytest_recfair import
# audit``, which would find a dropped run's package on the parent package afterwards.
import pytest_recfair.engine
import pytest_recfair.plugin
import pytest_recfair.sim  # noqa: F401
