"""Run a command in a real pseudo-terminal and collect everything it wrote."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


def run_in_pty(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float = 120.0,
    columns: int = 160,
) -> tuple[int, str]:
    """(exit code, output as the terminal received it, ``\\r`` included)."""
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    full_env = {**env, "COLUMNS": str(columns), "TERM": "xterm"}
    proc = subprocess.Popen(
        list(argv), cwd=cwd, env=full_env, stdin=slave, stdout=slave, stderr=slave
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                proc.kill()
                raise TimeoutError(f"{argv} did not finish within {timeout} s")
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    data = b""
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        return proc.wait(), b"".join(chunks).decode("utf-8", "replace")
    finally:
        os.close(master)
