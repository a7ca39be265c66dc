"""The item-side audit (LMRec): the kind (:mod:`.kind`), its scoring against a catalogue
(:mod:`.scoring`) and its report sections (:mod:`.sections`)."""

from __future__ import annotations

from pytest_recfair.engine.items.kind import ITEMS, ItemAudit

__all__ = ["ITEMS", "ItemAudit"]
