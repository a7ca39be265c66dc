"""The GitHub Actions workflows in the docs are valid and do what the docs say.

Every ```yaml block of docs/github-actions.md and docs/scale.md is a whole workflow,
named by its first line (``# .github/workflows/NAME.yml``). actionlint (with shellcheck
for the ``run:`` scripts; both ship as binaries in PyPI wheels of the ``test`` extra)
must report nothing, every ``--fairness-*`` option they use must be one the plugin
registers, and the steps must be in the order and under the conditions the docs claim.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_recfair.vocab import RECORD_MODES
from tests.support.docs import DOCS, Block, blocks
from tests.support.plugin import plugin_args

pytest_plugins = ["pytester"]

WORKFLOW_DOCS = ("github-actions.md", "scale.md")
_NAME = re.compile(r"\A# (\.github/workflows/[\w.-]+\.ya?ml)\n")
_OPTION = re.compile(r"--fairness[\w-]*(?:=\S+)?")


def _blocks() -> list[Block]:
    return [b for doc in WORKFLOW_DOCS for b in blocks(DOCS / doc, "yaml")]


def _workflows() -> dict[str, str]:
    found = {}
    for block in _blocks():
        name = _NAME.match(block.text)
        assert name, f"{block.path.name}: a yaml block that is not a named workflow"
        found[name.group(1)] = block.text
    return found


def _tool(name: str) -> str:
    """The binary installed next to this Python (the wheels' scripts), else on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[test]'"
    return found


def _actionlint(root: Path, files: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, "utf-8")
    cmd = [_tool("actionlint"), "-no-color", f"-shellcheck={_tool('shellcheck')}", *files]
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=120)


def test_the_docs_hold_the_promised_workflows() -> None:
    assert set(_workflows()) == {
        ".github/workflows/fairness.yml",
        ".github/workflows/fairness-rerecord.yml",
        ".github/workflows/fairness-sharded.yml",
        ".github/workflows/fairness-history.yml",
    }


def test_actionlint_reports_nothing(tmp_path: Path) -> None:
    out = _actionlint(tmp_path, _workflows())
    report = out.stdout + out.stderr
    assert out.returncode == 0, report
    assert report == ""


def test_actionlint_and_shellcheck_do_find_mistakes(tmp_path: Path) -> None:
    """The check above could pass by checking nothing: here each tool finds its mistake."""
    text = _workflows()[".github/workflows/fairness.yml"]
    broken = text.replace("if: always()", "if: always(", 1).replace(
        '>> "$GITHUB_STEP_SUMMARY"', ">> $GITHUB_STEP_SUMMARY", 1
    )
    out = _actionlint(tmp_path, {".github/workflows/broken.yml": broken})
    assert out.returncode == 1
    assert "expression" in out.stdout  # actionlint: the unclosed call
    assert "SC2086" in out.stdout  # shellcheck: the unquoted variable


def _plugin_options(pytester: pytest.Pytester) -> set[str]:
    result = pytester.runpytest(*plugin_args(), "--help")
    return set(re.findall(r"(--fairness[\w-]*)", result.stdout.str()))


def test_every_fairness_option_in_the_workflows_exists(pytester: pytest.Pytester) -> None:
    known = _plugin_options(pytester)
    assert {"--fairness", "--fairness-record", "--fairness-report"} <= known
    used = {m for text in _workflows().values() for m in _OPTION.findall(text)}
    assert {"--fairness-shard=${{", "--fairness-merge=shards/"} <= used
    for option in used:
        name, _, value = option.partition("=")
        assert name in known, f"{option}: not an option of the plugin"
        if name == "--fairness-record":
            assert value in RECORD_MODES, option


def _load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(_workflows()[f".github/workflows/{name}"])
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


def _steps(doc: dict[str, Any]) -> list[dict[str, Any]]:
    (job,) = doc["jobs"].values()
    steps: list[dict[str, Any]] = job["steps"]
    return steps


def _argv(step: dict[str, Any]) -> list[str]:
    return shlex.split(step.get("run", "").replace("\n", " "))


def _index(steps: list[dict[str, Any]], predicate: Any) -> int:
    (found,) = [i for i, step in enumerate(steps) if predicate(step)]
    return found


def _summary_and_artifact(steps: list[dict[str, Any]], after: int) -> None:
    """The Markdown report goes to the job summary and the reports folder is uploaded,
    both after the audit and both also when it failed."""
    summary = _index(steps, lambda s: "GITHUB_STEP_SUMMARY" in s.get("run", ""))
    upload = _index(steps, lambda s: s.get("uses", "").startswith("actions/upload-artifact"))
    assert "reports/fairness.md" in steps[summary]["run"]
    assert steps[upload]["with"]["path"] == "reports/"
    for i in (summary, upload):
        assert i > after
        assert steps[i]["if"] == "always()"


def test_the_pull_request_workflow_replays_with_a_summary_and_the_html_artifact() -> None:
    doc = _load("fairness.yml")
    assert "pull_request" in doc["on"]
    assert doc["permissions"] == {"contents": "read"}
    assert "secrets." not in _workflows()[".github/workflows/fairness.yml"]
    steps = _steps(doc)
    audit = _index(steps, lambda s: "--fairness" in _argv(s))
    argv = _argv(steps[audit])
    assert argv[:2] == ["pytest", "--fairness"]
    assert "--fairness-record=none" in argv
    assert {"--fairness-report=reports/fairness.html", "--fairness-report=reports/fairness.md"} <= (
        set(argv)
    )
    _summary_and_artifact(steps, audit)


def test_the_scheduled_workflow_records_then_takes_baselines_from_a_replay() -> None:
    doc = _load("fairness-rerecord.yml")
    assert doc["on"]["schedule"][0]["cron"]
    assert doc["permissions"] == {"contents": "write", "pull-requests": "write"}
    steps = _steps(doc)
    record = _index(steps, lambda s: "--fairness-record=once" in _argv(s))
    replay = _index(steps, lambda s: "--fairness-update" in _argv(s))
    check = _index(steps, lambda s: "grep" in s.get("run", ""))
    pull = _index(steps, lambda s: s.get("uses", "").startswith("peter-evans/create-pull-r"))
    assert record < replay < check < pull
    assert "${{ secrets." in steps[record]["env"]["OPENAI_API_KEY"]
    assert "--fairness-update" not in _argv(steps[record])  # baselines never from recording
    assert steps[record]["run"].startswith("rm -rf fixtures/cassettes\n")  # all asked anew
    assert "--fairness-record=none" in _argv(steps[replay])
    assert "env" not in steps[replay]  # the replay has no key
    assert steps[record]["continue-on-error"] is True  # judged by the replay, not here
    assert set(steps[pull]["with"]["add-paths"].split()) == {"fixtures/cassettes", "baselines"}
    _summary_and_artifact(steps, replay)


def test_the_sharded_workflow_merges_every_shard() -> None:
    doc = _load("fairness-sharded.yml")
    assert doc["permissions"] == {"contents": "read"}
    shard, merge = doc["jobs"]["shard"], doc["jobs"]["merge"]
    assert merge["needs"] == "shard"
    n = len(shard["strategy"]["matrix"]["shard"])
    run = next(s["run"] for s in shard["steps"] if "--fairness-shard" in s.get("run", ""))
    assert f"--fairness-shard=${{{{ matrix.shard }}}}/{n}" in run
    merged = next(s["run"] for s in merge["steps"] if "--fairness-merge" in s.get("run", ""))
    assert "--fairness-report=reports/fairness.md" in merged
