"""Where the real recorded API calls live: the project's ../shared/real-cassettes.

CI clones the repository with shared/ beside it; RECFAIR_REAL_CASSETTES overrides.
Tests that need them skip (with the reason) on a machine that has neither.
"""

from __future__ import annotations

import os
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
_CANDIDATES = [
    os.environ.get("RECFAIR_REAL_CASSETTES", ""),
    str(_ROOT.parent / "shared" / "real-cassettes"),
    "/work/shared/real-cassettes",
]
REAL = next((Path(c) for c in _CANDIDATES if c and Path(c).is_dir()), Path(_CANDIDATES[1]))
