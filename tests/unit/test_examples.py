"""The example files shipped in the package are the repository's fixtures byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_recfair.errors import DataError
from pytest_recfair.prompts.seeds import EXAMPLE_FILES, example_bytes, write_examples

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("relative", EXAMPLE_FILES)
def test_the_shipped_copy_is_the_repositorys_file(relative: str) -> None:
    assert example_bytes(relative) == (REPO / relative).read_bytes()


def test_writing_twice_keeps_the_files_and_a_clash_writes_nothing(tmp_path: Path) -> None:
    assert [what for _, what in write_examples(tmp_path)] == ["written"] * 3
    assert [what for _, what in write_examples(tmp_path)] == ["unchanged"] * 3
    (tmp_path / EXAMPLE_FILES[1]).write_text("title\nmine\n", "utf-8")
    (tmp_path / EXAMPLE_FILES[0]).unlink()
    with pytest.raises(DataError, match="exists with other content; nothing was written"):
        write_examples(tmp_path)
    assert not (tmp_path / EXAMPLE_FILES[0]).exists()
