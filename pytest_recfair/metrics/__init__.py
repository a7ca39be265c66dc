"""The scoring core: list similarities, attribute aggregates and their uncertainty.

Pure numpy + stdlib; callers import from the module that defines a name:

- ``lists``: Jaccard / SERP* / PRAG* for one (neutral, sensitive) pair in three variants
  ("normalized", "fairllm", "langfair"), and vectorised at every k for many pairs;
- ``aggregate``: similarity matrices, attribute tables, SNSR / SNSV / PAFS, entropy,
  curves over k, and the FaiRLLM-notebook row reader;
- ``stats``: the reported intervals, entity bootstrap, paired comparison of two runs,
  repeat noise floor; ``spread``: SNSR / SNSV / PAFS bootstrap-t intervals;
- ``inference``: t-intervals and the family-wise drift test (``_drift_core`` its exactly
  studentised, bias-corrected members); ``pairs``: two models compared by whole-row swaps;
- ``quality``, ``itemshift``, ``exposure``, ``positions``, ``roleplay`` + ``roleplay_gate``:
  the other kinds of audit's statistics; ``common``: argument checks, seeds, resample
  weights.

See docs/metrics.md for formulas and worked examples.
"""
