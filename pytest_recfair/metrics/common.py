"""What the metrics modules share: argument checks, the one source of randomness, resample
weights, Holm. Resample counts are kept one byte a cell (float64: 160 MB at 10,000 entities
x 2,000 draws) and widened a block of rows at a time: up to ``BLOCK_CELLS`` one block (bit
for bit a float64 product); larger ones change at most a sum's last bits."""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from pytest_recfair.errors import ConfigError

_Choice = TypeVar("_Choice", bound=str)


def check_choice(value: object, allowed: tuple[_Choice, ...], name: str) -> _Choice:
    """``value`` if one of ``allowed`` (vocab's VARIANTS, METRICS...), else one ConfigError line."""
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(
            f"{name} must be one of {', '.join(repr(a) for a in allowed)}; got {value!r}. "
            f"Pass one of the allowed names."
        )
    return value


def check_positive_int(value: object, name: str) -> int:
    """bool and float are refused even when integral."""
    if isinstance(value, bool | float) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be a positive int; got {type(value).__name__} {value!r}.")
    if (ivalue := operator.index(cast(Any, value))) <= 0:
        raise ConfigError(f"{name} must be a positive int (>= 1); got {ivalue}.")
    return ivalue


def check_k(k: object, name: str = "k") -> int | None:
    """``None`` (the full lists) or a positive int."""
    if k is None:
        return None
    return check_positive_int(k, name)


def check_number(value: object, name: str, ok: Callable[[float], bool], what: str) -> float:
    """``value`` as a float, or one ConfigError line saying what ``name`` must be."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not ok(value):
        raise ConfigError(f"{name} must be {what}; got {value!r}.")
    return float(value)


def check_confidence(confidence: object) -> float:
    return check_number(confidence, "confidence", lambda c: 0 < c < 1, "in (0, 1), e.g. 0.95")


def make_rng(seed: object) -> np.random.Generator:
    """The only source of randomness: an explicit int seed or a caller's Generator."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(
            f"seed must be an int or a numpy.random.Generator; got {type(seed).__name__} {seed!r}."
        )
    if int(seed) < 0:
        raise ConfigError(f"seed must be a non-negative int; got {seed!r}.")
    return np.random.default_rng(int(seed))


def check_list(items: object, name: str) -> list[str]:
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise TypeError(
            f"{name} must be a list of str (a ranked recommendation list); got "
            f"{type(items).__name__} {r if len(r := repr(items)) <= 60 else r[:57] + '...'}."
        )
    out = list(items)
    for i, x in enumerate(out):
        if not isinstance(x, str):
            raise TypeError(
                f"{name}[{i}] must be a str item; got {type(x).__name__} {x!r}. "
                f"Parse replies to lists of strings first (missing items are not allowed)."
            )
    return out


FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Interval = tuple[float, float]
CountArray = npt.NDArray[Any]  # (B, E) unsigned integer counts (or float64 from a caller)


#: Cells of a weight matrix converted to float64 at once (16 MB: 2,000 draws x 1,048).
BLOCK_CELLS = 1 << 21
#: Resample indices drawn per block (2 MB; 8 MB blocks were the paper-scale peak).
DRAW_BLOCK = 1 << 18


