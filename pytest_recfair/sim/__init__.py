"""A simulated LLM recommender with planted biases, for tests, demos and benchmarks.

``SimulatedRecommender(bias=..., noise=0.0, seed=0)`` is a ``prompt -> reply text``
callable; ``SimServer(recommender, latency_ms=..., faults=...)`` serves it as an
OpenAI-compatible ``/v1/chat/completions`` on loopback; ``python -m pytest_recfair.sim``
does the same from the command line. It reads prompts with the vocabulary of
``pytest_recfair.prompts`` (its grids and translation tables).
"""

from __future__ import annotations

from pytest_recfair.sim.heterogeneity import Heterogeneity
from pytest_recfair.sim.profile import BiasProfile, Faults, ValueTable, load_profile
from pytest_recfair.sim.recognise import Recognised, Recogniser, ValueMatch, entity_key
from pytest_recfair.sim.recommender import REFUSALS, Reply, SimulatedRecommender
from pytest_recfair.sim.server import DEFAULT_MODEL, ServerStats, SimServer
from pytest_recfair.sim.vocab import ValueForm, Vocabulary

__all__ = [
    "DEFAULT_MODEL",
    "REFUSALS",
    "BiasProfile",
    "Faults",
    "Heterogeneity",
    "Recognised",
    "Recogniser",
    "Reply",
    "ServerStats",
    "SimServer",
    "SimulatedRecommender",
    "ValueForm",
    "ValueMatch",
    "ValueTable",
    "Vocabulary",
    "entity_key",
    "load_profile",
]
