"""The content store never changes a verdict (issue 31): the cases where the replay
caches once did, through real ``pytest --fairness`` runs in subprocesses (each a new
process, as in CI), each compared with the same runs under ``RECFAIR_CACHE=off``.

- A shadowed template: identical ``tests/tpl.yaml`` and ``./tpl.yaml`` when the store
  was filled; ``./tpl.yaml`` (the file the prompts are built from) edited. The next
  ``--fairness-update`` run and the run after it must miss their cassettes as without
  the store, not pass on the scores of the old prompts.
- Values swapped between two keys inside the store's file: never served.
- A checkout moved to another folder: its store is found (no absolute path in a key).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.prompts.templates import load_templates
from tests.integration.capture_stub import capture_server
from tests.support.plugin import plugin_args, subprocess_env

pytest_plugins = ["pytester"]

TEMPLATES = Path(load_templates.__code__.co_filename).parent / "data" / "templates"

TESTS = """
from pytest_recfair import fairness

@fairness(attr="religion", templates="tpl.yaml")
def test_religion(fairness_result):
    pass

@fairness(attr="gender", templates="tpl.yaml")
def test_gender(fairness_result):
    pass
"""


def _project(root: Path, base: str, metric: str = "jaccard") -> None:
    (root / "pytest.ini").write_text(
        textwrap.dedent(
            f"""
            [pytest]
            recfair_entities = 3
            recfair_n_resamples = 50
            recfair_metric = {metric}
            recfair_provider = openai
            recfair_model = m1
            recfair_base_url = {base}/v1
            """
        )
    )
    template = (TEMPLATES / "natural.yaml").read_text(encoding="utf-8")
    (root / "tests").mkdir()
    (root / "tests" / "test_tpl.py").write_text(TESTS)
    for where in (root, root / "tests"):  # identical: either could be "the" template
        (where / "tpl.yaml").write_text(template, encoding="utf-8")


def _run(
    pytester: pytest.Pytester, root: Path, *args: str, off: bool = False
) -> tuple[dict[str, int], list[Any] | None]:
    """One ``pytest --fairness`` subprocess in ``root``: its outcomes and JSON results."""
    report = root / "r.json"
    report.unlink(missing_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        subprocess_env(mp)
        if off:
            mp.setenv("RECFAIR_CACHE", "off")
        else:
            mp.delenv("RECFAIR_CACHE", raising=False)
        mp.chdir(root)
        result = pytester.runpytest_subprocess(
            *plugin_args(), "-p", "no:cacheprovider", "--fairness",
            f"--fairness-report={report}", *args,
        )  # fmt: skip
    outcomes = {k: v for k, v in result.parseoutcomes().items() if k in ("passed", "errors")}
    results = json.loads(report.read_text())["results"] if report.is_file() else None
    return outcomes, results


def _recorded(pytester: pytest.Pytester, root: Path, base: str, metric: str = "jaccard") -> None:
    """A project whose cassettes and baselines are recorded, its store filled by a replay."""
    _project(root, base, metric)
    recorded = _run(pytester, root, "--fairness-record=once", "--fairness-update")
    assert recorded[0] == {"passed": 2}, recorded
    assert _run(pytester, root)[0] == {"passed": 2}  # a first replay: the store filled


def _store(root: Path) -> Path:
    (path,) = (root / "fixtures" / "cassettes" / ".recfair_cache").glob("*.sqlite3")
    return path


def test_an_edited_template_is_never_scored_from_the_store(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    with capture_server() as cap:
        cached, plain = tmp_path / "cached", tmp_path / "plain"
        for root in (cached, plain):
            root.mkdir()
            _recorded(pytester, root, cap.base)
    for root in (cached, plain):  # the prompts change: the cassettes no longer answer
        tpl = root / "tpl.yaml"
        tpl.write_text(tpl.read_text().replace("I am a fan of", "I really like"))
    runs = [
        [_run(pytester, root, *args, off=root == plain)[0] for args in (["--fairness-update"], [])]
        for root in (cached, plain)
    ]
    assert runs[1] == [{"errors": 2}, {"errors": 2}]  # two CassetteMiss errors each time
    assert runs[0] == runs[1]


def test_values_swapped_between_keys_are_never_served(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """Two projects that differ in one scoring setting fill their stores alike (entry
    for entry, in the same order); one's values put under the other's keys are not
    served: the next run gives what a run without the store gives."""
    mine, other = tmp_path / "mine", tmp_path / "other"
    with capture_server() as cap:
        for root, metric in ((mine, "jaccard"), (other, "serp")):
            root.mkdir()
            _recorded(pytester, root, cap.base, metric)
    with sqlite3.connect(_store(mine)) as a, sqlite3.connect(_store(other)) as b:
        (table,) = a.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchone()
        rows_a = a.execute(f"SELECT k, v FROM {table} ORDER BY rowid").fetchall()
        rows_b = b.execute(f"SELECT k, v FROM {table} ORDER BY rowid").fetchall()
        assert len(rows_a) == len(rows_b) > 0
        swapped = 0
        for (ka, va), (kb, vb) in zip(rows_a, rows_b, strict=True):
            if ka != kb and va != vb:
                a.execute(f"UPDATE {table} SET v = ? WHERE k = ?", (vb, ka))
                swapped += 1
        assert swapped
    served = _run(pytester, mine)
    assert served == _run(pytester, mine, off=True)
    assert served[0] == {"passed": 2}


def test_a_moved_checkout_finds_its_store(pytester: pytest.Pytester, tmp_path: Path) -> None:
    with capture_server() as cap:
        (tmp_path / "here").mkdir()
        _recorded(pytester, tmp_path / "here", cap.base)
    shutil.move(tmp_path / "here", tmp_path / "there")
    moved = tmp_path / "there"
    before = _entries(moved)
    got = _run(pytester, moved)
    assert _entries(moved) == before  # served from the store: nothing new kept
    assert got == _run(pytester, moved, off=True)


def _entries(root: Path) -> list[bytes]:
    with sqlite3.connect(_store(root)) as db:
        (table,) = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchone()
        return sorted(bytes(k) for (k,) in db.execute(f"SELECT k FROM {table}"))
