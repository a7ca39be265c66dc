"""docs/pipeline.md and the shipped pipeline example, run as a reader runs them.

The example (``python -m pytest_recfair examples``, then ``pytest --fairness`` in
``pipeline_example/``) replays its recording offline and passes, asking nothing; its
files are the page's first blocks. The page's workflow is followed on a copy of it: a
re-ranker change is measured with no request, a system prompt change misses naming what
differed, a re-recording into fresh cassettes passes. Every other conftest block of the
page records against the simulator (keys in the environment, scrubbed from every file)
and replays with no key and no request. Each run is a subprocess: the blocks are all
``conftest.py``, and vcrpy patches the process it runs in.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.support.docs import DOCS

PIPELINE = DOCS / "pipeline.md"
KEY = "sk-pipeline-docs-0123456789abcdef"
# what the reader's shell may hold that would point a run elsewhere
_DROP = ("PYTHON", "PYTEST", "OPENAI_", "ANTHROPIC_", "PIPELINE_")


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(_DROP)}
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def _pytest(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return _run(["-m", "pytest", "-p", "no:cacheprovider", *args], cwd, **env)


def blocks(path: Path, lang: str) -> list[tuple[str, str]]:
    """(section, text) of every ``lang`` block: the last heading outside a block above it
    (a comment line in a block is not a heading)."""
    found, section, fence, body = [], "", None, []
    for line in path.read_text("utf-8").splitlines(keepends=True):
        if fence is None:
            if line.startswith("```"):
                fence, body = line[3:].strip(), []
            elif line.startswith("#"):
                section = line.lstrip("#").strip()
        elif line.startswith("```"):
            if fence == lang:
                found.append((section, "".join(body)))
            fence = None
        else:
            body.append(line)
    return found


def _files(section: str) -> dict[str, str]:
    """The section's blocks that open with a file name comment: name -> text."""
    found = {}
    for lang in ("python", "ini"):
        for where, text in blocks(PIPELINE, lang):
            first = text.split("\n", 1)[0]
            if where.startswith(section) and first.startswith("# "):
                found[first[2:].split(":")[0].strip()] = text
    return found


def _bash(section: str) -> list[str]:
    return [text for where, text in blocks(PIPELINE, "bash") if where.startswith(section)]


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    """The simulator the example was recorded against (`--bias demo`, any key)."""
    with SimServer(SimulatedRecommender(bias="demo", seed=0)) as srv:
        yield srv


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """``python -m pytest_recfair examples`` as the page runs it: the example's folder."""
    (block,) = _bash("Run the example")
    lines = [shlex.split(line, comments=True) for line in block.splitlines()]
    assert ["python", "-m", "pytest_recfair", "examples"] in lines
    assert ["cd", "pipeline_example", "&&", "pytest", "--fairness"] in lines
    wrote = _run(["-m", "pytest_recfair", "examples"], tmp_path)
    assert wrote.returncode == 0, wrote.stderr
    return tmp_path / "pipeline_example"


def test_the_page_shows_the_example_as_shipped(example: Path) -> None:
    shown = _files("An OpenAI SDK pipeline")
    assert sorted(shown) == ["conftest.py", "pytest.ini", "test_pipeline.py"]
    for name, text in shown.items():
        assert (example / name).read_text("utf-8") == text, name


def test_the_example_replays_offline_and_asks_nothing(example: Path, sim: SimServer) -> None:
    # as written: no server, no key, the default record mode (none)
    ran = _pytest(example, "--fairness")
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert "2 passed" in ran.stdout
    assert "48 already recorded, 0 to ask" in ran.stdout
    # a mode that would ask whatever is not recorded, with a live model: nothing is asked
    asked = sim.stats.requests
    again = _pytest(example, "--fairness", "--fairness-record=once", PIPELINE_BASE_URL=sim.base_url)
    assert again.returncode == 0, again.stdout[-3000:]
    assert sim.stats.requests == asked


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text("utf-8")
    assert old in text
    path.write_text(text.replace(old, new), "utf-8")


