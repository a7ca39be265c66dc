"""The `run:` steps of the docs' GitHub Actions workflows, run as a runner runs them.

The project is the quickstart's (tests/support/docs.py), the model the simulator on
loopback. Each step's script goes to `bash -eo pipefail` (GitHub's default shell) in the
project folder, with `GITHUB_STEP_SUMMARY` pointing at a file; steps are skipped after a
failure unless they say `if: always()`, and `continue-on-error` is honoured. `uses:`
steps are left out (checkout, setup-python, artifacts: the files are already here), and
so are the install steps (this environment has the package installed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_recfair.sim.server import SimServer
from tests.support.docs import (
    DOCS,
    QUICKSTART,
    SIM_KEY,
    baseline_files,
    blocks,
    commands,
    run_pytest,
    sampling_sim,
    section,
    write_quickstart_project,
)

pytest_plugins = ["pytester"]


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with sampling_sim() as srv:
        yield srv


@pytest.fixture(scope="module")
def recorded(sim: SimServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quickstart project after its step 4 (cassettes and baselines committed), made
    once: each test copies it."""
    root = tmp_path_factory.mktemp("quickstart")
    key_env = write_quickstart_project(root, sim)
    env = {**_env(root), key_env: SIM_KEY}
    for args in commands(section(QUICKSTART, "4. Record once", "bash")):
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
        subprocess.run(cmd, cwd=root, env=env, capture_output=True, timeout=600, check=False)
    assert sorted(p.name for p in (root / "baselines").iterdir()) == [
        "test_fair_across_groups.json",
        "test_religion.json",
    ]
    return root


def _copy(recorded: Path, pytester: pytest.Pytester) -> Path:
    shutil.copytree(recorded, pytester.path, dirs_exist_ok=True)
    return pytester.path


def _workflow(doc: str, name: str) -> dict[str, Any]:
    (text,) = [b.text for b in blocks(DOCS / doc, "yaml") if f"/{name}\n" in b.text[:80]]
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def _run_job(
    root: Path, steps: list[dict[str, Any]], env: dict[str, str], matrix: dict[str, str]
) -> dict[str, str]:
    """Each step's outcome by name: success, failure or skipped."""
    outcomes: dict[str, str] = {}
    failed = False
    for number, step in enumerate(steps):
        name = step.get("name", f"step {number}")
        if "run" not in step or name == "Install":
            continue
        if failed and step.get("if") != "always()":
            outcomes[name] = "skipped"
            continue
        script = step["run"]
        for key, value in matrix.items():
            script = script.replace(f"${{{{ matrix.{key} }}}}", value)
        assert "${{" not in script, f"{name}: an expression this runner does not know"
        step_env = {**env, **{k: _secret(v, env) for k, v in step.get("env", {}).items()}}
        done = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", script],
            cwd=root,
            env=step_env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        outcomes[name] = "success" if done.returncode == 0 else "failure"
        LOGS[name] = done.stdout + done.stderr
        if done.returncode and not step.get("continue-on-error"):
            failed = True
    return outcomes


LOGS: dict[str, str] = {}  # each step's output, the last run's: shown when a test fails


def _secret(value: str, env: dict[str, str]) -> str:
    assert value == "${{ secrets.OPENAI_API_KEY }}", value
    return env["SECRET_OPENAI_API_KEY"]


