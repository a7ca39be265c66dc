"""Where the real recorded API calls live: the project's ../shared/real-cassettes.

CI clones the repository with shared/ beside it; RECFAIR_REAL_CASSETTES overrides.
"""

from __future__ import annotations

import os
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
REAL = Path(os.environ.get("RECFAIR_REAL_CASSETTES", _ROOT.parent / "shared" / "real-cassettes"))
