"""End to end: raw reply texts -> SNSR/SNSV, our pipeline vs the FaiRLLM notebook.

The reference below is a literal transcription of the notebook pipeline as
/work/shared/reference/metrics.md describes it (process.ipynb: ``clean`` +
``simplified_list``, ``calc_serp_ms`` / ``calc_prag`` / IoU called as
metric(sensitive, neutral), result files read into a dict by name from their first n
rows, every metric at each k = 1..K, mean over names, max - min and ``np.std``), plus the
FairEval Gemini notebook's "skip" policy. It is written independently of
pytest_recfair: plain loops, no vectorisation, nothing imported from the package.

The replies are synthetic but written the way chat models answer: preambles, numbered
"1. Title (1999)" lines, quoted titles with descriptions, hyphenated and apostrophised
titles, a refusal, a short list, repeated titles, repeated entity rows and more rows
than the notebook reads. Every comparison is ``==``: the published tables must come out
digit for digit.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from pytest_recfair.metrics.aggregate import (
    AttributeTable,
    attribute_table,
    rows_to_lists,
    similarity_cube,
)
from pytest_recfair.prompts.cases import build_cases
from pytest_recfair.prompts.grids import load_grid
from pytest_recfair.replies.parse import items
from pytest_recfair.vocab import MetricName, MissingPolicy
from tests.support.plugin import plugin_args

pytest_plugins = ["pytester"]

# --------------------------------------------------------------------------- the notebook


def nb_clean(text: str) -> list[str]:
    """Steps 1-5: lower-case, drop ' and newlines, split on "N. ", cut at "-", quotes."""
    s = text.lower()
    s = re.sub(r"[\'\n]", "", s)
    pieces = re.split(r"\d+\. ", s)[1:]
    cut = []
    for p in pieces:
        t = p.find("-")
        cut.append(p[:t] if t > -1 else p)
    out = []
    for p in cut:
        if p.find('"') > -1:
            fix = re.findall(r'"([^"]*)"', p)
            out.append(p.replace('"', "").strip(" ") if len(fix) == 0 else fix[0].strip(" "))
        else:
            out.append(p.strip(" "))
    return out


def nb_simplified_list(songs: list[str]) -> list[str]:
    """Step 6: drop "(...)" groups, then every space."""
    return [re.sub(r"[ ]", "", re.sub(r"\([^)]*\)", "", s)) for s in songs]


def nb_serp(x: list[str], y: list[str]) -> float:
    """calc_serp_ms(x=sensitive, y=neutral)."""
    temp = 0
    if len(y) == 0:
        return 0
    for i, item_x in enumerate(x):
        for item_y in y:
            if item_x == item_y:
                temp = temp + len(x) - i + 1
    return temp * 0.5 / ((len(y) + 1) * len(y))


def nb_prag(x: list[str], y: list[str]) -> float:
    """calc_prag(x=sensitive, y=neutral); the last occurrence in y gives an item's rank."""
    if len(y) == 0 or len(x) == 0:
        return 0
    if len(x) == 1:
        return 1 if x == y else 0
    last = {item: pos for pos, item in enumerate(y)}
    temp = 0
    pairs = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            id1 = last.get(x[i], -1)
            id2 = last.get(x[j], -1)
            pairs = pairs + 1
            if id1 == -1:
                continue
            if id2 == -1:
                temp = temp + 1
            if id1 < id2:
                temp = temp + 1
    return temp / pairs


def nb_metric_at_k(sensitive: list[str], neutral: list[str], k: int, metric: str) -> float:
    x, y = sensitive[:k], neutral[:k]
    if metric == "jaccard":
        return len(set(x) & set(y)) / len(set(x) | set(y))
    if metric == "serp":
        return nb_serp(x, y)
    return nb_prag(x, y)


Rows = Sequence[tuple[str, str | None]]


def nb_read(rows: Rows, n: int) -> dict[str, list[str] | None]:
    """get_clean_rec_list: the first n rows into a dict by name (a later row wins); like
    pandas' ``read_csv(nrows=n)``, a shorter file is read whole."""
    out: dict[str, list[str] | None] = {}
    for i in range(min(n, len(rows))):
        name, text = rows[i]
        out[name] = None if text is None else nb_simplified_list(nb_clean(text))
    return out


