"""``import faireval`` on folders in the shapes the released FairEval folders have (issue 21).

For each shape (tests/data/published_shapes.py): ``python -m pytest_recfair import`` ->
``pytest --fairness`` offline -> every published number (per-value mean similarity, SNSR,
SNSV, for Jaccard, SERP* and PRAG*) equals, to 1e-9, what the project's metrics compute
directly on the same CSVs (plain ``csv`` reading, no importer).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.__main__ import main
from pytest_recfair.metrics.aggregate import AttributeTable, attribute_table, rows_to_lists
from pytest_recfair.replies.parse import items
from pytest_recfair.vocab import MetricName, MissingPolicy
from tests.data import published_shapes as shapes
from tests.support.plugin import plugin_args

pytest_plugins = ["pytester"]

METRICS: tuple[MetricName, ...] = ("jaccard", "serp", "prag")
Rows = list[tuple[str, str]]


def _rows(path: Path, batch: dict[tuple[str, str], str] | None, cls: str) -> Rows:
    """(name, reply of record) per CSV row; with ``batch``, the batch file's reply."""
    with path.open(encoding="utf-8-sig", newline="") as fh:
        out = [(r["name"], r["Result"]) for r in csv.DictReader(fh)]
    if batch is None:
        return out
    value = None if cls == "neutral" else path.stem
    return [(name, batch[shapes._prompt(cls, value, name)]) for name, _ in out]


def expected(
    folder: Path, missing: MissingPolicy = "zero", *, use_batch: bool = False
) -> dict[str, AttributeTable]:
    """attribute.metric -> the project's table computed straight from the CSVs."""
    top = folder / "top_5"
    batch = shapes.batch_replies(folder) if use_batch else None

    def lists(rows: Rows) -> dict[str, Sequence[str] | None]:
        return rows_to_lists([(n, items(t, style="fairllm")) for n, t in rows], n=None)

    neutral = lists(_rows(top / "neutral" / "neutral.csv", batch, "neutral"))
    out: dict[str, AttributeTable] = {}
    for d in sorted(p for p in top.iterdir() if p.is_dir() and p.name != "neutral"):
        by_value = {f.stem: lists(_rows(f, batch, d.name)) for f in sorted(d.glob("*.csv"))}
        for metric in METRICS:
            out[f"{d.name}.{metric}"] = attribute_table(
                neutral, by_value, metric, k=5, variant="fairllm", missing=missing
            )
    return out


def _import_and_run(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    src: Path,
    *extra: str,
) -> tuple[dict[str, dict[str, object]], str]:
    out = pytester.path / "imported"
    assert main(["import", "faireval", str(src), "--out", str(out), *extra]) == 0
    printed = capsys.readouterr().out
    monkeypatch.chdir(out)
    result = pytester.runpytest(
        *plugin_args(), "--fairness", "--fairness-update", "--fairness-report=r.json", "-p",
        "no:randomly",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-3000:]
    report = json.loads((out / "r.json").read_text(encoding="utf-8"))
    got = {a["attribute"]: a for r in report["results"] for a in r["attributes"]}
    return got, printed


def check(got: dict[str, Any], want: dict[str, AttributeTable]) -> int:
    """Every number of ``want`` in ``got`` to 1e-9; returns how many were compared."""
    checked = 0
    for name, table in want.items():
        mine = got[name]
        means = {v["value"]: v["mean"]["value"] for v in mine["values"]}
        assert set(means) == set(table.means), name
        for value, mean in table.means.items():
            assert abs(means[value] - mean) <= 1e-9, (name, value, means[value], mean)
            checked += 1
        assert abs(mine["snsr"]["value"] - table.snsr) <= 1e-9, name
        assert abs(mine["snsv"]["value"] - table.snsv) <= 1e-9, name
        checked += 2
    return checked


def _files(out: Path) -> str:
    """Every file written, as text; binary ones (the replay cache's SQLite file) decoded
    with replacement, so an ASCII key in them would still be found."""
    files = sorted(p for p in out.rglob("*") if p.is_file())
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in files)


@pytest.mark.parametrize("shape", [s for s in shapes.SHAPES if s not in ("french", "rows_1000")])
def test_shape_reproduces_the_tables(
    shape: str,
    tmp_path: Path,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    src = shapes.write(tmp_path, shape)
    got, printed = _import_and_run(pytester, monkeypatch, capsys, src)
    want = expected(src)
    assert check(got, want) == sum(len(t.means) + 2 for t in want.values())
    assert set(got) == set(want)  # every class, nothing else
    if shape in ("instruction_replies", "batch_disagrees"):
        assert "'Instruction' column holds replies" in printed
    if shape == "batch_disagrees":
        # the CSV is the reply of record; the batch differences are counted per class
        assert (
            "batch_output.jsonl differs from the CSV 'Result' (neutral 3, age 6, gender 6)"
            in printed
        )
    if shape == "keys":
        written = _files(pytester.path / "imported")
        assert shapes.KEY not in written
        assert shapes.KEY not in printed
        assert "<filtered>" in written


def test_batch_replies_on_request(
    tmp_path: Path,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    src = shapes.write(tmp_path, "batch_disagrees")
    got, printed = _import_and_run(pytester, monkeypatch, capsys, src, "--replies", "batch")
    assert "the batch replies were recorded" in printed
    want = expected(src, use_batch=True)
    check(got, want)
    assert got["age.jaccard"]["snsr"]["value"] != expected(src)["age.jaccard"].snsr


def test_duplicate_prompts_keep_their_class(tmp_path: Path) -> None:
    """The same prompt in three classes, three different published replies: each class's
    numbers are its own (issue 21, bug A); checked above, and here the premise holds."""
    src = shapes.write(tmp_path, "duplicate_prompts")
    top = src / "top_5"
    texts = {
        cls: _rows(top / cls / "an American.csv", None, cls)[0][1]
        for cls in ("continent", "country", "typo")
    }
    assert len(set(texts.values())) == 3


def test_french_class_gets_its_own_templates(
    tmp_path: Path,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    src = shapes.write(tmp_path, "french")
    got, _ = _import_and_run(pytester, monkeypatch, capsys, src)
    want = expected(src)
    assert check(got, want) == 2 * 3 * (2 + 2)
    assert (pytester.path / "imported" / "templates-french.yaml").is_file()


@pytest.mark.parametrize("missing", ["zero", "skip"])
def test_missing_policy_is_an_ini_key(
    missing: MissingPolicy,
    tmp_path: Path,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    src = shapes.write(tmp_path, "bom")
    got, _ = _import_and_run(pytester, monkeypatch, capsys, src, "--missing", missing)
    out = pytester.path / "imported"
    assert "missing=" not in (out / "test_published.py").read_text(encoding="utf-8")
    assert f"recfair_missing = {missing}" in (out / "pytest.ini").read_text(encoding="utf-8")
    check(got, expected(src, missing))


def test_a_1000_row_table(
    tmp_path: Path,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    src = shapes.write(tmp_path, "rows_1000")
    got, printed = _import_and_run(pytester, monkeypatch, capsys, src)
    assert "1000 entities, every row of each file (neutral.csv: 1000" in printed  # the table's
    want = expected(src)
    assert check(got, want) == 3 * (2 + 2)
