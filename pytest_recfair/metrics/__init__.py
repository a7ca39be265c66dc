"""The scoring core: list similarities, attribute aggregates and their uncertainty.

Pure numpy + stdlib. Submodules:

- ``lists``: scalar Jaccard / SERP* / PRAG* for one (neutral, sensitive) pair, in three
  variants ("normalized", "fairllm", "langfair");
- ``aggregate``: similarity matrices, attribute tables, SNSR / SNSV / PAFS, entropy,
  curves over k, and the FaiRLLM-notebook row reader;
- ``stats``: the reported intervals, entity bootstrap, paired comparison of two runs,
  repeat noise floor;
- ``inference``: t-intervals, inverted bootstrap-t spread intervals, the family-wise drift test.

See docs/metrics.md for formulas and worked examples.
"""

from __future__ import annotations

from pytest_recfair.metrics.aggregate import (
    AttributeTable,
    SimilarityCube,
    SimilarityMatrix,
    ValueStat,
    attribute_curves,
    attribute_table,
    curves,
    entropy,
    pafs,
    rows_to_lists,
    similarity_cube,
    similarity_matrix,
    snsr,
    snsv,
    summarize,
)
from pytest_recfair.metrics.lists import jaccard, prag, serp
from pytest_recfair.metrics.stats import (
    AttributeIntervals,
    BootstrapResult,
    Comparison,
    NoiseFloor,
    bootstrap,
    compare,
    forget_weights,
    intervals,
    noise_floor,
    noise_floor_of,
    noise_per_entity,
)
from pytest_recfair.vocab import (
    METRICS,
    MISSING_POLICIES,
    STATISTICS,
    VARIANTS,
    MetricName,
    MissingPolicy,
    Statistic,
    Variant,
)

__all__ = [
    "METRICS",
    "MISSING_POLICIES",
    "STATISTICS",
    "VARIANTS",
    "AttributeIntervals",
    "AttributeTable",
    "BootstrapResult",
    "Comparison",
    "MetricName",
    "MissingPolicy",
    "NoiseFloor",
    "SimilarityCube",
    "SimilarityMatrix",
    "Statistic",
    "ValueStat",
    "Variant",
    "attribute_curves",
    "attribute_table",
    "bootstrap",
    "compare",
    "curves",
    "entropy",
    "forget_weights",
    "intervals",
    "jaccard",
    "noise_floor",
    "noise_floor_of",
    "noise_per_entity",
    "pafs",
    "prag",
    "rows_to_lists",
    "serp",
    "similarity_cube",
    "similarity_matrix",
    "snsr",
    "snsv",
    "summarize",
]