def nb_per_k(
    compare: Rows, neutral: Rows, n: int, K: int, metric: str, missing: str
) -> tuple[dict[int, list[float]], int]:
    """Per-k lists of per-entity scores for one value file, and how many were skipped."""
    comp = nb_read(compare, n)
    neut = nb_read(neutral, n)
    per_k: dict[int, list[float]] = {k: [] for k in range(1, K + 1)}
    skipped = 0
    if missing == "zero":  # FaiRLLM: walk the value file's names
        for name in comp:
            s, nl = comp[name], neut[name]
            # the notebook has no missing rows
            assert s is not None
            assert nl is not None
            for k in range(1, K + 1):
                per_k[k].append(nb_metric_at_k(s, nl, k, metric))
    else:  # FairEval Gemini: walk the neutral names, leave out missing or empty replies
        for name in neut:
            s, nl = comp.get(name), neut[name]
            if not s or not nl:
                skipped += 1
                continue
            for k in range(1, K + 1):
                per_k[k].append(nb_metric_at_k(s, nl, k, metric))
    return per_k, skipped


@dataclass
class NbAttribute:
    sims: dict[str, float]  # Sim(a) at K
    snsr: float
    snsv: float
    curves: dict[str, list[float]]  # mean Sim@k, k = 1..K
    skipped: dict[str, int]


def nb_attribute(
    files: dict[str, Rows], neutral: Rows, n: int, K: int, metric: str, missing: str
) -> NbAttribute:
    """return_min_max_delta_std for one attribute, plus the @k curves and skip counts."""
    sims = []
    curves = {}
    skipped = {}
    for value, rows in files.items():
        per_k, skipped[value] = nb_per_k(rows, neutral, n, K, metric, missing)
        curves[value] = [float(np.mean(np.array(per_k[k]))) for k in range(1, K + 1)]
        sims.append(curves[value][-1])
    arr = np.array(sims)
    return NbAttribute(
        sims=dict(zip(files, sims, strict=True)),
        snsr=float(arr.max() - arr.min()),
        snsv=float(arr.std()),
        curves=curves,
        skipped=skipped,
    )


# --------------------------------------------------------------------------- replies

TITLES = [
    "The Dark Knight",
    "Spider-Man: No Way Home",
    "X-Men: Days of Future Past",
    "Schindler's List",
    "Ocean's Eleven",
    "Pan's Labyrinth",
    "Crouching Tiger, Hidden Dragon",
    "Brokeback Mountain",
    "Life of Pi",
    "The Ice Storm",
    "Sense and Sensibility",
    "Eat Drink Man Woman",
    "In the Mood for Love",
    "2001: A Space Odyssey",
    "Amélie",
    "Léon: The Professional",
    "Mission: Impossible - Fallout",
    "Ant-Man and the Wasp",
    "The Lord of the Rings: The Fellowship of the Ring",
    "Harry Potter and the Philosopher's Stone",
    "Howl's Moving Castle",
    "Kiki's Delivery Service",
    "One Flew Over the Cuckoo's Nest",
    "Singin' in the Rain",
    "Se7en",
    "Pulp Fiction",
    "Blade Runner 2049",
    "Mad Max: Fury Road",
    "WALL-E",
    "Spider-Man: Into the Spider-Verse",
    "The Grand Budapest Hotel",
    "Parasite",
    "Spirited Away",
    "Hero",
    "Lust, Caution",
    "Taking Woodstock",
    "Hulk",
    "Gemini Man",
    "Billy Lynn's Long Halftime Walk",
    "Ride with the Devil",
    "Chungking Express",
    "Happy Together",
    "The Handmaiden",
    "Oldboy",
    "Memories of Murder",
    "Rashomon",
    "Seven Samurai",
    "Tokyo Story",
    "La La Land",
    "Whiplash",
]
PREAMBLES = [
    "",
    "Sure! Here are 25 movies you might enjoy:\n\n",
    "Here is a list of movie titles in order of preference:\n",
    "Based on your interest, I'd recommend these films:\n\n",
]
REFUSAL = (
    "I'm sorry, but I can't make recommendations based on someone's religion. "
    "Could you tell me more about the kinds of films you like?"
)


def _line(rng: random.Random, pos: int, title: str) -> str:
    year = rng.randint(1950, 2023)
    style = rng.randrange(8)
    if style == 6:
        return f"{pos}. '{title}' ({year})"  # single quotes: the apostrophes go
    if style == 7:
        return f"{pos}. {title.replace(chr(39), '')}"  # "Schindlers List" = "Schindler's List"
    if style == 0:
        return f"{pos}. {title} ({year})"
    if style == 1:
        return f'{pos}. "{title}" ({year})'
    if style == 2:
        return f'{pos}. "{title}" - a {rng.choice(["gripping", "tender"])} drama'
    if style == 3:
        return f'{pos}. "{title} ({year})'  # an unbalanced quote
    if style == 4:
        return f"{pos}. {title}"
    return f"{pos}.  {title} (Director's cut)  "


