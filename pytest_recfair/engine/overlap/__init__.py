"""The list-overlap audit (FaiRLLM / FairEval): the kind (:mod:`.kind`), its reply parsing
(:mod:`.scoring`) and its chunked, mergeable scores (:mod:`.tally`)."""
