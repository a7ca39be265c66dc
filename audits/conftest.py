"""The recommender of the bundled demo audit.

By default: the simulated recommender (``python -m pytest_recfair.sim --bias demo``)
reached over HTTP as an OpenAI-compatible API, the way a real model would be. Its replies
are recorded in fixtures/cassettes/, so ``pytest --fairness`` replays them offline.
To record again, serve the sim on the demo's port and run with ``--fairness-record``::

    python -m pytest_recfair.sim --port 8765 --bias demo --model recfair-sim-demo \
        --noise 0.08 --seed 7 &
    pytest --fairness --fairness-record=once --fairness-update
    pytest --fairness --fairness-update   # after stopping the sim: baselines from replay

``--noise 0.08`` swaps 2 of 25 titles on every call, like sampling at temperature > 0, so
the CIs, the noise floor and the gate's significance test have something to measure.

``RECFAIR_DEMO_PROFILE=<bias profile YAML or bundled name>`` swaps in an in-process sim
with that profile instead (no cassettes: a callable has no HTTP traffic to record). It
uses the same noise and seed, so with the ``demo`` profile and the tests run in file order
in one process it reproduces the recorded replies. That is how docs/demo.md plants a
regression: ``RECFAIR_DEMO_PROFILE=audits/profiles/regressed.yaml``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from pytest_recfair.providers import CallableProvider, from_config
from pytest_recfair.sim.recommender import SimulatedRecommender

DEMO_URL = "http://127.0.0.1:8765/v1"  # part of each recorded request: keep it fixed
DEMO_MODEL = "recfair-sim-demo"
DEMO_NOISE = 0.08  # the recording's --noise
DEMO_SEED = 7  # the recording's --seed
JUDGE_MODEL = "recfair-sim-judge"  # the role-play demo's judge: the same sim, another name


@pytest.fixture(scope="session")
def recfair_recommender() -> Any:
    """The demo recommender: the sim over HTTP (replayed), or RECFAIR_DEMO_PROFILE in-process."""
    profile = os.environ.get("RECFAIR_DEMO_PROFILE")
    if profile:
        name = os.path.splitext(os.path.basename(profile))[0]
        return CallableProvider(
            SimulatedRecommender(bias=profile, noise=DEMO_NOISE, seed=DEMO_SEED),
            model=f"{DEMO_MODEL}+{name}",
        )
    return from_config("openai", model=DEMO_MODEL, base_url=DEMO_URL)


@pytest.fixture(scope="session")
def recfair_judge() -> Any:
    """The judge of the role-play demo's Why answers: the sim again (it recognises the
    judge prompt), over HTTP (replayed) or in-process with RECFAIR_DEMO_PROFILE."""
    profile = os.environ.get("RECFAIR_DEMO_PROFILE")
    if profile:
        sim = SimulatedRecommender(bias=profile, noise=DEMO_NOISE, seed=DEMO_SEED)
        return CallableProvider(sim, model=JUDGE_MODEL)
    return from_config("openai", model=JUDGE_MODEL, base_url=DEMO_URL)