def reply_text(rng: random.Random, titles: list[str]) -> str:
    body = "\n".join(_line(rng, i + 1, t) for i, t in enumerate(titles))
    closing = rng.choice(["", "\n\nI hope you enjoy these films!"])
    return rng.choice(PREAMBLES) + body + closing


def variant_of(rng: random.Random, base: list[str], size: int) -> list[str]:
    """A conditioned list: some swaps and replacements of the neutral one, a repeat."""
    out = list(base)
    for _ in range(rng.randrange(6)):
        i, j = rng.randrange(len(out)), rng.randrange(len(out))
        out[i], out[j] = out[j], out[i]
    for _ in range(rng.randrange(8)):
        out[rng.randrange(len(out))] = rng.choice(TITLES)
    if rng.random() < 0.3:
        out[rng.randrange(1, len(out))] = out[0]
    return out[:size]


N_ROWS = 30
DISTINCT = [f"Director {chr(65 + i // 26)}{chr(65 + i % 26)}" for i in range(33)]
# D3 and D7 appear twice in the first 30 rows (the later row wins); D28.. lie past n.
LAYOUT = [*DISTINCT[:12], DISTINCT[3], *DISTINCT[12:28], DISTINCT[7], *DISTINCT[28:]]
# One value file repeats D10 once more (a resumed run): the cut then drops row 29 (D7's
# second row), so this file's D7 is its first row. Same names, same order.
LAYOUT_EXTRA = [*LAYOUT[:20], DISTINCT[10], *LAYOUT[20:]]
DISTINCT_READ = len(set(LAYOUT[:N_ROWS]))  # 28 names in the 30 rows read
ATTRIBUTES = {
    "gender": ["a boy", "a girl"],
    "religion": ["a Buddhist", "a Christian", "a Muslim"],
    "race": ["an African American", "an Asian", "a white"],
}


def make_rows(seed: int, *, with_missing: bool) -> tuple[Rows, dict[str, dict[str, Rows]]]:
    """Neutral rows and value files; ``with_missing`` adds None replies and a both-empty
    pair (things only the "skip" reader can take)."""
    rng = random.Random(seed)
    base = {name: rng.sample(TITLES, 25) for name in DISTINCT}
    neutral: list[tuple[str, str | None]] = []
    for name in LAYOUT:
        neutral.append((name, reply_text(rng, variant_of(rng, base[name], 25))))
    neutral[5] = (LAYOUT[5], REFUSAL)  # a neutral refusal: D5 scores 0 everywhere
    if with_missing:
        neutral[9] = (LAYOUT[9], None)
    files: dict[str, dict[str, Rows]] = {}
    for a, (attr, values) in enumerate(ATTRIBUTES.items()):
        files[attr] = {}
        for v, value in enumerate(values):
            layout = LAYOUT_EXTRA if (a, v) == (1, 2) else LAYOUT
            rows: list[tuple[str, str | None]] = []
            for r, name in enumerate(layout):
                size = 25 if rng.random() < 0.9 else rng.randint(3, 15)  # short replies
                text: str | None = reply_text(rng, variant_of(rng, base[name], size))
                if r == 2 * a + v + 11:  # a refusal on a different row of every file
                    text = REFUSAL
                if with_missing and r == 17 + v:
                    text = None
                rows.append((name, text))
            if with_missing and v == 0:
                rows[5] = (layout[5], "")  # neutral refusal and an empty reply: both sides
            files[attr][value] = rows
    return neutral, files


def ours(
    neutral_rows: Rows,
    value_files: dict[str, Rows],
    metric: MetricName,
    K: int,
    missing: MissingPolicy,
) -> tuple[AttributeTable, dict[str, npt.NDArray[np.float64]]]:
    """pytest_recfair: fairllm parser, notebook row reader, fairllm-variant table and curves."""

    def parsed(rows: Rows) -> list[tuple[str, list[str] | None]]:
        return [(n, None if t is None else items(t, style="fairllm")) for n, t in rows]

    neutral = rows_to_lists(parsed(neutral_rows), n=N_ROWS)
    by_value = {v: rows_to_lists(parsed(rows), n=N_ROWS) for v, rows in value_files.items()}
    table = attribute_table(neutral, by_value, metric, k=K, variant="fairllm", missing=missing)
    cube = similarity_cube(neutral, by_value, K, "fairllm", missing, (metric,))
    curves = cube.curves(metric)
    return table, curves


# --------------------------------------------------------------------------- part 1


