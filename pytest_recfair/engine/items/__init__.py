"""The item-side audit (LMRec): the kind (:mod:`.kind`), its scoring against a catalogue
(:mod:`.scoring`); its evidence and report sections live with the kind."""
