"""The input files the docs' examples name (docs/itemside.md), shipped in the package.

``python -m pytest_recfair examples [--dir DIR]`` writes them under DIR (default: the
current directory) at the paths the examples use, so the examples run from an installed
wheel as written. The copies in ``prompts/data/examples/`` are the repository's
``fixtures/`` files byte for byte (``tests/unit/test_examples.py`` checks it).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Final

from pytest_recfair.errors import DataError
from pytest_recfair.fileio import atomic_write_bytes

__all__ = ["EXAMPLE_FILES", "example_bytes", "write_examples"]

#: Paths, relative to the project's rootdir, of the files the docs' examples use.
EXAMPLE_FILES: Final = (
    "fixtures/seeds/cities.csv",
    "fixtures/catalogues/restaurants.csv",
    "fixtures/candidates/directors.yaml",
)

#: The command that writes them (named by errors about a missing example file).
EXAMPLES_COMMAND: Final = "python -m pytest_recfair examples"


def example_bytes(relative: str) -> bytes:
    """The shipped content of one of :data:`EXAMPLE_FILES`."""
    if relative not in EXAMPLE_FILES:
        raise DataError(
            f"{relative!r} is not an example file; they are: {', '.join(EXAMPLE_FILES)}"
        )
    return (
        resources.files("pytest_recfair.prompts").joinpath("data/examples", relative).read_bytes()
    )


def write_examples(root: Path) -> list[tuple[Path, str]]:
    """Write every example file under ``root``: (path, "written" or "unchanged"). A file
    that exists with other content is left alone: one-line DataError before anything is
    written."""
    plan = [(root / rel, example_bytes(rel)) for rel in EXAMPLE_FILES]
    clash = [p for p, data in plan if p.exists() and p.read_bytes() != data]
    if clash:
        raise DataError(
            f"{clash[0]} exists with other content; nothing was written. Move it away or "
            "pass --dir to write the example files elsewhere."
        )
    done = []
    for path, data in plan:
        if path.exists():
            done.append((path, "unchanged"))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)
        done.append((path, "written"))
    return done
