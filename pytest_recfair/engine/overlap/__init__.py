"""The list-overlap audit (FaiRLLM / FairEval): the kind (:mod:`.kind`), its reply parsing
(:mod:`.scoring`) and its chunked, mergeable scores (:mod:`.tally`)."""

from __future__ import annotations

from pytest_recfair.engine.overlap.kind import OVERLAP, OverlapAudit

__all__ = ["OVERLAP", "OverlapAudit"]
