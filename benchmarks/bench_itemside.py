"""Cost of an item-side audit against the list-overlap audit of the same size (issue 13).

1,000 entities x 30 values of the ``faireval`` grid (+ the neutral prompt) = 31,000
prompts, K = 25, bootstrap and permutations at the default 2,000 resamples. Both audits
run in-process through ``pytest_recfair.engine`` on the SAME replies: the simulated
recommender answers every prompt once, beforehand, and the timed runs read the answers
from a dict, so neither run pays for the recommender. The item-side audit matches every
recommended title to a catalogue (every title the replies contain, with two categorical
fields, ``decade`` and ``genre``, assigned from a hash of the title) and adds per field
the category shares, the shift from neutral with its family-wise permutation test over
entities, bootstrap intervals and the LMRec association scores, for each of the 8
attributes. Both runs send every prompt through the same callable path (the plugin's
``CallableProvider``), so the difference is the scoring.

Target: item-side time <= 2 x list-overlap time (medians of ``--runs`` alternating runs).
The exposure audit (``kind="exposure"``, genre exposure against the catalogue's shares,
issue 35) runs on the same replies too; its target is <= 1.3 x list-overlap time.

    nice -n 10 .venv/bin/python benchmarks/bench_itemside.py [--runs 5] [--entities 1000]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from _machine import cpu_model  # noqa: E402

from pytest_recfair.api import audit  # noqa: E402
from pytest_recfair.prompts.cases import build_cases  # noqa: E402
from pytest_recfair.prompts.grids import load_grid  # noqa: E402
from pytest_recfair.replies.parse import items as parse_items  # noqa: E402
from pytest_recfair.sim.recommender import SimulatedRecommender  # noqa: E402

DECADES = ("1960s", "1970s", "1980s", "1990s", "2000s", "2010s")
GENRES = ("drama", "comedy", "thriller", "romance", "documentary", "animation", "horror")


def _pick(title: str, salt: str, options: tuple[str, ...]) -> str:
    h = hashlib.sha256(f"{salt}|{title}".encode()).digest()
    return options[int.from_bytes(h[:4], "big") % len(options)]


def replies_for(names: list[str]) -> dict[tuple[str, str | None], str]:
    """Every prompt of the audit answered once by the demo simulator."""
    cases = build_cases(grid=load_grid("faireval"), templates="natural", entities=names, k=25)
    sim = SimulatedRecommender("demo", seed=7)
    return {(c.prompt, c.system): sim(c.prompt, c.system) for c in cases}


def write_catalogue(path: Path, replies: dict[tuple[str, str | None], str]) -> int:
    titles = dict.fromkeys(t for r in replies.values() for t in parse_items(r, 25))
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["title", "decade", "genre"])
        for t in titles:
            w.writerow([t, _pick(t, "decade", DECADES), _pick(t, "genre", GENRES)])
    return len(titles)


def timed(names: list[str], answer: object, **kwargs: object) -> tuple[float, object]:
    start = time.perf_counter()
    result = audit(answer, seeds=names, k=25, **kwargs)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--entities", type=int, default=1000)
    args = parser.parse_args()
    names = [f"Bench Director {i:04d}" for i in range(args.entities)]
    t0 = time.perf_counter()
    replies = replies_for(names)

    def answer(prompt: str, system: str | None = None) -> str:
        return replies[(prompt, system)]

    with tempfile.TemporaryDirectory() as tmp:
        catalogue = Path(tmp) / "films.csv"
        n_titles = write_catalogue(catalogue, replies)
        print(f"{len(replies)} prompts answered, catalogue of {n_titles} titles "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)  # fmt: skip
        overlap: list[float] = []
        items: list[float] = []
        exposure: list[float] = []
        for run in range(args.runs):  # alternate, so drift of a shared machine hits both
            t_o, _ = timed(names, answer)
            t_i, res = timed(names, answer, item_field="decade,genre", catalogue=str(catalogue))
            t_e, _ = timed(names, answer, kind="exposure", item_field="genre",
                           catalogue=str(catalogue))  # fmt: skip
            overlap.append(t_o)
            items.append(t_i)
            exposure.append(t_e)
            print(f"run {run + 1}: list overlap {t_o:.2f} s, item side {t_i:.2f} s, "
                  f"exposure {t_e:.2f} s", flush=True)  # fmt: skip
        data = res.extras["items"]  # type: ignore[attr-defined]
        cov = data["attributes"][0]["coverage"]
    m_o, m_i = statistics.median(overlap), statistics.median(items)
    print(f"\n| audit ({args.entities} entities x 30 values, K = 25) | median s | runs |")
    print("| --- | --- | --- |")
    print(f"| list overlap (Jaccard, bootstrap) | {m_o:.2f} | "
          f"{', '.join(f'{x:.2f}' for x in overlap)} |")  # fmt: skip
    print(f"| item side (+ decade, genre) | {m_i:.2f} | "
          f"{', '.join(f'{x:.2f}' for x in items)} |")  # fmt: skip
    m_e = statistics.median(exposure)
    print(f"| exposure (genre vs catalogue) | {m_e:.2f} | "
          f"{', '.join(f'{x:.2f}' for x in exposure)} |")  # fmt: skip
    print(f"\nratio item side / list overlap: {m_i / m_o:.2f} (target <= 2.00)")
    print(f"ratio exposure / list overlap: {m_e / m_o:.2f} (target <= 1.30)")
    print(f"catalogue coverage of the item-side run: {cov}")
    print(f"machine: {cpu_model()}, Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
