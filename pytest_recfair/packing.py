"""Arrays as compact bytes for the replay cache: not ~32 bytes per Python float at the
run's peak; unpacked bit for bit."""

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
