"""Cost growth of a replayed audit through ``pytest --fairness``: time and peak memory at
250, 1,000, 4,000 and 10,000 entities (x 31 prompts, K = 25, three metrics, bootstrap).

For each size the project and its cassettes are generated once (as ``bench_plugin.py``
does: the requests the OpenAI provider builds, answered by the in-process simulator,
written through the cassette store), a warm-up run writes the baseline, then ``--runs``
timed runs replay and gate. Each run's peak RSS is that child's own ``ru_maxrss``,
measured through a small launcher (``_peak.py``: a child spawned from this process
would count this process's pages too). The reference, measured in the same
loop, is the same pytest run without ``--fairness`` (interpreter, pytest, plugin).

Targets (issue 12): peak RSS <= 300 MB at 1,000 and at 10,000 entities; the 1,000-entity
replay under 5 s wall; time linear in entities x prompts (the per-prompt time column).

Sizes above 4,000 entities get ``--large-runs`` timed runs (default 1: a 10,000-entity
run takes minutes on a shared machine). ``--cache DIR`` keeps the generated projects
(10,000 entities: 310,000 interactions, ~5 minutes to generate) for later runs. The
children run with bytecode caching on, as an installed package does (a sandbox that sets
PYTHONDONTWRITEBYTECODE would otherwise recompile and assertion-rewrite the plugin's
modules in every run).

    .venv/bin/python benchmarks/bench_scale.py [--runs 3] [--large-runs 1]
        [--sizes 250,1000,4000,10000] [--cache DIR]

``--formats N`` measures issue 24's targets at N entities instead (median of ``--runs``):
the cassettes' size as plain ``.json`` and compact ``.json.gz``, and the replay through
``pytest --fairness`` of the plain cassettes without the caches (``RECFAIR_CACHE=off``,
the code before issue 24), of the compact ones on a first run (caches deleted before
each run) and on later runs (caches warm); each against the bare pytest run measured in
the same loop, with each run's peak RSS.

    .venv/bin/python benchmarks/bench_scale.py --formats 1000 --runs 5 --cache DIR

``--exposure N`` measures issue 35's target at N entities: the same cassettes replayed by
two tests of the project, the list-overlap audit (Jaccard@25, the default metric) and
the exposure audit (``kind="exposure"``, genre exposure against the catalogue's shares;
the catalogue: every title the replies hold, a genre from a hash of the title), each its
own ``pytest --fairness`` run, alternating, with the content store off
(``RECFAIR_CACHE=off``: each run replays and scores, none is served from the cache).
Target: exposure <= 1.3 x list overlap (medians of ``--runs``).

    .venv/bin/python benchmarks/bench_scale.py --exposure 1000 --runs 5 --cache DIR

``--other-code DIR`` adds, in the same loop, the first and later runs of the compact
cassettes replayed by the package in ``DIR`` (a checkout of another commit, for example
``git archive main | tar -x -C DIR``): a before/after of a change on the same machine
at the same load.

``--first N`` measures issue 31's targets at N entities: the compact cassettes replayed on
a fresh checkout (no cache folder), with the cache on (the folder deleted before the
run), then a later run (the folder that run filled kept), and with ``RECFAIR_CACHE=off``,
each over the bare pytest run of the same round (median of ``--runs``, per-round
ratios); ``--other-code DIR`` adds the same runs of the package in ``DIR``, so a
before/after shares the rounds.

    .venv/bin/python benchmarks/bench_scale.py --first 1000 --runs 5 --cache DIR
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

import bench_plugin  # noqa: E402
from _machine import cpu_model  # noqa: E402
from _peak import run_measured  # noqa: E402

PROMPTS_PER_ENTITY = 31  # 30 faireval values + the neutral prompt


def run(
    root: Path, *args: str, env_extra: dict[str, str] | None = None
) -> tuple[float, float, int, str, float]:
    """(wall seconds, peak RSS MB, exit code, output tail, CPU seconds) of one pytest
    child. The CPU time (user + system) is what the wall time is on an idle machine (the
    run is single-threaded but for BLAS), and is far less disturbed by other jobs."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env_extra or {})}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode cached
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        *bench_plugin.plugin_args(),
        "-p",
        "no:cacheprovider",
        "-q",
        *args,
    ]
    start = time.perf_counter()
    # through a small launcher: a child's ru_maxrss counts this process's own pages
    code, out, peak, cpu = run_measured(cmd, cwd=root, env=env)
    return time.perf_counter() - start, peak, code, out[-3000:], cpu


