"""Where and from what a stored run came: commit, branch, date, machine and settings, as
the ``"entry"`` object of a ``--fairness-history`` entry (like pytest-benchmark's
``commit_info`` and ``machine_info``).

The commit and branch come from the CI's environment variables first (a CI checkout is
often a detached HEAD, whose branch git cannot name), then from ``git`` itself; anything
not found is ``null``, never an error: a run outside git, or without git installed, still
stores its entry.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import socket
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["CI_VARIABLES", "entry_info", "git_info", "plain_settings"]

#: (commit variable, branch variable) of the CI services, first found wins
CI_VARIABLES: tuple[tuple[str, str], ...] = (
    ("GITHUB_SHA", "GITHUB_REF_NAME"),  # GitHub Actions
    ("CI_COMMIT_SHA", "CI_COMMIT_REF_NAME"),  # GitLab CI
    ("CIRCLE_SHA1", "CIRCLE_BRANCH"),  # CircleCI
    ("BUILDKITE_COMMIT", "BUILDKITE_BRANCH"),  # Buildkite
    ("BITBUCKET_COMMIT", "BITBUCKET_BRANCH"),  # Bitbucket Pipelines
    ("GIT_COMMIT", "GIT_BRANCH"),  # Jenkins
)


def _git(args: list[str], cwd: Path) -> str | None:
    """One line of ``git ARGS`` in ``cwd``, or None (no git, not a repository, slow)."""
    exe = shutil.which("git")
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and out else None


def git_info(cwd: Path, env: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """``{"commit": ..., "branch": ...}``: the CI's variables, else git's; None if unknown."""
    env = os.environ if env is None else env
    commit = branch = None
    for sha_var, ref_var in CI_VARIABLES:
        if env.get(sha_var):
            commit, branch = env[sha_var], env.get(ref_var) or None
            break
    if commit is None:
        commit = _git(["rev-parse", "HEAD"], cwd)
    if branch is None and commit is not None:
        named = _git(["rev-parse", "--abbrev-ref", "HEAD"], cwd)
        branch = None if named in (None, "HEAD") else named  # detached: no branch
    return {"commit": commit, "branch": branch}


def _plain(value: Any) -> Any:
    """A setting's value as JSON: tuples as lists, other objects as their text."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def plain_settings(settings: Any) -> dict[str, Any]:
    """The run's settings (an ``AuditSettings``) that differ from the defaults, as JSON."""
    if settings is None or not dataclasses.is_dataclass(settings):
        return {}
    return {
        f.name: _plain(getattr(settings, f.name))
        for f in dataclasses.fields(settings)
        if getattr(settings, f.name) != f.default
    }


def entry_info(
    now: datetime,
    *,
    cwd: Path | None = None,
    settings: Any = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``"entry"`` object of a history entry."""
    return {
        **git_info(cwd or Path.cwd(), env),
        "date": now.astimezone(UTC).isoformat(timespec="seconds"),
        "machine": {
            "hostname": socket.gethostname() or None,
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(),
        },
        "settings": plain_settings(settings),
    }