def test_the_workflow_of_the_page_on_the_example(example: Path, sim: SimServer) -> None:
    conftest = example / "conftest.py"
    original = conftest.read_text("utf-8")
    live = {"PIPELINE_BASE_URL": sim.base_url}
    asked = sim.stats.requests

    # a re-ranker change: the page's new rerank, measured on the recorded replies
    (new_rerank,) = [t for _, t in blocks(PIPELINE, "python") if "def rerank" in t][1:]
    start = original.index("def rerank")
    end = original.index("\n\n\n", start)
    conftest.write_text(original[:start] + new_rerank.rstrip("\n") + original[end:], "utf-8")
    changed = _pytest(example, "--fairness", **live)
    assert changed.returncode == 1, changed.stdout[-3000:]
    assert "2 failed" in changed.stdout
    assert "quality_drift: recommendation quality fell for every group alike: 0.933 -> 0.647" in (
        " ".join(changed.stdout.split())
    )
    assert sim.stats.requests == asked  # nothing was sent

    # a system prompt change: the miss names what differs
    conftest.write_text(original, "utf-8")
    _edit(conftest, 'a numbered list."', 'a numbered list of 25 titles."')
    missed = _pytest(example, "--fairness", **live)
    assert missed.returncode == 1
    out = " ".join(missed.stdout.split())
    assert "CassetteMiss: no recorded reply for test 'test_pipeline.py::test_religion'" in out
    assert (
        "what differs from the recording of this prompt: messages[0] (system).content: "
        "'...e. Answer with a numbered list.' recorded, '...e. Answer with a numbered list "
        "of 25 titles.' now"
    ) in out
    assert sim.stats.requests == asked

    # re-recording into fresh cassettes, as the page's block does it, then accepting
    (rerecord,) = [text for text in _bash("The workflow") if "rm -rf" in text]
    for line in rerecord.splitlines():
        words = shlex.split(line, comments=True)
        if words[0] == "rm":
            shutil.rmtree(example / words[-1])
            continue
        assert words[0] == "pytest"
        done = _pytest(example, *words[1:], "-v", **live)
        if "--fairness-update" not in words:  # the gate against the old baseline
            assert "pipeline model calls per prompt: unknown before the first recording" in (
                done.stdout
            )
            assert "pipeline model calls per prompt: 1.0 recorded" in done.stdout
        else:
            assert done.returncode == 0, done.stdout[-3000:]
    assert sim.stats.requests == asked + 42  # 48 prompts, 6 neutral ones shared
    assert KEY not in "".join(p.read_text("utf-8") for p in example.rglob("*.json"))


SECTIONS = (
    "Anthropic SDK",
    "LangChain",
    "Async pipelines",
    "Code on httpx 0.x",
    "A pipeline that builds its own client",
    "Output-level recording",
)


@pytest.mark.parametrize("section", SECTIONS)
def test_each_block_records_and_replays_with_no_key(
    section: str, tmp_path: Path, sim_with_key: SimServer
) -> None:
    main = _files("An OpenAI SDK pipeline")
    shown = {"pytest.ini": main["pytest.ini"], "test_pipeline.py": main["test_pipeline.py"]}
    shown.update(_files(section))
    assert "conftest.py" in shown
    for name, text in shown.items():
        (tmp_path / name).write_text(text, "utf-8")
    where = {
        "OPENAI_BASE_URL": sim_with_key.base_url,
        "ANTHROPIC_BASE_URL": sim_with_key.base_url.removesuffix("/v1"),
    }
    keys = {"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY}

    before = sim_with_key.stats.requests
    recorded = _pytest(
        tmp_path, "--fairness", "--fairness-record=once", "--fairness-update", **where, **keys
    )
    assert recorded.returncode == 0, recorded.stdout[-3000:]
    sent = sim_with_key.stats.requests - before
    if section.startswith("Output-level"):
        assert sent == 0  # a model in the process: no HTTP at all
    else:
        assert sent > 0
    if section.startswith("A pipeline that builds"):
        assert "1 in flight" in recorded.stdout  # vcrpy: one prompt at a time
    written = "".join(p.read_text("utf-8") for p in tmp_path.rglob("*.json"))
    assert (tmp_path / "fixtures" / "cassettes").is_dir()
    assert KEY not in written

    replayed = _pytest(tmp_path, "--fairness", **where)  # CI: no key
    assert replayed.returncode == 0, replayed.stdout[-3000:]
    assert sim_with_key.stats.requests - before == sent  # nothing asked


@pytest.fixture(scope="module")
def sim_with_key() -> Iterator[SimServer]:
    """The model of the page's other blocks: it wants the key, as a real service does."""
    with SimServer(SimulatedRecommender(bias="demo", seed=0), api_key=KEY) as srv:
        yield srv
