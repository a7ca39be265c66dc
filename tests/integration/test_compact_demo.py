"""The bundled demo replayed from compact cassettes gives the numbers it gives from the
plain ones, and a second run (served by the caches) gives them again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


def _run(pytester: pytest.Pytester, name: str) -> Any:
    report = pytester.path / f"{name}.json"
    result = pytester.runpytest_subprocess(
        "--fairness", "-p", "no:cacheprovider", "-p", "no:randomly", f"--fairness-report={report}"
    )
    result.assert_outcomes(passed=10)
    return json.loads(report.read_text(encoding="utf-8"))["results"]


def test_demo_from_compact_cassettes_gives_identical_numbers(pytester: pytest.Pytester) -> None:
    for folder in ("audits", "fixtures", "baselines"):
        shutil.copytree(ROOT / folder, pytester.path / folder)
    shutil.copy(ROOT / "pyproject.toml", pytester.path / "pyproject.toml")
    cassettes = pytester.path / "fixtures" / "cassettes"
    plain = _run(pytester, "plain")
    assert main(["cassettes", "compact", str(cassettes)]) == 0
    assert not list(cassettes.glob("*.json"))
    assert list(cassettes.glob("*.json.gz"))
    compact = _run(pytester, "compact")
    cached = _run(pytester, "cached")  # the audits served from .recfair_cache
    assert (cassettes / ".recfair_cache" / "store.sqlite3").is_file()
    assert plain, "the demo produced no results"
    assert compact == plain
    assert cached == plain


def test_a_misspelt_cassette_folder_is_named_and_not_created(pytester: pytest.Pytester) -> None:
    """Issue 34 point 5: a misspelt recfair_cassette_dir gave a 700-character miss per
    test that never said the folder does not exist, and created it."""
    for folder in ("audits", "fixtures", "baselines"):
        shutil.copytree(ROOT / folder, pytester.path / folder)
    shutil.copy(ROOT / "pyproject.toml", pytester.path / "pyproject.toml")
    result = pytester.runpytest_subprocess(
        "--fairness", "-p", "no:cacheprovider", "-o", "recfair_cassette_dir=fixtures/casettes"
    )
    result.assert_outcomes(errors=10)
    lines = [line for line in result.stdout.lines if line.startswith("CassetteMiss:")]
    assert len(lines) == 10
    assert all("the cassette folder" in line and "does not exist" in line for line in lines)
    missing = pytester.path / "fixtures" / "casettes"
    assert all(len(line.replace(str(missing), "")) < 400 for line in lines)  # was ~700
    assert not missing.exists()
