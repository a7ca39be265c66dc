"""Bad grid, seeds and template files give a one-line DataError naming the file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.errors import DataError
from pytest_recfair.prompts.grids import load_grid
from pytest_recfair.prompts.seeds import load_seeds
from pytest_recfair.prompts.templates import load_templates

LOADERS: dict[str, tuple[Callable[[Path], Any], str]] = {
    "grid": (load_grid, "grid.yaml"),
    "templates": (load_templates, "templates.yaml"),
    "seeds yaml": (load_seeds, "seeds.yaml"),
    "seeds csv": (load_seeds, "seeds.csv"),
    "seeds txt": (load_seeds, "seeds.txt"),
}


@pytest.mark.parametrize("kind", list(LOADERS))
def test_non_utf8_file(tmp_path: Path, kind: str) -> None:
    load, name = LOADERS[kind]
    path = tmp_path / name
    path.write_bytes("name: Caf\u00e9\n".encode("latin-1") + b"\xff\xfe\n")
    with pytest.raises(DataError) as info:
        load(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert name in msg
    assert "not UTF-8" in msg
    assert "re-save it as UTF-8" in msg


@pytest.mark.parametrize("kind", ["grid", "templates", "seeds yaml"])
def test_broken_yaml_message_is_one_line(tmp_path: Path, kind: str) -> None:
    load, name = LOADERS[kind]
    path = tmp_path / name
    path.write_text("a: [1, 2\nb: {c\n", encoding="utf-8")
    with pytest.raises(DataError) as info:
        load(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert name in msg
    assert "not valid YAML" in msg
