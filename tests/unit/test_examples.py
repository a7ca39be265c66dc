"""The example files shipped in the package are the repository's fixtures byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_recfair.errors import DataError
from pytest_recfair.prompts.seeds import (
    EXAMPLE_FILES,
    PIPELINE_EXAMPLE,
    example_bytes,
    pipeline_example_files,
    write_examples,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("relative", EXAMPLE_FILES)
def test_the_shipped_copy_is_the_repositorys_file(relative: str) -> None:
    assert example_bytes(relative) == (REPO / relative).read_bytes()


def test_the_pipeline_example_ships_its_code_its_recordings_and_its_baselines() -> None:
    files = pipeline_example_files()
    assert all(f.startswith(f"{PIPELINE_EXAMPLE}/") for f in files)
    names = {f.removeprefix(f"{PIPELINE_EXAMPLE}/") for f in files}
    assert {"conftest.py", "test_pipeline.py", "pytest.ini", "catalogue.csv"} <= names
    assert {"baselines/test_religion.json", "baselines/test_gender.json"} <= names
    assert len([n for n in names if n.startswith("fixtures/cassettes/")]) == 6
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_writing_twice_keeps_the_files_and_a_clash_writes_nothing(tmp_path: Path) -> None:
    every = len(EXAMPLE_FILES) + len(pipeline_example_files())
    assert [what for _, what in write_examples(tmp_path)] == ["written"] * every
    assert [what for _, what in write_examples(tmp_path)] == ["unchanged"] * every
    assert (tmp_path / PIPELINE_EXAMPLE / "conftest.py").read_bytes() == example_bytes(
        f"{PIPELINE_EXAMPLE}/conftest.py"
    )
    (tmp_path / EXAMPLE_FILES[1]).write_text("title\nmine\n", "utf-8")
    (tmp_path / EXAMPLE_FILES[0]).unlink()
    with pytest.raises(DataError, match="exists with other content; nothing was written"):
        write_examples(tmp_path)
    assert not (tmp_path / EXAMPLE_FILES[0]).exists()
