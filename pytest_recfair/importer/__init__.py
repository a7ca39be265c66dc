"""``python -m pytest_recfair import``: published runs into a project that replays them
(docs/reproducing.md)."""
