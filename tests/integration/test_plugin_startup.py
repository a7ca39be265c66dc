"""pytest start-up: loading the plugin imports none of the heavy modules of an audit."""

from __future__ import annotations

import subprocess
import sys

from tests.support.plugin import REPO

HEAVY = ("numpy", "httpx", "jsonschema", "vcr", "rapidfuzz", "pytest_recfair.engine")


def test_plugin_import_is_light() -> None:
    code = (
        "import sys, pytest_recfair.plugin as p; "
        "p.marker(); "
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
