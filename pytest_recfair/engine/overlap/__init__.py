"""The list-overlap audit (FaiRLLM / FairEval): the kind (:mod:`.kind`), its reply parsing
(with the kind) and its chunked, mergeable scores (:mod:`.tally`)."""
