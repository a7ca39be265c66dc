"""Benchmark: parse and canonicalise 32,000 replies of 25 items (1,000 entities x 32 replies).

Run:  .venv/bin/python benchmarks/bench_parse.py [--runs 5] [--ref-runs 3] [--entities 1000]

Each entity's 32 replies are parsed with ``parse.reply`` and its 32 lists canonicalised
together with ``matching.canonicalize``. Every run starts with cold caches. The reference,
measured in the same process, is the same pipeline with memoisation off and a naive
canonicaliser (normalise every occurrence, then compare each unique key with every kept key
by ``fuzz.ratio`` in Python) -- what one would write without the tricks. Medians are
reported because the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _machine import cpu_model
from rapidfuzz import fuzz

from pytest_recfair.replies import matching, parse, titles

TARGET_S = 3.0
K = 25
REPLIES_PER_ENTITY = 32

_WORDS = [
    "night",
    "dark",
    "sun",
    "river",
    "city",
    "ghost",
    "iron",
    "silent",
    "blue",
    "last",
    "lost",
    "golden",
    "house",
    "road",
    "king",
    "summer",
    "winter",
    "star",
    "dream",
    "fire",
    "heart",
    "shadow",
    "glass",
    "secret",
    "wild",
    "red",
    "stone",
    "edge",
    "storm",
    "garden",
    "empire",
    "storm",
    "moon",
    "ocean",
    "paper",
    "broken",
    "echo",
    "north",
    "velvet",
    "hidden",
    "crimson",
]


def _title(rng: random.Random) -> str:
    words = [w.capitalize() for w in rng.sample(_WORDS, rng.randint(1, 4))]
    if rng.random() < 0.3:
        words.insert(0, "The")
    if rng.random() < 0.1:
        words.append(rng.choice(["2", "II", "III"]))
    if rng.random() < 0.1:
        words[-1:] = [words[-1] + ":", "Part", "One"]
    return " ".join(words)


def _variant(title: str, rng: random.Random) -> str:
    """How another reply spells the same title."""
    r = rng.random()
    if r < 0.4:
        return title.removeprefix("The ") if title.startswith("The ") else "The " + title
    if r < 0.7:
        return title.replace(" ", "", 1)  # "Night River" -> "NightRiver"
    return title.upper()


def _format(titles: list[str], years: list[int], style: int) -> str:
    if style == 0:
        body = "\n".join(
            f"{i}. {t} ({y})" for i, (t, y) in enumerate(zip(titles, years, strict=True), 1)
        )
        return "Certainly! Here are 25 movies you might enjoy:\n\n" + body
    if style == 1:
        body = "\n".join(
            f"{i}. **{t}** ({y}) - A gripping story about {t.lower()}."
            for i, (t, y) in enumerate(zip(titles, years, strict=True), 1)
        )
        return body + "\n\nI hope you enjoy these recommendations!"
    if style == 2:
        return "\n".join(f"- {t}" for t in titles)
    return "```json\n" + json.dumps(titles) + "\n```"


def make_corpus(n_entities: int, seed: int = 0) -> list[list[str]]:
    rng = random.Random(seed)
    corpus: list[list[str]] = []
    for _ in range(n_entities):
        pool = list(dict.fromkeys(_title(rng) for _ in range(60)))
        years = {t: rng.randint(1950, 2024) for t in pool}
        style = rng.randrange(4)  # one model, one house style per entity
        replies: list[str] = []
        for _ in range(REPLIES_PER_ENTITY):
            core = pool[:30]
            rng.shuffle(core)
            picked = core[:20] + rng.sample(pool[30:], 5)
            shown = [_variant(t, rng) if rng.random() < 0.05 else t for t in picked]
            replies.append(_format(shown, [years[t] for t in picked], style))
        corpus.append(replies)
    return corpus


def _clear_caches() -> None:
    titles.clean_title.cache_clear()
    matching.normalize.cache_clear()
    matching._numbers.cache_clear()


def run_fast(corpus: list[list[str]]) -> int:
    _clear_caches()
    merges = 0
    for replies in corpus:
        lists = [parse.reply(text, K).items for text in replies]
        _, m = matching.canonicalize(lists, entity="e")
        merges += len(m)
    return merges


def _naive_canonicalize(lists: list[list[str]], threshold: float) -> int:
    norm = matching.normalize.__wrapped__
    kept: list[str] = []
    target: dict[str, str] = {}
    merges = 0
    for lst in lists:
        for title in lst:
            key = norm(title)
            if key in target or key in kept:
                continue
            best = max(kept, key=lambda k: fuzz.ratio(key, k), default=None)
            if (
                best is not None
                and fuzz.ratio(key, best) >= threshold
                and matching._may_merge(key, best)
            ):
                target[key] = best
                merges += 1
            else:
                kept.append(key)
    return merges


def run_reference(corpus: list[list[str]]) -> int:
    _clear_caches()
    clean = titles.clean_title.__wrapped__
    original = titles.clean_title
    titles.clean_title = clean  # type: ignore[assignment]  # memoisation off
    try:
        merges = 0
        for replies in corpus:
            lists = [parse.reply(text, K).items for text in replies]
            merges += _naive_canonicalize(lists, matching.DEFAULT_THRESHOLD)
        return merges
    finally:
        titles.clean_title = original


def _median_time(
    fn: Callable[[list[list[str]]], int], corpus: list[list[str]], runs: int
) -> tuple[float, float, list[float], int]:
    """Median wall and CPU (process) seconds over ``runs`` runs; CPU time is less disturbed
    by other jobs on a shared machine."""
    walls: list[float] = []
    cpus: list[float] = []
    result = 0
    for _ in range(runs):
        c0, t0 = time.process_time(), time.perf_counter()
        result = fn(corpus)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), walls, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--ref-runs", type=int, default=3)
    ap.add_argument("--entities", type=int, default=1000)
    args = ap.parse_args()

    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    corpus = make_corpus(args.entities)
    n_replies = sum(len(r) for r in corpus)
    print(
        f"workload: {args.entities} entities x {REPLIES_PER_ENTITY} replies = "
        f"{n_replies} replies, k={K}"
    )

    fast, fast_cpu, fast_all, merges = _median_time(run_fast, corpus, args.runs)
    ref, ref_cpu, ref_all, ref_merges = _median_time(run_reference, corpus, args.ref_runs)
    print(
        f"recfair parse+canonicalize: median wall {fast:.2f} s, cpu {fast_cpu:.2f} s  "
        f"(wall runs {[round(t, 2) for t in fast_all]}, merges {merges})"
    )
    print(
        f"reference (no caches, naive pairwise merge): median wall {ref:.2f} s, "
        f"cpu {ref_cpu:.2f} s  (wall runs {[round(t, 2) for t in ref_all]}, merges {ref_merges})"
    )
    print(f"speed-up vs reference: wall {ref / fast:.1f}x, cpu {ref_cpu / fast_cpu:.1f}x")
    print(f"target < {TARGET_S:.1f} s wall: {'met' if fast < TARGET_S else 'NOT met'}")


if __name__ == "__main__":
    main()
