"""Shared test set-up. Helpers live in the ``tests.support`` package."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

# Import the package (and numpy with it) in this process before any in-process pytester
# run: pytester restores sys.modules after each run, and numpy cannot be imported twice.
# The kinds' registry (which hands the reports their sections) and the providers package
# too: the plugin and the engine import them lazily, ``providers`` with
# ``from pytest_recfair import providers``, which would find a dropped
# run's package on the parent package afterwards, while a ``from
# pytest_recfair.providers.adapter import ...`` imports a fresh copy: two generations of
# CallableProvider, and an isinstance check that fails between them.
import pytest_recfair.engine.registry
import pytest_recfair.plugin
import pytest_recfair.providers
import pytest_recfair.sim  # noqa: F401
from pytest_recfair.cassettes import cache
from tests.support.store import earlier_run


@pytest.fixture
def store_dir(tmp_path: Path) -> Iterator[Path]:
    """The content store in a folder of its own, as a later run finds it (an earlier
    run wrote to it); the process's store is left as it was."""
    before = cache.folder()
    earlier_run(tmp_path / "store")
    cache.use(tmp_path / "store")
    yield tmp_path / "store"
    cache.use(before)