def _env(root: Path, **extra: str) -> dict[str, str]:
    """A runner's environment: no key, this Python's scripts first on PATH."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["GITHUB_STEP_SUMMARY"] = str(root / "summary.md")
    return {**env, **extra}


def test_the_pull_request_workflow_gates_and_reports_pass_or_fail(
    pytester: pytest.Pytester, sim: SimServer, recorded: Path
) -> None:
    root = _copy(recorded, pytester)
    asked = sim.stats.requests
    steps = _workflow("github-actions.md", "fairness.yml")["jobs"]["fairness"]["steps"]
    outcomes = _run_job(root, steps, _env(root), {})
    assert outcomes == {"Fairness audit": "success", "Job summary": "success"}
    assert sim.stats.requests == asked  # replay only, and no key in the environment
    summary = (root / "summary.md").read_text("utf-8")
    assert summary == (root / "reports" / "fairness.md").read_text("utf-8")
    assert "test_religion" in summary
    assert (root / "reports" / "fairness.html").stat().st_size > 0
    assert (root / "reports" / "junit.xml").exists()

    # a gate that fails: the summary and the report are still written, the failure first
    audit = root / "tests" / "test_fairness.py"
    text = audit.read_text("utf-8")
    audit.write_text(text.replace("tolerance=0.01)", "tolerance=0.01, max_snsr=0.001)"))
    (root / "summary.md").unlink()
    shutil.rmtree(root / "reports")
    outcomes = _run_job(root, steps, _env(root), {})
    assert outcomes == {"Fairness audit": "failure", "Job summary": "success"}
    summary = (root / "summary.md").read_text("utf-8")
    assert summary.index("test_religion") < summary.index("test_fair_across_groups")
    assert (root / "reports" / "fairness.html").exists()


def test_the_scheduled_workflow_records_and_takes_baselines_from_a_replay(
    pytester: pytest.Pytester, sim: SimServer, recorded: Path
) -> None:
    root = _copy(recorded, pytester)
    steps = _workflow("github-actions.md", "fairness-rerecord.yml")["jobs"]["rerecord"]["steps"]
    before = sim.stats.requests
    outcomes = _run_job(root, steps, _env(root, SECRET_OPENAI_API_KEY=SIM_KEY), {})
    assert outcomes == {
        "Re-record against the service": "success",
        "Replay and take the baselines": "success",
        "Job summary": "success",
        "Every prompt has a recorded reply": "success",
    }, LOGS
    assert sim.stats.requests > before  # everything asked again
    rerecorded = baseline_files(root / "baselines")
    # what the pull request's own CI computes from the new cassettes
    again = ["--fairness", "--fairness-record=none", "--fairness-update"]
    run_pytest(pytester, [*again, "-o", "recfair_baseline_dir=ci"]).assert_outcomes(passed=2)
    assert baseline_files(root / "ci") == rerecorded
    assert "test_religion" in (root / "summary.md").read_text("utf-8")


def test_a_failed_recording_opens_no_pull_request(
    pytester: pytest.Pytester, sim: SimServer, recorded: Path
) -> None:
    root = _copy(recorded, pytester)
    steps = _workflow("github-actions.md", "fairness-rerecord.yml")["jobs"]["rerecord"]["steps"]
    env = _env(root, SECRET_OPENAI_API_KEY="sk-revoked-0000000000")  # the service says 401
    outcomes = _run_job(root, steps, env, {})
    assert outcomes == {
        "Re-record against the service": "failure",
        "Replay and take the baselines": "failure",
        "Job summary": "success",
        "Every prompt has a recorded reply": "failure",
    }  # the pull request step is a `uses:` step after a failed one: skipped


def test_the_sharded_workflow_shards_merges_and_gates(
    pytester: pytest.Pytester, sim: SimServer, recorded: Path
) -> None:
    root = _copy(recorded, pytester)
    jobs = _workflow("scale.md", "fairness-sharded.yml")["jobs"]
    shards = jobs["shard"]["strategy"]["matrix"]["shard"]
    for shard in shards:
        outcomes = _run_job(root, jobs["shard"]["steps"], _env(root), {"shard": str(shard)})
        assert outcomes == {"Audit one shard (replay only)": "success"}
        # upload-artifact then download-artifact with a pattern: one folder per artifact
        shutil.copytree(root / "fairness-shards", root / "shards" / f"fairness-shard-{shard}")
        shutil.rmtree(root / "fairness-shards")
    outcomes = _run_job(root, jobs["merge"]["steps"], _env(root), {})
    assert outcomes == {"Merge, gate and report": "success", "Job summary": "success"}
    assert "test_religion" in (root / "summary.md").read_text("utf-8")
