"""Run a command and measure its own peak RSS and CPU time, through a small launcher.

On Linux a child's ``ru_maxrss`` (``os.wait4`` / ``RUSAGE_CHILDREN``) keeps the high-water
mark of the memory it had *before* ``exec``: a ``fork``/``vfork`` of the parent, whose
pages all count. A benchmark that generated 1,000 entities' cassettes in-process (219 MB)
and then spawned pytest saw 219 MB for a run that peaks at 121 MB, and 691 MB at 4,000
entities: the figure was the benchmark's own size, and it moved with whatever the parent
held at the time (issue 24 point 4). The launcher below is a fresh interpreter of ~10 MB;
the command it spawns starts from that, so the grandchild's ``ru_maxrss`` is the
command's own peak.

    from _peak import run_measured
    code, out, peak_mb, cpu_s = run_measured(cmd, cwd=root, env=env)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

_LAUNCHER = """
import json, os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
with open(sys.argv[1], "w") as out:
    json.dump({"code": os.waitstatus_to_exitcode(status), "maxrss_kb": usage.ru_maxrss,
               "cpu": usage.ru_utime + usage.ru_stime}, out)
"""


def run_measured(
    cmd: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None
) -> tuple[int, str, float, float]:
    """(exit code, output, peak RSS in MB, CPU seconds) of ``cmd`` alone."""
    with tempfile.TemporaryDirectory(prefix="recfair-peak-") as tmp:
        result = Path(tmp) / "usage.json"
        proc = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, str(result), *cmd],
            cwd=cwd,
            env=dict(env if env is not None else os.environ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
        usage = json.loads(result.read_text())
    return int(usage["code"]), proc.stdout, usage["maxrss_kb"] / 1024, float(usage["cpu"])
