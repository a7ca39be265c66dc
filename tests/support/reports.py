"""The reports of a demo run, rendered again from its JSON report by the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def render_reports(out: Path, cwd: Path) -> list[dict[str, Any]]:
    """Render ``out/r.json`` as ``out/r.html`` and ``out/r.md``; the JSON's results."""
    for to in ("html", "md"):
        subprocess.run(
            [sys.executable, "-m", "pytest_recfair", "report", str(out / "r.json"), "--to", to,
             "-o", str(out / f"r.{to}")],
            cwd=cwd, check=True, timeout=120,
        )  # fmt: skip
    results: list[dict[str, Any]] = json.loads((out / "r.json").read_text(encoding="utf-8"))[
        "results"
    ]
    return results
