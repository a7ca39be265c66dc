"""The bundled demo replayed serially against ``-n 2`` (pytest-xdist), wall time.

Each round runs both commands back to back, in alternating order, at the repository's
root (9 audits replayed from the cassettes, the replay cache warmed by a first run); the
figures are medians over the rounds. Wall time, since workers are bought for it; the
CPU time (user + system of the whole process tree) says what the workers cost.

    .venv/bin/python benchmarks/bench_xdist.py [--runs 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _machine import cpu_model

ROOT = Path(__file__).resolve().parent.parent


def _run(extra: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one demo run (it must pass)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "--fairness", "-q", "-p", "no:cacheprovider", *extra],
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    xdist = ["-n", str(args.workers)]
    _run([])  # warm the replay cache, the file cache and byte-code
    times: dict[str, list[tuple[float, float]]] = {"serial": [], "xdist": []}
    for i in range(args.runs):
        order = [("serial", []), ("xdist", xdist)]
        for name, extra in order if i % 2 == 0 else order[::-1]:
            times[name].append(_run(extra))
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    for name, label in (("serial", "serial"), ("xdist", f"-n {args.workers}")):
        wall = statistics.median(t[0] for t in times[name])
        cpu = statistics.median(t[1] for t in times[name])
        print(f"demo {label:6}: median of {args.runs} {wall:.2f} s wall, {cpu:.2f} s CPU")
    ratio = statistics.median(t[0] for t in times["xdist"]) / statistics.median(
        t[0] for t in times["serial"]
    )
    print(f"-n {args.workers} / serial wall time: {ratio:.2f}x")


if __name__ == "__main__":
    main()