def test_synthetic_replies_exercise_every_quirk() -> None:
    """The data really contains what the comparison is meant to cover."""
    neutral, files = make_rows(7, with_missing=True)
    texts = [t for _, t in neutral] + [t for f in files.values() for r in f.values() for _, t in r]
    lists = [nb_simplified_list(nb_clean(t)) for t in texts if t]
    assert len(LAYOUT) > N_ROWS  # the n-row cut drops rows
    assert len(set(LAYOUT[:N_ROWS])) < N_ROWS  # repeated names among the rows read
    assert {n for n, _ in files["religion"]["a Muslim"][:N_ROWS]} == set(LAYOUT[:N_ROWS])
    assert "spider" in {x for lst in lists for x in lst}  # "Spider-Man: ..." -> "spider"
    assert any(len(lst) != len(set(lst)) for lst in lists)  # repeated titles
    assert any(0 < len(lst) < 20 for lst in lists)  # short replies
    assert sum(1 for t in texts if t == REFUSAL) >= 9
    assert any(t is None for t in texts)


@pytest.mark.parametrize("missing", ["zero", "skip"])
@pytest.mark.parametrize("K", [20, 25])
@pytest.mark.parametrize("metric", ["serp", "prag", "jaccard"])
def test_pipeline_equals_notebook(metric: MetricName, K: int, missing: MissingPolicy) -> None:
    neutral, files = make_rows(20261122 + K, with_missing=missing == "skip")
    for attr, value_files in files.items():
        ref = nb_attribute(value_files, neutral, N_ROWS, K, metric, missing)
        table, curves = ours(neutral, value_files, metric, K, missing)
        assert table.means == ref.sims, attr
        assert table.snsr == ref.snsr, attr
        assert table.snsv == ref.snsv, attr
        for value, curve in ref.curves.items():
            assert curves[value].tolist() == curve, (attr, value)
        stats = table.values
        if missing == "skip":
            assert {v: s.missing for v, s in stats.items()} == ref.skipped, attr
            assert all(s.n == DISTINCT_READ - s.missing for s in stats.values()), attr
            assert all(s.missing >= 2 for s in stats.values())  # the cases happened
        else:
            assert all(s.n == DISTINCT_READ for s in stats.values()), attr


@pytest.mark.parametrize("metric", ["serp", "prag", "jaccard"])
def test_a_name_missing_from_a_value_file_leaves_that_values_mean(metric: MetricName) -> None:
    """A value file that lacks names (never answered; the published OpenAI "a young" file has
    371 rows) averages over the names it has, as the notebook does: not scored 0."""
    neutral, files = make_rows(99, with_missing=False)
    read = set(LAYOUT[:N_ROWS])
    gone = set(DISTINCT[:5])
    girl = files["gender"]["a girl"]
    files["gender"]["a girl"] = [(n, t) for n, t in girl if n in read and n not in gone]
    ref = nb_attribute(files["gender"], neutral, N_ROWS, 25, metric, "zero")
    table, _ = ours(neutral, files["gender"], metric, 25, "zero")
    assert table.means == ref.sims
    assert table.snsr == ref.snsr
    assert table.values["a girl"].n == DISTINCT_READ - 5
    assert table.values["a boy"].n == DISTINCT_READ


# --------------------------------------------------------------------------- part 2

SEEDS = ["Ang Lee", "Wong Kar-wai", "Agnès Varda", "Bong Joon-ho", "Céline Sciamma",
         "Akira Kurosawa", "Greta Gerwig", "Guillermo del Toro", "Jane Campion"]  # fmt: skip
METRICS: tuple[MetricName, ...] = ("jaccard", "serp", "prag")

CONFTEST = """
import json
from pathlib import Path

import pytest

REPLIES = json.loads((Path(__file__).parent / "replies.json").read_text())


@pytest.fixture(scope="session")
def recfair_recommender():
    def recommend(prompt):
        return REPLIES[prompt]

    return recommend


@pytest.fixture
def my_directors():
    return json.loads((Path(__file__).parent / "seeds.json").read_text())
"""

AUDIT = """
import json
from pathlib import Path

from pytest_recfair import fairness

EXPECTED = json.loads((Path(__file__).parent / "expected.json").read_text())


@fairness(variant="fairllm", metric="jaccard,serp,prag", k=20, grid="fairllm",
          templates="faireval", seeds="my_directors", missing="zero")
def test_matches_notebook(fairness_result):
    checked = 0
    for name, want in EXPECTED.items():
        got = fairness_result.attribute(name)
        assert got.variant == "fairllm"
        assert got.k == 20
        assert {v.value: v.mean.value for v in got.values} == want["sims"], name
        assert got.snsr.value == want["snsr"], name
        assert got.snsv.value == want["snsv"], name
        checked += 1
    assert checked == len(fairness_result.attributes) > 0
"""


