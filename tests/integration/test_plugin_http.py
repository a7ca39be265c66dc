"""End to end over real HTTP: record from the sim server on loopback, then replay offline."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.plugin import REPO, plugin_args

pytest_plugins = ["pytester"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def sim_server() -> Iterator[subprocess.Popen[bytes]]:
    """The simulated recommender served over HTTP on a free loopback port (args[4])."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_recfair.sim", "--port", str(port), "--bias", "demo"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    pytest.fail(f"sim server did not start on port {port}: {err}")
                time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*.json"))
    }


def test_record_then_replay_offline(
    pytester: pytest.Pytester, sim_server: subprocess.Popen[bytes]
) -> None:
    port = int(sim_server.args[4])  # type: ignore[index]
    pytester.makeini(
        "[pytest]\n"
        "recfair_entities = 4\n"
        "recfair_n_resamples = 200\n"
        "recfair_provider = openai\n"
        "recfair_model = recfair-sim\n"
        f"recfair_base_url = http://127.0.0.1:{port}/v1\n"
    )
    pytester.makepyfile(
        test_http="""
        from pytest_recfair import fairness

        @fairness(attr="religion")
        def test_religion(fairness_result):
            assert fairness_result.meta.provider == "openai"
            assert fairness_result.meta.record_mode in ("once", "none")
        """
    )
    args = (*plugin_args(), "--fairness")
    result = pytester.runpytest(*args, "--fairness-record=once", "--fairness-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["recfair *: seed=0 (--fairness-seed), record mode=once*"])
    cassettes = pytester.path / "fixtures" / "cassettes"
    recorded = _digest(cassettes)
    assert len(recorded) == 4  # one cassette per (test, entity)

    # stop the server: the default mode (none) must replay without any network
    sim_server.terminate()
    sim_server.wait(timeout=10)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    result = pytester.runpytest(*args, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert _digest(cassettes) == recorded  # replay never rewrites cassettes
