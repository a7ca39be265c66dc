"""Jaccard, SERP*, PRAG* of (neutral, sensitive) lists (the reference's order is reversed).
The vectorised engine returns exactly the scalar floats (every final division int / int):
position i of S and j of N enter at k = max(i, j) + 1, so a histogram of entry times and a
cumsum give every k at once; only fairllm PRAG with repeats in N needs a per-k loop."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from itertools import count, islice
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_recfair.metrics.common import FloatArray, IntArray, check_choice, check_k, check_list
from pytest_recfair.vocab import VARIANTS, MetricName, Variant


def dedup(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _prepare(
    neutral: Sequence[str], sensitive: Sequence[str], k: int | None
) -> tuple[list[str], list[str]]:
    kk = check_k(k)
    return check_list(neutral, "neutral")[:kk], check_list(sensitive, "sensitive")[:kk]


def jaccard(
    neutral: Sequence[str],
    sensitive: Sequence[str],
    k: int | None = None,
    variant: Variant = "normalized",
) -> float:
    """|set(N) ∩ set(S)| / |set(N) ∪ set(S)|, the same in every variant. Two empty lists
    score 0.0 (the references divide by zero): an empty reply is never a perfect match."""
    check_choice(variant, VARIANTS, "variant")
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
    v = check_choice(variant, VARIANTS, "variant")
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
    """PRAG*: share of ordered pairs of S whose relative order N keeps (an item missing
    from N counts as ranked after every item present)."""
    v = check_choice(variant, VARIANTS, "variant")
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


NEUTRAL_PAD = -1
SENSITIVE_PAD = -2


def encode(
    lists: Sequence[Sequence[str] | None],
    K: int,
    table: dict[str, int],
    pad: int,
    label: Callable[[int], str],
) -> tuple[npt.NDArray[np.int32], IntArray]:
    """``lists`` (None: empty) as a (len(lists), K) id array padded with ``pad`` and their
    truncated lengths; ``label(i)`` names list i in errors. Types are checked once per new
    distinct item, and a list object given twice is interned once."""
    start = len(table)
    row_of: dict[int, int] = {}  # id of a list -> its row of distinct lists (0: None)
    which = [0] * len(lists)
    sizes = [0]
    flat: list[int] = []
    # __getitem__ of a defaultdict numbered by a counter interns at C speed.
    ids_of = defaultdict(count(start).__next__, table)
    get = ids_of.__getitem__
    for r, lst in enumerate(lists):
        if lst is None:
            continue
        row = row_of.get(id(lst))
        if row is None:
            if not isinstance(lst, list | tuple):
                check_list(lst, label(r))  # raises for strings and non-sequences
            try:
                ids = list(map(get, lst))
            except TypeError:  # unhashable item
                check_list(lst, label(r))
                raise
            take = ids[:K]
            row = row_of[id(lst)] = len(sizes)
            sizes.append(len(take))
            flat.extend(take)
        which[r] = row
    table.update(islice(ids_of.items(), start, None))
    if not set(map(type, islice(table, start, None))) <= {str}:  # a C-level pass
        for r, lst in enumerate(lists):
            if lst is not None:
                check_list(lst, label(r))
    lengths = np.array(sizes, dtype=np.int64)
    out = np.full((len(sizes), K), pad, dtype=np.int32)
    out[np.arange(K)[None, :] < lengths[:, None]] = np.asarray(flat, dtype=np.int32)
    rows = np.array(which, dtype=np.intp)
    return out[rows], lengths[rows]


def _cum_counts(
    t: npt.NDArray[np.integer], mask: npt.NDArray[np.bool_], K: int, weights: IntArray | None = None
) -> IntArray:
    """out[p, k-1] = sum over entries e of row p with mask[e] and t[e] < k of weights[e]."""
    P = t.shape[0]
    tt = np.where(mask, t, K).reshape(P, -1).astype(np.int64)
    tt += (np.arange(P, dtype=np.int64) * (K + 1))[:, None]
    w = None
    if weights is not None:
        w = np.broadcast_to(weights, t.shape).reshape(-1).astype(np.float64)
    hist = np.bincount(tt.ravel(), weights=w, minlength=P * (K + 1)).reshape(P, K + 1)
    return np.cumsum(hist[:, :K], axis=1).round().astype(np.int64)


def _divide(num: FloatArray, den: IntArray, ok: npt.NDArray[np.bool_]) -> FloatArray:
    out = np.zeros(num.shape, dtype=np.float64)
    np.divide(num, den.astype(np.float64), out=out, where=ok)
    return out


# A block's (pairs, K, K) tensors stay near this many elements (bounded, cache-sized).
BLOCK_ELEMENTS = 2_000_000


def curves_all_k(
    N: npt.NDArray[np.int32],
    lN: IntArray,
    S: npt.NDArray[np.int32],
    lS: IntArray,
    K: int,
    variant: Variant,
    metrics: Sequence[MetricName] = ("jaccard", "serp", "prag"),
    ent: IntArray | None = None,
) -> dict[MetricName, FloatArray]:
    """Each metric at k = 1..K for P pairs: {metric: (P, K)}; ``ent`` (P,): the N row each
    S row pairs with (default: row p)."""
    P = S.shape[0]
    if P == 0:
        return {m: np.zeros((0, K)) for m in metrics}
    # past the longest list truncation changes nothing: repeat the last column
    longest = int(max(lN.max(initial=0), lS.max(initial=0), 1))
    Ke = min(K, longest)
    # identical pairs (common: a fair value repeats the neutral list) are scored once
    ent = np.arange(P, dtype=np.int64) if ent is None else np.asarray(ent, dtype=np.int64)
    first, back = _distinct_rows(np.concatenate([ent[:, None], lS[:, None], S[:, :Ke]], axis=1))
    ent, S, lS, P = ent[first], S[first], lS[first], first.size
    N, S = np.ascontiguousarray(N[:, :Ke]), np.ascontiguousarray(S[:, :Ke])
    step = max(1, BLOCK_ELEMENTS // (Ke * Ke))
    dN_all: IntArray = np.concatenate(
        [
            np.cumsum(_first_occurrence(N[a : a + step], lN[a : a + step]), axis=1, dtype=np.int64)
            for a in range(0, N.shape[0], step)
        ]
    )
    parts: dict[MetricName, list[FloatArray]] = {m: [] for m in metrics}
    for a in range(0, P, step):
        b = min(P, a + step)
        rows = ent[a:b]
        block = _curves_block(
            N[rows], lN[rows], dN_all[rows], S[a:b], lS[a:b], Ke, variant, metrics
        )
        for m in metrics:
            parts[m].append(block[m])
    out: dict[MetricName, FloatArray] = {}
    for m in metrics:
        arr = np.concatenate(parts[m], axis=0)[back]
        if Ke < K:
            arr = np.concatenate([arr, np.repeat(arr[:, -1:], K - Ke, axis=1)], axis=1)
        out[m] = arr
    return out


def _distinct_rows(a: IntArray) -> tuple[IntArray, IntArray]:
    """First of each distinct row, which each row is; by bytes (np.unique's sort cost more)."""
    raw, width = a.tobytes(), a.dtype.itemsize * a.shape[1]
    seen: dict[bytes, int] = {}
    first: list[int] = []
    back: list[int] = []
    for p in range(a.shape[0]):
        row = raw[p * width : (p + 1) * width]
        i = seen.get(row)
        if i is None:
            i = seen[row] = len(first)
            first.append(p)
        back.append(i)
    return np.array(first, dtype=np.int64), np.array(back, dtype=np.int64)


def _first_occurrence(X: npt.NDArray[np.int32], lX: IntArray) -> npt.NDArray[np.bool_]:
    """[r, i]: position i of row r holds a real item not seen earlier in the row."""
    ar = np.arange(X.shape[1])
    # the first position equal to X[r, i] is i itself (argmax: no (K, K) mask or any())
    first: npt.NDArray[np.bool_] = (X[:, :, None] == X[:, None, :]).argmax(2) == ar
    return (ar[None, :] < lX[:, None]) & first


def _curves_block(
    Np: npt.NDArray[np.int32],
    lNp: IntArray,
    dN: IntArray,
    S: npt.NDArray[np.int32],
    lS: IntArray,
    K: int,
    variant: Variant,
    metrics: Sequence[MetricName],
) -> dict[MetricName, FloatArray]:
    out: dict[MetricName, FloatArray] = {}
    ar = np.arange(K)
    ks = ar + 1
    firstS = _first_occurrence(S, lS)
    dS: IntArray = np.cumsum(firstS, axis=1, dtype=np.int64)
    EQ = S[:, :, None] == Np[:, None, :]
    fN = EQ.argmax(2)  # first occurrence in N; K = absent (below)
    present = np.take_along_axis(EQ, fN[:, :, None], 2)[:, :, 0]  # S[i] is somewhere in N[:K]
    fN[~present] = K
    t_item = np.maximum(ar[None, :], fN)  # k > t_item: S[i] in S[:k] and in N[:k]
    lSk = np.minimum(lS[:, None], ks[None, :])
    lNk = np.minimum(lNp[:, None], ks[None, :])

    shared = firstS & present
    inter: IntArray | None = None
    if "jaccard" in metrics or ("serp" in metrics and variant == "normalized"):
        inter = _cum_counts(t_item, shared, K)

    if "jaccard" in metrics:
        assert inter is not None
        union = dS + dN - inter
        out["jaccard"] = _divide(inter.astype(np.float64), union, union > 0)

    if "serp" in metrics:
        if variant == "fairllm":
            # total_k = (len_k(S) + 1) * C_k - D_k, C_k the matches in S[:k] x N[:k], D_k
            # weighed by i; einsum, not BLAS (threads thrash on a busy machine); int32 holds
            # D_k < K**3 / 2 up to K = 1000
            acc: type[np.signedinteger[Any]] = np.int32 if K <= 1000 else np.int64
            hits: npt.NDArray[np.signedinteger[Any]] = np.cumsum(EQ, axis=2, dtype=acc)
            below: npt.NDArray[np.signedinteger[Any]] = (ar[:, None] <= ar[None, :]).astype(acc)
            C = np.einsum("pik,ik->pk", hits, below).astype(np.int64)
            D = np.einsum("pik,ik->pk", hits, below * ar[:, None].astype(acc)).astype(np.int64)
            total = (lSk + 1) * C - D
            out["serp"] = _divide(total.astype(np.float64) * 0.5, (lNk + 1) * lNk, lNk > 0)
        elif variant == "langfair":
            A = _cum_counts(t_item, present, K)
            Bw = _cum_counts(t_item, present, K, weights=ar[None, :])
            total = (lSk + 1) * A - Bw
            out["serp"] = _divide(
                total.astype(np.float64) * 0.5, (lSk + 1) * lSk, (lNk > 0) & (lSk > 0)
            )
        else:
            assert inter is not None
            rank = np.cumsum(firstS, axis=1) - 1
            rank_sum = _cum_counts(t_item, shared, K, weights=rank)
            L = np.maximum(dS, dN)
            total = L * inter - rank_sum
            out["serp"] = _divide(total.astype(np.float64), L * (L + 1) // 2, L > 0)

    if "prag" in metrics:
        out["prag"] = _prag(EQ, S, Np, lS, lSk, lNk, dS, dN, firstS, present, fN, K, variant)
    return out


def _prag(
    EQ: npt.NDArray[np.bool_],
    S: npt.NDArray[np.int32],
    Np: npt.NDArray[np.int32],
    lS: IntArray,
    lSk: IntArray,
    lNk: IntArray,
    dS: IntArray,
    dN: IntArray,
    firstS: npt.NDArray[np.bool_],
    present: npt.NDArray[np.bool_],
    fN: IntArray,
    K: int,
    variant: Variant,
) -> FloatArray:
    ar = np.arange(K)
    ks = ar + 1
    upper = np.triu(np.ones((K, K), dtype=bool), k=1)  # [i, j] = i < j
    f8: npt.NDArray[np.signedinteger[Any]] = fN.astype(np.int16 if K < 32_000 else np.int32)
    # pair i < j scores once k > max(j, fN[i]) if S[j] is absent from N or after S[i]
    # there; with first occurrences that never changes as k grows (firstS implies valid)
    a, b = (present & firstS, firstS) if variant == "normalized" else (present, ar < lS[:, None])
    keep = f8[:, :, None] < f8[:, None, :]
    keep &= a[:, :, None]
    keep &= b[:, None, :]
    keep &= upper
    # score[p, k-1] = sum_i [fN[i] < k] * #{j < k : keep[i, j]}, counted k by k: a cumsum
    # over the short last axis of keep costs 3x more
    score = np.zeros(fN.shape, dtype=np.int64)
    before = np.zeros(fN.shape, dtype=np.int32)
    for k in range(K):
        before += keep[:, :, k]
        score[:, k] = np.einsum("pi,pi->p", before, f8 <= k)

    if variant == "fairllm":
        # the notebook uses the LAST occurrence in N[:k]: rows where N repeats an S item
        rows = np.flatnonzero((EQ.sum(2) >= 2).any(1))
        if rows.size:
            score[rows] = _prag_last_occurrence(EQ[rows], lS[rows], K)

    if variant == "normalized":
        m = dS
        pairs = m * (m - 1) // 2
        res = _divide(score.astype(np.float64), pairs, (m >= 2) & (dN > 0))
        single = (m == 1) & (fN[:, :1] < ks[None, :])  # the one item is kept at all
        res[single] = 1.0
        return res
    m = lSk
    pairs = m * (m - 1) // 2 if variant == "fairllm" else m * (m + 1)
    res = _divide(score.astype(np.float64), pairs, (m >= 2) & (lNk > 0))
    # len(S) == 1: 1 only when S == N as lists
    same_head = S[:, 0] == Np[:, 0]
    res[(m == 1) & (lNk == 1) & same_head[:, None]] = 1.0
    return res


def _prag_last_occurrence(EQ: npt.NDArray[np.bool_], lS: IntArray, K: int) -> IntArray:
    ar = np.arange(K)
    Q = EQ.shape[0]
    last = np.maximum.accumulate(np.where(EQ, ar[None, None, :], -1), axis=2)
    upper = np.triu(np.ones((K, K), dtype=bool), k=1)
    score = np.zeros((Q, K), dtype=np.int64)
    for k in range(1, K + 1):
        a = last[:, :k, k - 1]
        pres = a >= 0
        valid = ar[None, :k] < lS[:, None]
        ok = pres[:, :, None] & valid[:, None, :] & upper[None, :k, :k]
        ok &= ~pres[:, None, :] | (a[:, :, None] < a[:, None, :])
        score[:, k - 1] = ok.sum(axis=(1, 2))
    return score
