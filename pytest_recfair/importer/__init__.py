"""``python -m pytest_recfair import``: published runs into a project that replays them.

``published`` reads a FaiRLLM/FairEval result folder (and recovers its prompts and
templates), ``layout`` turns it into seeds, grid, templates and a test file, ``run``
writes the project and records the published replies as cassettes (``import_run``);
``biaslens`` does the same for BiasLens's role-play answers. See docs/reproducing.md.
"""
