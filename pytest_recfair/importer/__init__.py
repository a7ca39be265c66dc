"""``python -m pytest_recfair import``: published runs into a project that replays them.

``published`` reads a FaiRLLM/FairEval result folder (and recovers its prompts and
templates), ``run`` turns it into seeds, grid, templates and a test file and writes the
project (``import_run``), ``record`` records the published replies as cassettes;
``biaslens`` does the same for BiasLens's role-play answers. See docs/reproducing.md.
"""