def draw_block_rows(E: int) -> int:
    return max(1, BLOCK_CELLS // max(E, 1))


def compact_counts(W: CountArray, counts: npt.NDArray[np.int64]) -> CountArray:
    """``W``, widened when ``counts`` (about to be stored in it) do not fit its dtype."""
    if counts.size and int(counts.max()) > np.iinfo(W.dtype).max:
        return W.astype(np.min_scalar_type(int(counts.max())))
    return W


def products(W: CountArray, *mats: FloatArray) -> tuple[FloatArray, ...]:
    """``W @ m`` (float64) for every ``m``, W widened one block of rows at a time."""
    B, E = W.shape
    rows = draw_block_rows(E)
    if rows >= B:
        Wf = np.asarray(W, dtype=np.float64)
        return tuple(Wf @ m for m in mats)
    outs = tuple(np.empty((B, *m.shape[1:]), dtype=np.float64) for m in mats)
    for a in range(0, B, rows):
        block = np.asarray(W[a : a + rows], dtype=np.float64)
        for out, m in zip(outs, mats, strict=True):
            out[a : a + rows] = block @ m
    return outs


def resample_weights(rng: np.random.Generator, B: int, E: int) -> CountArray:
    """(B, E) draw counts of each entity per resample, in the smallest dtype that holds
    them; drawn in blocks of rows (the numbers of one draw: ~256k indices at a time)."""
    W: CountArray = np.empty((B, E), dtype=np.uint8)
    rows = max(1, DRAW_BLOCK // max(E, 1))
    for a in range(0, B, rows):
        b = min(B, a + rows)
        idx = rng.integers(0, E, size=(b - a, E), dtype=np.int64)
        idx += (np.arange(b - a, dtype=np.int64) * E)[:, None]
        counts = np.bincount(idx.ravel(), minlength=(b - a) * E).reshape(b - a, E)
        W = compact_counts(W, counts)
        W[a:b] = counts
    return W


def percentile_ci(x: FloatArray, confidence: float) -> npt.NDArray[np.float64]:
    """Percentile interval over axis 0, NaN resamples left out -> (..., 2)."""
    a = (1.0 - confidence) / 2.0
    with warnings.catch_warnings():  # an all-NaN cell (no items ever) gives (NaN, NaN)
        warnings.simplefilter("ignore", RuntimeWarning)
        q = np.nanquantile(np.where(np.isfinite(x), x, np.nan), [a, 1.0 - a], axis=0)
    return np.moveaxis(np.asarray(q, dtype=np.float64), 0, -1)


def maxt(observed: FloatArray, null: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Raw and family-wise (studentized single-step max-T) permutation p-values."""
    B = null.shape[0]
    raw = (1.0 + np.sum(null >= observed - 1e-12, axis=0)) / (B + 1.0)
    with np.errstate(invalid="ignore"):
        mu = np.nanmean(null, axis=0)
        sd = np.nanstd(null, axis=0)
    sd = np.where(np.isfinite(sd) & (sd > 0), sd, np.inf)  # a constant null: z = 0
    z_obs = np.nan_to_num((observed - mu) / sd, nan=-np.inf)
    z_null = np.nan_to_num((null - mu) / sd, nan=-np.inf).reshape(B, -1).max(axis=1)
    adj = (1.0 + np.sum(z_null[:, None] >= z_obs.ravel()[None, :] - 1e-12, axis=0)) / (B + 1.0)
    return raw, np.maximum(adj.reshape(observed.shape), raw)


def holm(pvalues: Sequence[float] | FloatArray) -> list[float]:
    """Holm step-down adjusted p-values (monotone, capped at 1), in input order; a NaN p
    (not tested) stays NaN, outside the family."""
    p = [float(x) for x in pvalues]
    order = sorted((i for i, x in enumerate(p) if not math.isnan(x)), key=p.__getitem__)
    out = [math.nan] * len(p)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p[i]))
        out[i] = running
    return out


def paired_p(delta: FloatArray, margin: float) -> FloatArray:
    """One-sided bootstrap p of "grew by more than ``margin``" from (B, ...) paired changes;
    a NaN change counts against H1."""
    return np.asarray((1.0 + np.sum(~(delta > margin), axis=0)) / (delta.shape[0] + 1.0))


def shared_rows(a: Sequence[str], b: Sequence[str]) -> tuple[list[int], list[int]]:
    """Rows of the entities ``a`` and ``b`` share, in ``a``'s order."""
    at = {e: j for j, e in enumerate(b)}
    pairs = [(i, at[e]) for i, e in enumerate(a) if e in at]
    return [i for i, _ in pairs], [j for _, j in pairs]
