"""A simulated LLM recommender with planted biases, for tests, demos and benchmarks.

``recommender.SimulatedRecommender(bias=..., noise=0.0, seed=0)`` is a ``prompt -> reply
text`` callable; ``server.SimServer(recommender, latency_ms=..., faults=...)`` serves it as
an OpenAI-compatible ``/v1/chat/completions`` on loopback (with rate limits; ``batch``:
the batch endpoints, the reply and error bodies); ``python -m pytest_recfair.sim`` does the same
from the command line. ``profile`` reads bias profiles and fault plans, ``planted`` the
item-side, position and role-play biases, ``recognise`` reads prompts with the
vocabulary of ``pytest_recfair.prompts``.
"""
