"""Issue 33 point 2: a cassette write killed with SIGKILL leaves its hidden temp file
behind; the next run (``cassettes compact``, ``cassettes expand`` or a test run reading
the folder) removes it. Real processes, really killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_recfair.__main__ import main
from pytest_recfair.cassettes import compact
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.support.plugin import REPO, plugin_args

pytest_plugins = ["pytester"]


def _temps(root: Path) -> list[str]:
    return sorted(name for name in os.listdir(root) if name.endswith(".tmp"))


def _killed_mid_write(root: Path, *args: str) -> list[str]:
    """Start ``args`` (a Python command line) writing into ``root`` and SIGKILL it the
    moment a temp file of ours is there; the temp files it left."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for _ in range(5):  # a try that finished before a temp file was seen runs again
        proc = subprocess.Popen([sys.executable, *args], env=env, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline and not _temps(root):
            pass
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if _temps(root):
            return _temps(root)
    raise AssertionError("no try was killed while it wrote")


def _text(i: int) -> str:
    """A cassette of some MB (so that writing it takes a while)."""
    body = json.dumps({"choices": [{"message": {"content": f"{i}. Heat\n" * 200_000}}]})
    item = {"request": {"body": f"film {i}"}, "response": {"body": {"string": body}}}
    return json.dumps({"interactions": [item], "version": 1})


@pytest.mark.parametrize("after", ["expand", "compact", "a store reading the folder"])
def test_a_conversion_killed_mid_write_leaves_no_temp_file_after_the_next_run(
    tmp_path: Path, after: str
) -> None:
    root = tmp_path / "cassettes"
    root.mkdir()
    texts = {f"e{i}": _text(i) for i in range(8)}
    for name, text in texts.items():
        compact.write(root / f"{name}.json.gz", text)
    left = _killed_mid_write(root, "-m", "pytest_recfair", "cassettes", "expand", str(root))
    assert all(name.startswith(".e") for name in left), left
    if after == "a store reading the folder":
        CassetteStore(root, "none")
    else:
        assert main(["cassettes", after, str(root)]) == 0
        suffix = ".json.gz" if after == "compact" else ".json"
        assert {p.name: compact.read_text(p) for p in compact.cassette_files(root)} == {
            f"{name}{suffix}": text for name, text in texts.items()
        }
    assert _temps(root) == []


def test_a_pytest_run_after_a_killed_cassette_write_leaves_no_temp_file(
    pytester: pytest.Pytester,
) -> None:
    """Recorded, a cassette rewrite killed mid-write, then a replay run: it passes and
    the killed writer's temp file is gone."""
    with SimServer(SimulatedRecommender("demo", seed=0)) as srv:
        pytester.makeini(
            "[pytest]\nrecfair_entities = 6\nrecfair_n_resamples = 50\n"
            f"recfair_provider = openai\nrecfair_model = recfair-sim\n"
            f"recfair_base_url = {srv.base_url}\n"
        )
        pytester.makepyfile(
            test_audit="from pytest_recfair import fairness\n\n"
            "@fairness(attr='religion')\ndef test_religion():\n    pass\n"
        )
        args = (*plugin_args(), "-p", "no:cacheprovider", "--fairness")
        record = pytester.runpytest(*args, "--fairness-record=once", "--fairness-update")
        record.assert_outcomes(passed=1)
    root = pytester.path / "fixtures" / "cassettes"
    victim = sorted(root.glob("*.json"))[0]
    write = (
        "import sys, pathlib; from pytest_recfair.cassettes.compact import write; "
        "write(pathlib.Path(sys.argv[1]), '{\"interactions\": [\"%s\"]}' % ('Heat ' * 2_000_000))"
    )
    _killed_mid_write(root, "-c", write, str(victim))
    assert json.loads(victim.read_text())["interactions"][0]["request"]  # the old one
    pytester.runpytest(*args).assert_outcomes(passed=1)  # replays, sends nothing
    assert _temps(root) == []
