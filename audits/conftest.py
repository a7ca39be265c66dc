"""The recommender of the bundled demo audit.

By default: the simulated recommender (``python -m pytest_recfair.sim --bias demo``)
reached over HTTP as an OpenAI-compatible API, the way a real model would be. Its replies
are recorded in fixtures/cassettes/, so ``pytest --fairness`` replays them offline.
To record again, serve the sim on the demo's port and run with ``--fairness-record``::

    python -m pytest_recfair.sim --port 8765 --bias demo --model recfair-sim-demo &
    pytest --fairness --fairness-record=once --fairness-update

``RECFAIR_DEMO_PROFILE=<bias profile YAML or bundled name>`` swaps in an in-process sim
with that profile instead (no cassettes: a callable has no HTTP traffic to record). That
is how docs/demo.md plants a regression: ``RECFAIR_DEMO_PROFILE=audits/profiles/regressed.yaml``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from pytest_recfair.providers import CallableProvider, from_config
from pytest_recfair.sim import SimulatedRecommender

DEMO_URL = "http://127.0.0.1:8765/v1"  # part of each recorded request: keep it fixed
DEMO_MODEL = "recfair-sim-demo"


@pytest.fixture(scope="session")
def recfair_recommender() -> Any:
    """The demo recommender: the sim over HTTP (replayed), or RECFAIR_DEMO_PROFILE in-process."""
    profile = os.environ.get("RECFAIR_DEMO_PROFILE")
    if profile:
        name = os.path.splitext(os.path.basename(profile))[0]
        return CallableProvider(SimulatedRecommender(bias=profile), model=f"{DEMO_MODEL}+{name}")
    return from_config("openai", model=DEMO_MODEL, base_url=DEMO_URL)