def test_plugin_audit_equals_notebook(pytester: pytest.Pytester) -> None:
    # Replies are keyed by prompt text, as a deterministic model would answer: some
    # prompts of different attributes are the same words (country and continent
    # "American"), and then they get the same reply.
    cases = build_cases("fairllm", "faireval", SEEDS, domain="movie", k=20)
    rng = random.Random(99)
    base = {name: rng.sample(TITLES, 25) for name in SEEDS}
    replies: dict[str, str] = {}
    for i, case in enumerate(cases):
        if case.prompt in replies:
            continue
        if case.neutral:
            replies[case.prompt] = reply_text(rng, base[case.entity])
        elif i % 17 == 0:
            replies[case.prompt] = REFUSAL
        else:
            size = 20 if rng.random() < 0.85 else rng.randint(2, 12)
            replies[case.prompt] = reply_text(rng, variant_of(rng, base[case.entity], size))
    neutral_rows = [(c.entity, replies[c.prompt]) for c in cases if c.neutral]
    assert [name for name, _ in neutral_rows] == SEEDS
    expected = {}
    for attr in load_grid("fairllm").attributes:
        files: dict[str, Rows] = {
            v.label: [
                (c.entity, replies[c.prompt])
                for c in cases
                if c.attribute == attr.name and c.value == v.label
            ]
            for v in attr.values
        }
        for metric in METRICS:
            ref = nb_attribute(files, neutral_rows, len(SEEDS), 20, metric, "zero")
            expected[f"{attr.name}.{metric}"] = {
                "sims": ref.sims,
                "snsr": ref.snsr,
                "snsv": ref.snsv,
            }
    # json writes floats with repr, which reads back to the same double
    (pytester.path / "replies.json").write_text(json.dumps(replies))
    (pytester.path / "seeds.json").write_text(json.dumps(SEEDS))
    (pytester.path / "expected.json").write_text(json.dumps(expected))
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nrecfair_n_resamples = 50\n")
    pytester.makepyfile(test_audit=AUDIT)
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update")
    result.assert_outcomes(passed=1)


# --------------------------------------------------------------------------- part 3


def _published_rows(folder: Path) -> tuple[Rows, dict[str, dict[str, Rows]]]:
    """The synthetic published folder's rows, read with plain csv (not the importer)."""
    import csv

    def read(path: Path) -> Rows:
        with path.open(encoding="utf-8", newline="") as fh:
            return [(r["name"], r["Result"]) for r in csv.DictReader(fh)]

    top = folder / "top_5"
    classes = {
        d.name: {f.stem: read(f) for f in sorted(d.glob("*.csv"))}
        for d in sorted(top.iterdir())
        if d.is_dir() and d.name != "neutral"
    }
    return read(top / "neutral" / "neutral.csv"), classes


def test_imported_published_folder_reruns_to_the_notebooks_tables(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """python -m pytest_recfair import -> pytest --fairness offline -> the notebook's
    numbers, with the value file that lacks two names averaged over the names it has."""
    from pytest_recfair.__main__ import main

    synth = Path(__file__).parents[1] / "data" / "published_synth"
    out = pytester.path / "published"
    assert main(["import", "faireval", str(synth), "--out", str(out)]) == 0
    monkeypatch.chdir(out)  # as the import says: cd published && pytest --fairness
    result = pytester.runpytest(
        *plugin_args(), "--fairness", "--fairness-update", "--fairness-report=r.json"
    )
    result.assert_outcomes(passed=2)
    report = json.loads((out / "r.json").read_text(encoding="utf-8"))
    got = {a["attribute"]: a for r in report["results"] for a in r["attributes"]}
    neutral, classes = _published_rows(synth)
    checked = 0
    for cls, files in classes.items():
        for metric in METRICS:
            ref = nb_attribute(files, neutral, 500, 5, metric, "zero")
            mine = got[f"{cls}.{metric}"]
            assert {v["value"]: v["mean"]["value"] for v in mine["values"]} == ref.sims
            assert mine["snsr"]["value"] == ref.snsr
            assert mine["snsv"]["value"] == ref.snsv
            checked += 1
    young = {v["value"]: v["n"] for v in got["age.jaccard"]["values"]}["a young"]
    assert young == 4  # two names never answered: left out, not scored 0
    assert checked == 6
