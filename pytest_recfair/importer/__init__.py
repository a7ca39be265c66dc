"""``python -m pytest_recfair import faireval|fairllm DIR``: re-check a published audit.

Turns a FaiRLLM/FairEval result folder into seeds, a grid, templates, cassettes and a
test file, so that ``pytest --fairness`` in the output folder recomputes the published
tables offline (see docs/reproducing.md).
"""

from __future__ import annotations

from pytest_recfair.importer.published import PublishedRun, read_folder
from pytest_recfair.importer.run import FLAVOURS, ImportSummary, import_run

__all__ = ["FLAVOURS", "ImportSummary", "PublishedRun", "import_run", "read_folder"]
