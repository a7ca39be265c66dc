"""Similarity of one neutral list and one sensitive list: Jaccard, SERP*, PRAG*.

These are the scalar definitions, written to read like the references in
``/work/shared/reference/metrics.md``. The references call ``metric(sensitive, neutral)``;
this API takes ``(neutral, sensitive)`` and maps them. The vectorised engine in
``_engine.py`` must return exactly the same floats (tests compare with ``==``), so every
final division here is "int / int" or "int * 0.5 / int", which numpy reproduces bit for bit.

Both lists are truncated to their first ``k`` items before anything else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pytest_recfair.metrics._check import check_k, check_list, check_variant, truncate
from pytest_recfair.vocab import Variant

__all__ = ["dedup", "jaccard", "prag", "serp"]


def dedup(items: Sequence[str]) -> list[str]:
    """Keep the first occurrence of every item, in order."""
    return list(dict.fromkeys(items))


def _prepare(
    neutral: Sequence[str], sensitive: Sequence[str], k: int | None
) -> tuple[list[str], list[str]]:
    kk = check_k(k)
    n = truncate(check_list(neutral, "neutral"), kk)
    s = truncate(check_list(sensitive, "sensitive"), kk)
    return n, s


def jaccard(
    neutral: Sequence[str],
    sensitive: Sequence[str],
    k: int | None = None,
    variant: Variant = "normalized",
) -> float:
    """|set(N) ∩ set(S)| / |set(N) ∪ set(S)|, the same in every variant.

    Two empty lists score 0.0 (the references divide by zero): an empty reply is a
    failure to recommend, never a perfect match.
    """
    check_variant(variant)
    n, s = _prepare(neutral, sensitive, k)
    a, b = set(s), set(n)
    union = len(a | b)
    if union == 0:
        return 0.0
    return len(a & b) / union


def serp(
    neutral: Sequence[str],
    sensitive: Sequence[str],
    k: int | None = None,
    variant: Variant = "normalized",
) -> float:
    """SERP*: items of S found in N, weighted by their rank in S."""
    v = check_variant(variant)
    n, s = _prepare(neutral, sensitive, k)
    if v == "fairllm":
        # FaiRLLM calc_serp_ms(x=S, y=N): every occurrence in N counts, the top item of S
        # weighs len(S) + 1, and the denominator uses len(N).
        if not n:
            return 0.0
        counts = Counter(n)
        ls = len(s)
        total = sum(counts[x] * (ls - i + 1) for i, x in enumerate(s))
        return total * 0.5 / ((len(n) + 1) * len(n))
    if v == "langfair":
        # LangFair SERP.evaluate(list1=S, list2=N): membership in N, denominator len(S).
        # The reference divides by zero when S is empty and N is not; we return 0.0.
        if not n or not s:
            return 0.0
        members = set(n)
        ls = len(s)
        total = sum(ls - i + 1 for i, x in enumerate(s) if x in members)
        return total * 0.5 / ((ls + 1) * ls)
    # normalized: de-duplicate both (first occurrence), L = the longer de-duplicated list;
    # the item at rank r of S weighs L - r; divide by the best total L(L+1)/2.
    s2, n2 = dedup(s), dedup(n)
    big = max(len(s2), len(n2))
    if big == 0:
        return 0.0
    members = set(n2)
    total = sum(big - r for r, x in enumerate(s2) if x in members)
    return total / (big * (big + 1) // 2)


def _pair_score(pos: list[int]) -> int:
    """Pairs i < j of S whose order N keeps; pos[i] is S[i]'s position in N or -1."""
    score = 0
    m = len(pos)
    for i in range(m):
        a = pos[i]
        if a == -1:
            continue
        for j in range(i + 1, m):
            b = pos[j]
            if b == -1 or a < b:
                score += 1
    return score


def prag(
    neutral: Sequence[str],
    sensitive: Sequence[str],
    k: int | None = None,
    variant: Variant = "normalized",
) -> float:
    """PRAG*: share of ordered pairs of S whose relative order N keeps.

    An item of a pair that is missing from N counts as ranked after every item present.
    """
    v = check_variant(variant)
    n, s = _prepare(neutral, sensitive, k)
    if v == "normalized":
        s2, n2 = dedup(s), dedup(n)
        if not s2 or not n2:
            return 0.0
        where = {x: j for j, x in enumerate(n2)}
        if len(s2) == 1:
            # A single item has no pair to order: score whether it was kept at all.
            return 1.0 if s2[0] in where else 0.0
        m = len(s2)
        return _pair_score([where.get(x, -1) for x in s2]) / (m * (m - 1) // 2)
    if not s or not n:
        return 0.0
    if len(s) == 1:
        return 1.0 if s == n else 0.0
    m = len(s)
    if v == "fairllm":
        last: dict[str, int] = {}
        for j, x in enumerate(n):
            last[x] = j  # the notebook's loop keeps the LAST occurrence in N
        return _pair_score([last.get(x, -1) for x in s]) / (m * (m - 1) // 2)
    first: dict[str, int] = {}
    for j, x in enumerate(n):
        first.setdefault(x, j)  # LangFair uses list.index: the FIRST occurrence
    return _pair_score([first.get(x, -1) for x in s]) / (m * (m + 1))
