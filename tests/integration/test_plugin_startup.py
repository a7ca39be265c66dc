"""pytest start-up: loading the plugin imports none of the heavy modules of an audit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.plugin import CONFTEST, INI, REPO

HEAVY = ("numpy", "httpx", "jsonschema", "vcr", "rapidfuzz", "pytest_recfair.engine")


def test_plugin_import_is_light() -> None:
    code = (
        "import sys, pytest_recfair.plugin as p; "
        "p.marker(); "
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


_PROJECT = {
    "test_plain.py": "def test_plain():\n    assert True\n",
    "test_audit.py": (
        "from pytest_recfair import fairness\n\n"
        "@fairness(attr='religion', max_snsr=0.1)\n"
        "def test_religion():\n    pass\n"
    ),
}


def test_plain_pytest_in_a_project_with_audits_imports_nothing_heavy(tmp_path: Path) -> None:
    """Without --fairness the audits are skipped: the run pays for no heavy import (the
    report path check, the gate's baseline names) — issue 25.10, start-up within 0.2 s of
    ``-p no:recfair`` (benchmarks/bench_startup.py)."""
    for name, text in _PROJECT.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nrecfair_report = reports/fairness.html\n", encoding="utf-8"
    )
    code = (
        "import sys, pytest; "
        "rc = pytest.main(['-q', '-p', 'no:cacheprovider']); "
        f"print('HEAVY', sorted(m for m in {HEAVY!r} if m in sys.modules), int(rc))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert "HEAVY [] 0" in out.stdout, out.stdout + out.stderr
    assert "1 passed, 1 skipped" in out.stdout
    assert not (tmp_path / "reports").exists()  # nothing is created without --fairness


def test_the_runtime_is_changed_only_around_the_plugins_work(tmp_path: Path) -> None:
    """--fairness freezes the collector's long-lived objects around the plugin's own work
    (configure, the collection check, each audit) and holds BLAS to one thread while an
    audit runs: the recommender sees both; a plain test, and the process after the run,
    see the runtime as they had it."""
    blas = "[i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas']"
    (tmp_path / "conftest.py").write_text(
        "import gc\nfrom threadpoolctl import threadpool_info\n"
        "from pytest_recfair.sim.recommender import SimulatedRecommender\n"
        "import pytest\n\nSEEN = []\n\n"
        "@pytest.fixture(scope='session')\ndef recfair_recommender():\n"
        "    sim = SimulatedRecommender()\n"
        "    def answer(prompt, system=None):\n"
        f"        SEEN.append((gc.get_freeze_count() > 0, {blas}))\n"
        "        return sim(prompt, system)\n"
        "    return answer\n",
        encoding="utf-8",
    )
    (tmp_path / "pytest.ini").write_text(INI, encoding="utf-8")
    (tmp_path / "test_audit.py").write_text(
        "import gc\nfrom threadpoolctl import threadpool_info\n"
        "from pytest_recfair import fairness\nfrom conftest import SEEN\n\n"
        "@fairness(attr='religion', max_snsr=1.0)\ndef test_religion():\n    pass\n\n"
        "def test_plain():\n    assert SEEN and all(s == (True, [1]) for s in SEEN), SEEN\n"
        f"    now = (gc.get_freeze_count(), gc.get_threshold(), {blas})\n"
        "    assert now == (0, (700, 10, 10), [2])\n",
        encoding="utf-8",
    )
    code = (
        "import gc, pytest, numpy; from threadpoolctl import threadpool_limits; "
        "threadpool_limits(2, user_api='blas'); gc.set_threshold(700, 10, 10); "
        "rc = pytest.main(['-q', '-p', 'no:cacheprovider', '-p', 'no:randomly', '--fairness', "
        "'--fairness-update']); print('GC', gc.get_freeze_count(), gc.get_threshold(), int(rc))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert "2 passed" in out.stdout, out.stdout
    assert "GC 0 (700, 10, 10) 0" in out.stdout, out.stdout


#: Modules a list-overlap audit with a JSON report never needs: the other kinds and their
#: metrics (the kind registry imports a kind when asked for), the history and the HTML
#: report, the sharding and the comparison of several models.
UNUSED_BY_OVERLAP = (
    *(f"pytest_recfair.engine.{k}" for k in ("items", "exposure", "positions", "roleplay")),
    *(f"pytest_recfair.metrics.{m}" for m in ("itemshift", "exposure", "positions", "roleplay")),
    "pytest_recfair.prompts.candidates",
    "pytest_recfair.report.history",
    "pytest_recfair.report.html_report",
    "pytest_recfair.engine.sharding",
    "pytest_recfair.metrics.pairs",
)


def test_a_list_overlap_audit_imports_no_other_kind(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text(INI, encoding="utf-8")
    (tmp_path / "test_audit.py").write_text(_PROJECT["test_audit.py"], encoding="utf-8")
    run = "import sys, pytest; rc = pytest.main(['-q', '-p', 'no:cacheprovider', '--fairness', "
    shown = f"print('UNUSED', sorted(m for m in {UNUSED_BY_OVERLAP!r} if m in sys.modules), rc)"
    for args in ("'--fairness-update'", "'--fairness-report=r.json'"):  # baseline, then gated
        out = subprocess.run(
            [sys.executable, "-c", f"{run}{args}]); {shown}"],
            cwd=tmp_path, capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert "UNUSED [] 0" in out.stdout, out.stdout + out.stderr
    assert "pytest_recfair.engine.overlap.kind" not in out.stdout
    assert (tmp_path / "r.json").is_file()
