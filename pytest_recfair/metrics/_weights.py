"""Resample weights kept small: integer counts, multiplied a block of rows at a time.

A bootstrap or sign-flip test over E entities with B draws needs a (B, E) matrix of
per-entity counts. Held as float64 it is 160 MB at 10,000 entities and 2,000 draws (and
it was drawn through an int64 array of the same size): the one part of scoring an audit
that grew faster than entities x values. The counts are small integers, so they are kept
in the smallest unsigned dtype that holds them (one byte per cell) and turned into float64
only a block of rows at a time, for the matrix products.

Up to ``BLOCK_CELLS`` cells the products take one block, so they are the very products
(bit for bit) of a float64 matrix; larger matrices are multiplied in row blocks, which
changes at most the last bits of a sum (as BLAS's own thread count already does).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "BLOCK_CELLS",
    "CountArray",
    "compact_counts",
    "draw_block_rows",
    "products",
    "reusable",
]

FloatArray = npt.NDArray[np.float64]
CountArray = npt.NDArray[Any]  # (B, E) unsigned integer counts (or float64 from a caller)

#: Cells of a weight matrix converted to float64 at once (16 MB); 2,000 draws over up to
#: 1,048 entities are one block.
BLOCK_CELLS = 1 << 21


def draw_block_rows(E: int, cells: int = BLOCK_CELLS) -> int:
    """Rows of a (B, E) draw to make (or convert) at once: ``cells`` cells, at least one."""
    return max(1, cells // max(E, 1))


def compact_counts(W: CountArray, counts: npt.NDArray[np.int64]) -> CountArray:
    """``W``, widened when ``counts`` (about to be stored in it) do not fit its dtype."""
    if counts.size and int(counts.max()) > np.iinfo(W.dtype).max:
        return W.astype(np.min_scalar_type(int(counts.max())))
    return W


def reusable(W: CountArray) -> CountArray:
    """``W`` to keep for many products: float64 if it is one block (no conversion per
    product, at most 16 MB), else the compact counts."""
    return np.asarray(W, dtype=np.float64) if W.size <= BLOCK_CELLS else W


def products(W: CountArray, *mats: FloatArray) -> tuple[FloatArray, ...]:
    """``W @ m`` (float64) for every ``m`` (a matrix or a vector of E rows); W is
    converted to float64 one block of rows at a time."""
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