@contextlib.contextmanager
def project(n: int, cache: Path | None) -> Iterator[Path]:
    """The generated project of ``n`` entities: kept under ``cache`` when given."""
    if cache is None:
        with tempfile.TemporaryDirectory(prefix=f"recfair-scale-{n}-") as tmp:
            yield Path(tmp)
        return
    root = cache / f"entities-{n}"
    root.mkdir(parents=True, exist_ok=True)
    yield root


def prepare(root: Path, n: int) -> int:
    """Generate the project (unless a complete one is there); its interaction count."""
    done = root / "generated.txt"
    if done.is_file():
        prompts = int(done.read_text())
        print(f"  {n} entities: {prompts} interactions (generated earlier)", flush=True)
        return prompts
    t0 = time.perf_counter()
    prompts = bench_plugin.generate(root, n)
    size = sum(p.stat().st_size for p in (root / "fixtures").rglob("*") if p.is_file())
    print(
        f"  {n} entities: {prompts} interactions, {size / 1e6:.0f} MB of cassettes, "
        f"generated in {time.perf_counter() - t0:.0f} s",
        flush=True,
    )
    done.write_text(str(prompts))
    return prompts


def measure(n: int, runs: int, cache: Path | None) -> dict[str, float]:
    with project(n, cache) as root:
        prompts = prepare(root, n)
        wall, peak, code, out, _ = run(root, "--fairness", "--fairness-update")
        if code != 0:
            raise SystemExit(f"warm-up failed ({code}):\n{out}")
        walls, cpus, peaks, refs, ref_cpus = [], [], [], [], []
        for _ in range(runs):
            ref = run(root)
            refs.append(ref[0])
            ref_cpus.append(ref[4])
            wall, peak, code, out, cpu = run(root, "--fairness")
            if code != 0:
                raise SystemExit(f"audit run failed ({code}):\n{out}")
            walls.append(wall)
            cpus.append(cpu)
            peaks.append(peak)
        print(
            f"    walls {_list(walls)} s (CPU {_list(cpus)} s); peaks "
            f"{', '.join(f'{p:.0f}' for p in peaks)} MB; reference {_list(refs)} s "
            f"(CPU {_list(ref_cpus)} s); load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        return {
            "entities": n,
            "prompts": prompts,
            "runs": runs,
            "wall": statistics.median(walls),
            "cpu": statistics.median(cpus),
            "ref": statistics.median(refs),
            "ref_cpu": statistics.median(ref_cpus),
            "peak": max(peaks),
        }


