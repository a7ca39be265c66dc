"""Arrays as compact bytes for the replay cache (:mod:`pytest_recfair.engine.replaymemo`).

A paper-scale audit's similarity rows and counts are millions of numbers: as lists of
Python floats they cost ~32 bytes each and, written at once, a transient of tens of MB
at the run's peak. Packed, each array is the zlib of its raw bytes (level 1: similarity
values take few distinct values and compress several-fold), and unpacking gives the
same array bit for bit. Pure: numpy and the stdlib.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import numpy.typing as npt


def pack(array: npt.ArrayLike, dtype: npt.DTypeLike) -> bytes:
    """The zlib of ``array``'s bytes as ``dtype`` (C order)."""
    return zlib.compress(np.ascontiguousarray(array, dtype=dtype).tobytes(), 1)


def unpack(data: bytes, dtype: npt.DTypeLike, shape: tuple[int, ...]) -> npt.NDArray[Any]:
    """The array :func:`pack` packed (a writable copy)."""
    return np.frombuffer(zlib.decompress(data), dtype=dtype).reshape(shape).copy()
