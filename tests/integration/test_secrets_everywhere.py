"""issue 22, point 4: a planted key reaches no file and no terminal line in the newer
surfaces: batch recording (journals while it runs, cassettes), a 401, shard files and
their merge, history, the plan, the report CLI, with log_cli at DEBUG on."""

from __future__ import annotations

import marshal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_recfair.cassettes import cache
from pytest_recfair.sim.batch import BatchOptions
from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer
from tests.support.plugin import REPO, plugin_args, subprocess_env

pytest_plugins = ["pytester"]

KEY = "sk-proj-PlantedKey7f3a9c1e5b2d4f60a8c7e1"
ENV = "RECFAIR_PLANTED_KEY"
DEBUG = ("-o", "log_cli=true", "--log-cli-level=DEBUG")
TESTS = """
from pytest_recfair import fairness


@fairness(attr="religion")
def test_religion():
    pass
"""


def _forms(key: str) -> set[str]:
    return {key, key[8:-4]}  # a cut-down copy counts as a leak too


def _text(path: Path) -> str:
    """A file's text; for the replay cache, its entries as stored and decompressed (a
    large entry is zlib-compressed, which would hide a key from a plain read)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.name != cache.FILE_NAME:
        return text
    with sqlite3.connect(path) as db:
        blobs = [bytes(v) for (v,) in db.execute("SELECT v FROM store")]
    for blob in blobs:  # each entry: its head (namespace and key) and value, as read
        end = 4 + int.from_bytes(blob[:4], "big")
        full = marshal.loads(blob[4:end])[0]
        text += repr(cache._loads(full, blob))
    return text


def _leaks(root: Path, out: str) -> list[tuple[str, str]]:
    found = [
        (str(p.relative_to(root)), form)
        for p in root.rglob("*")
        if p.is_file()
        for form in _forms(KEY)
        if form in _text(p)
    ]
    return found + [("terminal", form) for form in _forms(KEY) if form in out]


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, str]:
    run = pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", *DEBUG, *args)
    return run, run.stdout.str() + run.stderr.str()


def test_batch_shards_merge_history_plan_and_report_leak_no_key(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    subprocess_env(monkeypatch)
    monkeypatch.setenv(ENV, KEY)
    outputs = []
    with SimServer(
        SimulatedRecommender(bias="demo", seed=3), api_key=KEY, batch=BatchOptions(delay_s=0.3)
    ) as srv:
        pytester.makeini(
            "[pytest]\nrecfair_provider = openai\nrecfair_model = recfair-sim-1\n"
            f"recfair_base_url = {srv.base_url}\nrecfair_api_key_env = {ENV}\n"
            "recfair_entities = 4\nrecfair_n_resamples = 50\nrecfair_batch_poll = 0.05\n"
        )
        pytester.makepyfile(test_audit=TESTS)
        history = ("--fairness-history=hist",)
        for args in (
            ("--fairness", "--fairness-plan", "--fairness-record=once"),
            ("--fairness", "--fairness-batch", "--fairness-update", *history),
            ("--fairness", "--fairness-shard=1/2"),
            ("--fairness", "--fairness-shard=2/2"),
            ("--fairness", "--fairness-merge", "--fairness-report=merged.json", *history),
            ("--fairness", "--fairness-report=run.html", "--fairness-report=run.md"),
        ):
            _, out = _run(pytester, *args)
            assert "Traceback" not in out, out
            outputs.append(out)
        assert srv.batches.created == 1
    assert "DEBUG" in outputs[1]  # log_cli did print the HTTP stack's records
    cli = subprocess.run(
        [sys.executable, "-m", "pytest_recfair", "report", "merged.json", "--to", "md"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )
    outputs.append(cli.stdout + cli.stderr)
    assert _leaks(pytester.path, "\n".join(outputs)) == []


def test_a_401_leaks_no_key(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key the service refuses appears in neither the error nor the DEBUG log."""
    subprocess_env(monkeypatch)
    monkeypatch.setenv(ENV, KEY)
    with SimServer(SimulatedRecommender(seed=1), api_key="sk-the-other-key-000000000000") as srv:
        pytester.makeini(
            "[pytest]\nrecfair_provider = openai\nrecfair_model = recfair-sim-1\n"
            f"recfair_base_url = {srv.base_url}\nrecfair_api_key_env = {ENV}\n"
            "recfair_entities = 2\nrecfair_n_resamples = 50\nrecfair_batch_poll = 0.05\n"
        )
        pytester.makepyfile(test_audit=TESTS)
        outs = [_run(pytester, "--fairness", "--fairness-record=once")[1]]
        outs.append(_run(pytester, "--fairness", "--fairness-batch")[1])
    assert any("401" in o or "API key" in o for o in outs), outs[0]
    assert _leaks(pytester.path, "\n".join(outs)) == []