def measure_formats(
    n: int, runs: int, cache: Path | None, other: Path | None = None, today: Path | None = None
) -> int:
    """Issue 24: size of both formats, replay without cache / first run (cache folder
    deleted) / warm, each format, vs bare pytest; with ``other``, the compact first and
    later runs of the package in that folder too; with ``today``, the plain replay of
    the package in that folder (the code before issue 24)."""
    from pytest_recfair.cassettes import compact
    from pytest_recfair.cassettes.cache import CACHE_DIR

    with project(n, cache) as root:
        prompts = prepare(root, n)
        packed = root.with_name(root.name + "-compact")
        if not packed.is_dir():
            ignore = shutil.ignore_patterns(CACHE_DIR)
            shutil.copytree(root, packed, ignore=ignore)
            compact.convert(packed / "fixtures" / "cassettes", compact=True)
        sizes = {
            name: sum(p.stat().st_size for p in compact.cassette_files(r / "fixtures/cassettes"))
            for name, r in (("plain", root), ("compact", packed))
        }
        off = {"RECFAIR_CACHE": "off"}
        for folder in (root, packed):
            _, _, code, out, _ = run(folder, "--fairness", "--fairness-update", env_extra=off)
            if code != 0:
                raise SystemExit(f"warm-up failed ({code}):\n{out}")
        cached = {f: f / "fixtures" / "cassettes" / CACHE_DIR for f in (root, packed)}
        rows: dict[str, list[tuple[float, float, float]]] = {}
        plan: list[tuple[str, Path, dict[str, str] | None]] = [
            ("bare pytest (reference)", root, off),
            ("plain, no cache (this code)", root, off),
            ("plain, first run", root, None),
            ("plain, warm", root, None),
            ("compact, first run", packed, None),
            ("compact, warm", packed, None),
        ]
        if today is not None:  # the code the issue measured: plain cassettes, no cache
            plan.insert(
                1, (f"plain, code at {today.name} (today)", root, {"PYTHONPATH": str(today)})
            )
        if other is not None:
            there = {"PYTHONPATH": str(other)}
            plan += [(f"{name} ({other.name})", packed, there) for name, _, _ in plan[-2:]]
        for _ in range(runs):
            for name, folder, env in plan:
                if "first run" in name:
                    shutil.rmtree(cached[folder], ignore_errors=True)
                args = () if name.startswith("bare") else ("--fairness",)
                wall, peak, code, out, cpu = run(folder, *args, env_extra=env)
                if code != 0:
                    raise SystemExit(f"{name} failed ({code}):\n{out}")
                rows.setdefault(name, []).append((wall, cpu, peak))
        print(f"load average at end: {os.getloadavg()[0]:.1f}")
    print(f"\n{n:,} entities, {prompts:,} interactions; medians of {runs} runs")
    for name, size in sizes.items():
        print(f"cassettes {name}: {size / 1e6:.2f} MB")
    ref_wall = statistics.median(w for w, _, _ in rows["bare pytest (reference)"])
    ref_cpu = statistics.median(c for _, c, _ in rows["bare pytest (reference)"])
    print("| run | median wall (CPU) | ratio wall (CPU) | peak RSS (max) | walls |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name, got in rows.items():
        wall = statistics.median(w for w, _, _ in got)
        cpu = statistics.median(c for _, c, _ in got)
        print(
            f"| {name} | {wall:.2f} s ({cpu:.2f} s) | x{wall / ref_wall:.1f} "
            f"(x{cpu / ref_cpu:.1f}) | {max(p for _, _, p in got):.0f} MB | "
            f"{_list([w for w, _, _ in got])} |"
        )
    if today is not None:
        _versus_today(rows, f"plain, code at {today.name} (today)")
    return 0


def measure_first(n: int, runs: int, cache: Path | None, other: Path | None = None) -> int:
    """Issue 31: a first run on a fresh checkout (compact cassettes, no cache folder), over
    the bare pytest run of the same round; with ``other``, that code's too."""
    from pytest_recfair.cassettes import compact
    from pytest_recfair.cassettes.cache import CACHE_DIR

    with project(n, cache) as root:
        prepare(root, n)
        packed = root.with_name(root.name + "-compact")
        if not packed.is_dir():
            shutil.copytree(root, packed, ignore=shutil.ignore_patterns(CACHE_DIR))
            compact.convert(packed / "fixtures" / "cassettes", compact=True)
        off = {"RECFAIR_CACHE": "off"}
        _, _, code, out, _ = run(packed, "--fairness", "--fairness-update", env_extra=off)
        if code != 0:
            raise SystemExit(f"warm-up failed ({code}):\n{out}")
        plan: list[tuple[str, dict[str, str]]] = [
            ("bare pytest (reference)", {}),
            ("first run (no cache folder)", {}),
            ("later run (the first run's cache folder kept)", {}),
            ("RECFAIR_CACHE=off", off),
        ]
        if other is not None:
            there = {"PYTHONPATH": str(other)}
            plan += [(f"{name} ({other.name})", {**env, **there}) for name, env in plan[1:]]
        rows: dict[str, list[tuple[float, float, float]]] = {}
        for _ in range(runs):
            for name, env in plan:
                if not name.startswith("later"):
                    shutil.rmtree(packed / "fixtures" / "cassettes" / CACHE_DIR, True)
                args = () if name.startswith("bare") else ("--fairness",)
                wall, peak, code, out, cpu = run(packed, *args, env_extra=env)
                if code != 0:
                    raise SystemExit(f"{name} failed ({code}):\n{out}")
                rows.setdefault(name, []).append((wall, cpu, peak))
        print(f"load average at end: {os.getloadavg()[0]:.1f}")
    bare = rows.pop("bare pytest (reference)")
    print(f"\n{n:,} entities, compact cassettes; medians of {runs} rounds")
    print(
        "| run | median wall (CPU) | ratio of medians, wall (CPU) | per-round wall ratio, "
        "median (range) | peak |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    print(
        f"| bare pytest | {_median(bare, 0):.2f} s ({_median(bare, 1):.2f} s) | x1.0 | | "
        f"{max(p for _, _, p in bare):.0f} MB |"
    )
    for name, got in rows.items():
        ratios = sorted(a[0] / b[0] for a, b in zip(got, bare, strict=True))
        print(
            f"| {name} | {_median(got, 0):.2f} s ({_median(got, 1):.2f} s) | "
            f"x{_median(got, 0) / _median(bare, 0):.2f} "
            f"(x{_median(got, 1) / _median(bare, 1):.2f}) | x{statistics.median(ratios):.2f} "
            f"({ratios[0]:.2f}-{ratios[-1]:.2f}) | {max(p for _, _, p in got):.0f} MB |"
        )
    return 0


EXPOSURE_TEST = """
from pytest_recfair import fairness


@fairness(seeds="seeds.txt", k=25)
def test_overlap():
    pass


@fairness(kind="exposure", seeds="seeds.txt", k=25, item_field="genre", catalogue="films.csv")
def test_exposure():
    pass
"""
GENRES = ("drama", "comedy", "thriller", "romance", "documentary", "animation", "horror")


def measure_exposure(n: int, runs: int, cache: Path | None) -> int:
    """Issue 35: both kinds replaying the same cassettes (see the module's docstring)."""
    import csv
    import hashlib

    from pytest_recfair.prompts.cases import build_cases
    from pytest_recfair.prompts.grids import load_grid
    from pytest_recfair.prompts.seeds import load_seeds
    from pytest_recfair.replies.parse import items
    from pytest_recfair.sim.recommender import SimulatedRecommender

    with project(n, cache) as root:
        prompts = prepare(root, n)
        if not (root / "films.csv").is_file():  # the replies' titles, as generate() made them
            entities = load_seeds(root / "seeds.txt", domain="movie")
            cases = build_cases(load_grid("faireval"), "natural", entities, k=25)
            sim = SimulatedRecommender(bias="demo", seed=0)
            titles = dict.fromkeys(t for c in cases for t in items(sim(c.prompt, c.system), 25))
            with (root / "films.csv").open("w", newline="", encoding="utf-8") as fh:
                w = csv.writer(fh)
                w.writerow(["title", "genre"])
                for t in titles:
                    h = int.from_bytes(hashlib.sha256(t.encode()).digest()[:4], "big")
                    w.writerow([t, GENRES[h % len(GENRES)]])
        (root / "test_kinds.py").write_text(EXPOSURE_TEST, encoding="utf-8")
        off = {"RECFAIR_CACHE": "off"}
        for name in ("test_overlap", "test_exposure"):
            *_, code, out, _ = run(
                root, f"test_kinds.py::{name}", "--fairness", "--fairness-update", env_extra=off
            )
            if code != 0:
                raise SystemExit(f"warm-up of {name} failed ({code}):\n{out}")
        times: dict[str, list[tuple[float, float, float]]] = {"overlap": [], "exposure": []}
        for _ in range(runs):  # alternating: a shared machine's drift hits both
            for kind in times:
                wall, peak, code, out, cpu = run(
                    root, f"test_kinds.py::test_{kind}", "--fairness", env_extra=off
                )
                if code != 0:
                    raise SystemExit(f"{kind} run failed ({code}):\n{out}")
                times[kind].append((wall, cpu, peak))
            print(f"    {n} entities: " + "; ".join(
                f"{k} {v[-1][0]:.2f} s (CPU {v[-1][1]:.2f} s)" for k, v in times.items()
            ) + f"; load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    print(f"\n| audit ({n:,} entities x 31 prompts = {prompts:,}, K = 25, replayed) | median "
          "wall | median CPU | walls | peak RSS |")  # fmt: skip
    print("| --- | ---: | ---: | --- | ---: |")
    for kind, rows in times.items():
        print(f"| {kind} | {_median(rows, 0):.2f} s | {_median(rows, 1):.2f} s | "
              f"{_list([r[0] for r in rows])} | {max(r[2] for r in rows):.0f} MB |")  # fmt: skip
    wall = _median(times["exposure"], 0) / _median(times["overlap"], 0)
    cpu = _median(times["exposure"], 1) / _median(times["overlap"], 1)
    print(f"ratio exposure / list overlap: wall {wall:.2f}, CPU {cpu:.2f} (target <= 1.30)")
    return 0 if wall <= 1.3 else 2


def _median(rows: list[tuple[float, float, float]], column: int) -> float:
    return statistics.median(r[column] for r in rows)


def _versus_today(rows: dict[str, list[tuple[float, float, float]]], today: str) -> None:
    """Each first run over the run of today's code in the same round (the rounds
    alternate, so a machine that slows down for a while slows both)."""
    for name in ("plain, first run", "compact, first run", "plain, no cache (this code)"):
        ratios = sorted(a[0] / b[0] for a, b in zip(rows[name], rows[today], strict=True))
        print(
            f"{name} / today, per round: median {statistics.median(ratios):.3f} "
            f"(from {ratios[0]:.3f} to {ratios[-1]:.3f}; {sum(r < 1 for r in ratios)} of "
            f"{len(ratios)} rounds faster)"
        )


def _list(xs: list[float]) -> str:
    return ", ".join(f"{x:.2f}" for x in xs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed runs per size (median)")
    parser.add_argument("--large-runs", type=int, default=1, help="timed runs above 4,000")
    parser.add_argument("--sizes", default="250,1000,4000,10000", help="entity counts")
    parser.add_argument("--cache", type=Path, default=None, help="keep generated projects here")
    parser.add_argument("--formats", type=int, default=0, help="issue 24 table at N entities")
    parser.add_argument("--first", type=int, default=0, help="issue 31 first run at N entities")
    parser.add_argument(
        "--other-code", type=Path, default=None, help="--formats/--first: also this code"
    )
    parser.add_argument(
        "--today", type=Path, default=None, help="--formats: plain replay of the code here"
    )
    parser.add_argument("--exposure", type=int, default=0, help="issue 35 at N entities")
    args = parser.parse_args()
    if args.exposure:
        print(f"machine: {cpu_model()}; {os.cpu_count()} cores; Python {sys.version.split()[0]}")
        print(f"load average at start: {os.getloadavg()[0]:.1f}")
        return measure_exposure(args.exposure, args.runs, args.cache)
    if args.first:
        print(f"machine: {cpu_model()}; {os.cpu_count()} cores; Python {sys.version.split()[0]}")
        print(f"load average at start: {os.getloadavg()[0]:.1f}")
        return measure_first(args.first, args.runs, args.cache, args.other_code)
    if args.formats:
        print(f"machine: {cpu_model()}; {os.cpu_count()} cores; Python {sys.version.split()[0]}")
        print(f"load average at start: {os.getloadavg()[0]:.1f}")
        return measure_formats(args.formats, args.runs, args.cache, args.other_code, args.today)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"machine: {cpu_model()}; {os.cpu_count()} cores; Python {sys.version.split()[0]}")
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    rows = [measure(n, args.runs if n <= 4000 else args.large_runs, args.cache) for n in sizes]
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    print()
    print(
        "| entities | prompts | runs | median wall (CPU) | reference wall (CPU) | ratio "
        "wall (CPU) | audit CPU per 1,000 prompts | peak RSS |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        audit = r["cpu"] - r["ref_cpu"]
        print(
            f"| {r['entities']:,} | {r['prompts']:,} | {r['runs']} | {r['wall']:.2f} s "
            f"({r['cpu']:.2f} s) | {r['ref']:.2f} s ({r['ref_cpu']:.2f} s) | "
            f"x{r['wall'] / r['ref']:.1f} (x{r['cpu'] / r['ref_cpu']:.1f}) | "
            f"{1000 * audit / r['prompts']:.3f} s | {r['peak']:.0f} MB |"
        )
    memory = all(r["peak"] <= 300 for r in rows if r["entities"] in (1000, 10000))
    print(f"memory target (<= 300 MB at 1,000 and 10,000): {'met' if memory else 'MISSED'}")
    for r in rows:
        if r["entities"] == 1000:
            print(
                f"time target (< 5 s wall at 1,000): {'met' if r['wall'] < 5 else 'MISSED'} "
                f"(median wall {r['wall']:.2f} s, CPU {r['cpu']:.2f} s)"
            )
    ok = memory and all(r["wall"] < 5 for r in rows if r["entities"] == 1000)
    return 0 if ok else 2


if __name__ == "__main__":
    raise SystemExit(main())
