"""Edit a CSV file of published data in place, row by row, as Python's csv reads it."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path


def rewrite_csv(path: Path, change: Callable[[list[list[str]]], list[list[str]]]) -> None:
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    with path.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(change(rows))
