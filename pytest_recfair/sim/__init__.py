"""A simulated LLM recommender with planted biases (``SimulatedRecommender``), served as an
OpenAI/Anthropic-compatible API on loopback (``SimServer``, ``python -m pytest_recfair.sim``),
for tests, demos and benchmarks."""
