"""Resampling helpers shared by the item-side and candidate-position statistics."""

from __future__ import annotations

import warnings

import numpy as np
import numpy.typing as npt

__all__ = ["maxt", "percentile_ci", "resample_weights"]

FloatArray = npt.NDArray[np.float64]


def resample_weights(rng: np.random.Generator, B: int, E: int) -> FloatArray:
    idx = rng.integers(0, E, size=(B, E), dtype=np.int64) + (np.arange(B) * E)[:, None]
    return np.bincount(idx.ravel(), minlength=B * E).reshape(B, E).astype(np.float64)


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
