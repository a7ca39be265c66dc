"""Benchmark: parsing stays linear -- worst-case replies of 100 KB and 1 MB, both styles.

Run:  .venv/bin/python benchmarks/bench_parse_worst.py [--runs 5] [--mb 1.0]

Each shape is a reply text built to hit one regular expression or loop of the parser where
a naive pattern backtracks (long runs of digits, unclosed brackets, runs of '*', hundreds of
separators in one entry, thousands of 'x:' lines, ...) plus a realistic long numbered list.
Every shape is timed through ``parse.reply(text, 25, style)`` at 1/10 of the size and at the
full size (caches cleared before each run; medians of ``--runs``). The growth factor
size x10 -> time xN says whether the cost is linear (N ~ 10) or quadratic (N ~ 100).
Reference, measured in the same run: the realistic list of the same size.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _machine import cpu_model

from pytest_recfair.replies import parse, titles
from pytest_recfair.vocab import PARSE_STYLES

TARGET_S = 1.0


def _entries(pattern: str, entry_chars: int) -> Callable[[int], str]:
    """Numbered entries of ~entry_chars made of ``pattern``, each distinct (no cache hits)."""
    body = pattern * max(1, entry_chars // len(pattern))

    def build(size: int) -> str:
        n = max(1, size // (entry_chars + 12))
        return "".join(f"{i % 999 + 1}. x{i}{body}z\n" for i in range(n))

    return build


def _repeat(unit: str, head: str = "", tail: str = "") -> Callable[[int], str]:
    return lambda size: head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail


def _realistic(size: int) -> str:
    """A long numbered list as models write it (numbers wrap at 999, as \\d{1,3} expects)."""
    out: list[str] = ["Here are some films you might like:\n\n"]
    total = 0
    i = 0
    while total < size:
        i += 1
        line = f"{i % 999 + 1}. **Title Number {i}** ({1950 + i % 70}) - a film about {i}.\n"
        out.append(line)
        total += len(line)
    return "".join(out)


def _one_entry(pattern: str) -> Callable[[int], str]:
    return lambda size: f"1. x{pattern * (size // len(pattern))}z\n"


SHAPES: dict[str, Callable[[int], str]] = {
    "realistic numbered list": _realistic,
    "one run of digits": _repeat("1"),
    "digit runs + '. '": _repeat("1" * 1000 + ". "),
    "'1 ' repeated": _repeat("1 "),
    "unclosed '('": _repeat("("),
    "unclosed '['": _repeat("["),
    "unclosed '{'": _repeat("{"),
    "truncated JSON array": _repeat('"a", ', head="["),
    "'```json' fences": _repeat("```json\n"),
    "one line of words": _repeat("word "),
    "comma sentence": _repeat("Ab, "),
    "'x:' lines": lambda size: "".join(f"a{i}:\n" for i in range(size // 8)),
    "entries of '(1999'": _entries("(1999", 500),
    "entries of '[a]('": _entries("[a](", 500),
    "entries of 'a*'": _entries("a*", 500),
    "entries of '\"'": _entries('"', 500),
    "entries of '(a)' groups": _entries("(a)", 500),
    "entries of ' by A'": _entries(" by A", 500),
    "entries of ': a'": _entries(": a", 500),
    "entries of ' - a'": _entries(" - a", 500),
    "a single entry of '(1999'": _one_entry("(1999"),
    "a single entry of 'a*'": _one_entry("a*"),
}


def _median(text: str, style: str, runs: int) -> float:
    times: list[float] = []
    for _ in range(runs):
        titles.clean_title.cache_clear()
        t0 = time.perf_counter()
        parse.reply(text, 25, style=style)  # type: ignore[arg-type]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mb", type=float, default=1.0)
    args = ap.parse_args()
    size = int(args.mb * 1_000_000)
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"reply size {size:,} chars (and {size // 10:,}); medians of {args.runs} runs\n")
    print(f"| shape | style | {size // 10:,} chars | {size:,} chars | growth | vs realistic |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    worst = 0.0
    for style in PARSE_STYLES:
        ref = _median(_realistic(size), style, args.runs)
        for name, build in SHAPES.items():
            small = _median(build(size // 10), style, args.runs)
            big = _median(build(size), style, args.runs)
            worst = max(worst, big)
            growth = big / small if small > 0 else float("inf")
            print(
                f"| {name} | {style} | {small * 1000:.1f} ms | {big * 1000:.1f} ms | "
                f"x{growth:.1f} | {big / ref:.2f} |",
                flush=True,
            )
    verdict = "met" if worst < TARGET_S else "NOT met"
    print(f"\nslowest {size:,}-char reply: {worst:.3f} s (target < {TARGET_S:.0f} s: {verdict})")


if __name__ == "__main__":
    main()
