"""The item-side audit (LMRec): the kind (:mod:`.kind`), its scoring against a catalogue
(:mod:`.scoring`) and its report sections (:mod:`.sections`)."""
