"""A long exact replay's second half in a second process (engine/stream.py ``_in_two``), on
the bundled demo, every kind of audit (list overlap, item side, exposure, candidate
position, role play with its judge): real ``pytest --fairness`` runs in subprocesses.

With chunks of 64 prompts and sharing from two chunks on, every audit of the demo is
shared with a second process, and the reports are
those of one process; a second process that fails, crashes or cannot send its answer is replaced
by the first doing its half: the same reports again. The content store kept by a shared
first run serves the next run the same numbers."""

from __future__ import annotations

import collections
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.plugin import run_demo_counted

ROOT = Path(__file__).resolve().parents[2]

COUNTER = """
import collections, json, os, signal
from pytest_recfair.engine import stream
from pytest_recfair.fileio import Child

FORKED, SENT = [], collections.Counter()  # this process's: a forked child's stay in it
_send = stream.send


class Broken(Child):
    def __init__(self, work):
        how = os.environ.get("RECFAIR_TEST_CHILD", "")

        def broken():
            if how == "raises":
                raise RuntimeError("the second process failed")
            if how == "killed":
                os.kill(os.getpid(), signal.SIGKILL)
            if how == "unsendable":
                return lambda: None  # (a value pickle refuses)
            return work()

        FORKED.append(1)
        super().__init__(broken)


def send(request, cases):
    SENT[request.test_id] += len(cases)
    return _send(request, cases)


stream.send, stream.Child = send, Broken
if os.environ.get("RECFAIR_TEST_SHARE"):  # the demo's audits, short, in chunks enough to share
    stream.CHUNK_PROMPTS, stream._TWO_FROM = 64, 2


def pytest_sessionfinish(session):  # a line per process (xdist: the workers' and the main)
    with open(os.environ["RECFAIR_TEST_COUNTS"], "a") as fh:
        fh.write(json.dumps([len(FORKED), SENT]) + "\\n")
"""


def _run(
    pytester: pytest.Pytester, name: str, *args: str, **env: str
) -> tuple[Any, int, dict[str, int]]:
    """The run's results, how many second processes it started, prompts each audit sent
    from the pytest process(es)."""
    report, counts = pytester.path / f"{name}.json", pytester.path / f"{name}-counts.json"
    env = {"RECFAIR_TEST_COUNTS": str(counts), "RECFAIR_CACHE": "off", **env}
    run_demo_counted(pytester, report, *args, **env)
    results = json.loads(report.read_text(encoding="utf-8"))["results"]
    forked, sent = 0, collections.Counter[str]()
    for line in counts.read_text(encoding="utf-8").splitlines():
        n, by_test = json.loads(line)
        forked, sent = forked + n, sent + collections.Counter(by_test)
    return results, forked, dict(sent)


@pytest.fixture
def demo(pytester: pytest.Pytester) -> pytest.Pytester:
    for folder in ("audits", "fixtures", "baselines"):
        shutil.copytree(ROOT / folder, pytester.path / folder)
    shutil.copy(ROOT / "pyproject.toml", pytester.path / "pyproject.toml")
    (pytester.path / "recfair_counter.py").write_text(COUNTER)
    shutil.rmtree(pytester.path / "fixtures" / "cassettes" / ".recfair_cache", True)
    return pytester


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="a second process: Linux with two cores",
)
def test_every_kind_shared_with_a_second_process_gives_the_one_process_report(
    demo: pytest.Pytester,
) -> None:
    one, forked, alone = _run(demo, "one", RECFAIR_PROCESSES="1")
    assert (forked, len(alone)) == (0, 10)
    two, forked, sent = _run(demo, "two", RECFAIR_TEST_SHARE="1")
    assert forked == 10  # every audit, every kind
    assert sent.keys() == alone.keys()
    assert all(0 < sent[t] < alone[t] for t in alone), (sent, alone)  # half sent elsewhere
    assert two == one
    for how in ("raises", "killed", "unsendable"):  # the first process does the half itself
        again, forked, sent = _run(demo, how, RECFAIR_TEST_SHARE="1", RECFAIR_TEST_CHILD=how)
        assert (forked, sent) == (10, alone), how
        assert again == one, how
    default, forked, sent = _run(demo, "default")
    assert (forked, sent) == (0, alone)  # ~1,200 prompts an audit: a fork costs more
    assert default == one
    workers, forked, sent = _run(demo, "workers", "-n", "2", RECFAIR_TEST_SHARE="1")
    assert (forked, sent) == (0, alone)  # an xdist worker's cores are in use
    assert workers == one
    first, forked, _ = _run(demo, "first", RECFAIR_TEST_SHARE="1", RECFAIR_CACHE="on")
    served, _, sent = _run(demo, "served", RECFAIR_TEST_SHARE="1", RECFAIR_CACHE="on")
    assert forked == 10
    assert sent == {}  # served whole from the content store the shared run filled
    assert first == served == one


def test_a_bad_recfair_processes_is_one_line_naming_it(demo: pytest.Pytester) -> None:
    os.environ["RECFAIR_PROCESSES"] = "4"  # (checked in and out of xdist workers)
    try:
        result = demo.runpytest_subprocess("--fairness", "-p", "no:cacheprovider", "audits")
    finally:
        del os.environ["RECFAIR_PROCESSES"]
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*RECFAIR_PROCESSES='4': expected 1 (every replay in one*"])
    assert "Traceback" not in result.stdout.str()
