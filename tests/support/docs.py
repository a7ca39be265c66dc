"""Code blocks of the Markdown docs, for tests that run what a reader copies."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.support.plugin import REPO, plugin_args

DOCS = REPO / "docs"
_FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.MULTILINE | re.DOTALL)
_HEADING = re.compile(r"^#+ (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    path: Path
    lang: str
    section: str  # the last heading above the block
    text: str  # dedented to the fence's indentation


def blocks(path: Path, lang: str) -> list[Block]:
    """Every fenced block of ``lang`` in ``path``, nested ones (in list items) included."""
    doc = path.read_text("utf-8")
    found = []
    for match in _FENCE.finditer(doc):
        indent, kind, body = match.groups()
        if kind != lang:
            continue
        headings = _HEADING.findall(doc, 0, match.start())
        text = "".join(line.removeprefix(indent) + "\n" for line in body.splitlines())
        found.append(Block(path, kind, headings[-1] if headings else "", text))
    return found


def commands(text: str, program: str = "pytest") -> list[list[str]]:
    """The ``program`` command lines of a shell block, split as the shell does (comments
    dropped, backslash continuations joined)."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0] == program:
            out.append(words[1:])
    return out


# --------------------------------------------------------------- the quickstart's project

QUICKSTART = DOCS / "quickstart.md"
SIM_KEY = "sk-quickstart-sim-0123456789"


def sampling_sim() -> SimServer:
    """A nearly fair model that samples (noise: 2 of 25 titles change on every call), so a
    prompt asked twice gets two different replies, as from a real model; latency with
    jitter, so replies come back in another order than they were asked."""
    rec = SimulatedRecommender(bias={"religion": {"Muslim": 0.04}}, noise=0.08, seed=3)
    return SimServer(rec, api_key=SIM_KEY, latency_ms=20, jitter_ms=20)


def section(path: Path, title: str, lang: str) -> str:
    """The one ``lang`` block under the heading that starts with ``title``."""
    (block,) = [b for b in blocks(path, lang) if b.section.startswith(title)]
    return block.text


def quickstart_project(
    pytester: pytest.Pytester, srv: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Steps 2 and 3 of the quickstart in ``pytester.path``, the key in the environment."""
    key_env = write_quickstart_project(pytester.path, srv)
    monkeypatch.setenv(key_env, SIM_KEY)


def write_quickstart_project(root: Path, srv: SimServer) -> str:
    """Steps 2 and 3 of the quickstart: its audit file and its provider settings as
    written, with the simulator's URL as the base URL (the model the reader points it
    at). Returns the name of the key's environment variable."""
    (root / "tests").mkdir()
    (root / "tests" / "test_fairness.py").write_text(
        section(QUICKSTART, "2. Write an audit", "python"), "utf-8"
    )
    ini = tomllib.loads(section(QUICKSTART, "3. Point it at your model", "toml"))
    options = {
        **ini["tool"]["pytest"]["ini_options"],
        "recfair_base_url": srv.base_url,
    }
    lines = "".join(f"{key} = {json.dumps(value)}\n" for key, value in options.items())
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\n" + lines, "utf-8")
    return str(options["recfair_api_key_env"])


def run_pytest(pytester: pytest.Pytester, args: list[str]) -> pytest.RunResult:
    return pytester.runpytest(*plugin_args(), "-p", "no:cacheprovider", *args)


def run_block(pytester: pytest.Pytester, text: str) -> list[pytest.RunResult]:
    """Every command of a shell block, in order, as a reader runs it in the project:
    pytest in process, ``rm``/``git`` as programs; ``export`` and ``pip`` are the
    reader's setup (the test sets the key and installed the package). Returns the pytest
    runs. A command it does not know fails the test: the doc changed, so must this."""
    runs = []
    for line in text.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words or words[0] in ("export", "pip"):
            continue
        if words[0] == "pytest":
            runs.append(run_pytest(pytester, words[1:]))
        elif words[0] in ("rm", "git"):
            subprocess.run(words, cwd=pytester.path, check=True, capture_output=True)
        else:
            pytest.fail(f"{line!r}: a command the quickstart test does not know how to run")
    return runs


def git_repo(root: Path) -> None:
    """A git repository in ``root`` with a committer, as the reader's project has."""
    for args in (
        ["init", "-q"],
        ["config", "user.email", "reader@example.com"],
        ["config", "user.name", "Reader"],
    ):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def baseline_files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.glob("*.json"))}
