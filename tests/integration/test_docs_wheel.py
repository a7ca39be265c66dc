"""The docs' item-side examples run from an installed wheel (issue 25, 5).

The wheel is built from this checkout (``pip wheel --no-deps .``) and installed into a
fresh virtual environment in a temporary directory; a new project there holds the two
examples of docs/itemside.md as written and the simulated recommender as its model.
Before ``python -m pytest_recfair examples`` the run fails with the one-line error that
names where relative paths resolve; after it, both examples pass.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.support.docs import DOCS, blocks
from tests.support.plugin import REPO

ITEMSIDE = DOCS / "itemside.md"

CONFTEST = """
import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender


@pytest.fixture(scope="session")
def recfair_recommender():
    return SimulatedRecommender(bias="demo", noise=0.08, seed=7)
"""


def _examples() -> str:
    """The item-side and candidate-position examples, as the doc writes them."""
    found = [
        b.text
        for b in blocks(ITEMSIDE, "python")
        if b.section.startswith(("Item side:", "Candidate position:"))
    ]
    assert len(found) == 2, found
    return "from pytest_recfair import fairness\n\n\n" + "\n\n".join(found)


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST"))}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh venv with the wheel of this checkout installed."""
    root = tmp_path_factory.mktemp("wheel")
    built = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            str(root / "dist"),
            str(REPO),
        ],
        root,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (root / "dist").glob("pytest_recfair-*.whl")
    venv.create(root / "venv", with_pip=True)
    python = root / "venv" / "bin" / "python"
    done = _run([str(python), "-m", "pip", "install", "-q", str(wheel)], root)
    assert done.returncode == 0, done.stderr
    return python


def test_the_itemside_examples_run_from_the_installed_wheel(
    installed: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "pytest.ini").write_text("[pytest]\nrecfair_n_resamples = 200\n", "utf-8")
    (project / "tests" / "conftest.py").write_text(CONFTEST, "utf-8")
    (project / "tests" / "test_examples.py").write_text(_examples(), "utf-8")
    # the package comes from the venv, not from this checkout
    where = _run(
        [str(installed), "-c", "import pytest_recfair; print(pytest_recfair.__file__)"], project
    )
    assert str(REPO) not in where.stdout
    pytest_cmd = [
        str(installed),
        "-m",
        "pytest",
        "--fairness",
        "--fairness-update",
        "-p",
        "no:cacheprovider",
    ]

    # run from a subfolder: paths resolve from rootdir, and the error says so
    # (checked before any test runs: a usage error, on stderr, naming the first one missing)
    missing = _run(pytest_cmd, project / "tests")
    assert missing.returncode == 4
    assert "fixtures/catalogues/restaurants.csv" in missing.stderr
    assert f"{project / 'fixtures/catalogues/restaurants.csv'} (rootdir)" in missing.stderr
    assert "python -m pytest_recfair examples" in missing.stderr

    (command,) = [b.text for b in blocks(ITEMSIDE, "bash") if "pytest_recfair examples" in b.text]
    words = command.split("#", 1)[0].split()
    assert words[:3] == ["python", "-m", "pytest_recfair"]
    wrote = _run([str(installed), *words[1:]], project)
    assert wrote.returncode == 0, wrote.stderr
    for rel in ("seeds/cities.csv", "catalogues/restaurants.csv", "candidates/directors.yaml"):
        assert (project / "fixtures" / rel).is_file(), rel

    ran = _run(pytest_cmd, project / "tests")
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert "2 passed" in ran.stdout
