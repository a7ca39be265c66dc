"""benchmarks/_peak.py: a command's peak RSS, not the benchmark's (issue 24 point 4).

On Linux a child's ``ru_maxrss`` keeps the high-water mark of the pages it shared with
its parent before ``exec``; the benchmarks used to report their own size as pytest's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _peak import run_measured

BALLAST_MB = 150


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss semantics of Linux")
def test_the_peak_of_a_small_command_is_its_own_not_its_parents(tmp_path: Path) -> None:
    ballast = bytearray(BALLAST_MB * 1024 * 1024)
    ballast[::4096] = b"\x01" * len(ballast[::4096])  # touched: resident
    small = [sys.executable, "-c", "pass"]
    proc = subprocess.Popen(small)
    _, _, usage = os.wait4(proc.pid, 0)
    naive_mb = usage.ru_maxrss / 1024
    code, _, peak_mb, _ = run_measured(small, cwd=tmp_path)
    assert code == 0
    assert naive_mb > BALLAST_MB  # the artefact: the parent's pages counted
    assert peak_mb < 60  # a bare interpreter, measured through the launcher
    del ballast
