"""Plain ``pytest`` start-up with the plugin installed, against ``-p no:recfair``.

A project with one plain test and two audits, run without ``--fairness`` (the audits
are skipped): the plugin must cost start-up no more than 0.2 s (issue 25). Each
round runs both commands back to back, in alternating order; the figure is the median
of the per-round differences, so machine load hits both sides alike; the time is CPU
time (user + system).

    .venv/bin/python benchmarks/bench_startup.py [--runs 9]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _machine import cpu_model


def _project(root: Path) -> None:
    """A project with a plain test, two audits and a report path in its ini (the demo's
    own conftest imports the simulator, which would hide the plugin's cost)."""
    (root / "test_plain.py").write_text("def test_plain():\n    pass\n")
    (root / "test_audit.py").write_text(
        "from pytest_recfair import fairness\n\n"
        "@fairness(attr='religion', max_snsr=0.1)\n"
        "def test_religion():\n    pass\n\n"
        "@fairness(attr='gender', max_snsr=0.1)\n"
        "def test_gender():\n    pass\n"
    )
    (root / "pytest.ini").write_text("[pytest]\nrecfair_report = reports/fairness.html\n")


def _seconds(root: Path, extra: list[str]) -> float:
    """CPU seconds (user + system) of one run: on a shared, loaded machine wall time
    mostly measures the neighbours."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra],
        cwd=root,
        capture_output=True,
        check=False,  # -p no:recfair only warns about the recfair_* ini keys
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _project(root)
        _seconds(root, [])  # warm the file cache and byte-code
        diffs, with_plugin, without = [], [], []
        for i in range(args.runs):
            pair = [["-p", "no:recfair"], []] if i % 2 else [[], ["-p", "no:recfair"]]
            t = {tuple(p): _seconds(root, p) for p in pair}
            with_plugin.append(t[()])
            without.append(t[("-p", "no:recfair")])
            diffs.append(t[()] - t[("-p", "no:recfair")])
    load = os.getloadavg()[0]
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs, load {load:.1f}")
    print(f"plain pytest, plugin installed: median {statistics.median(with_plugin):.3f} s CPU")
    print(f"plain pytest, -p no:recfair:    median {statistics.median(without):.3f} s CPU")
    cost = statistics.median(diffs)
    print(f"plugin cost, median of {args.runs} paired differences: {cost:+.3f} s (target 0.2)")


if __name__ == "__main__":
    main()
