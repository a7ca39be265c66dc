"""The plugin package's shape (issue 19): thin hooks and fixtures, two stash keys, the
audit steps without pytest, and no module over 600 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_recfair.plugin
import pytest_recfair.settings

PLUGIN = Path(pytest_recfair.plugin.__file__).parent
SETTINGS = Path(pytest_recfair.settings.__file__).parent
MAX_MODULE_LINES = 600
MAX_HANDOFF_LINES = 5  # a hook's or fixture's body in plugin/__init__.py, docstring aside


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", sorted([*PLUGIN.glob("*.py"), *SETTINGS.glob("*.py")]))
def test_no_module_over_600_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.name}: {lines} lines"


def test_hooks_and_fixtures_only_hand_off() -> None:
    long = []
    for node in _tree(PLUGIN / "__init__.py").body:
        if not isinstance(node, ast.FunctionDef):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        lines = (body[-1].end_lineno or 0) - body[0].lineno + 1 if body else 0
        if lines > MAX_HANDOFF_LINES:
            long.append(f"{node.name} ({lines} lines)")
    assert not long, "hand the work to a module of the plugin: " + ", ".join(long)


def test_two_stash_keys_in_one_place() -> None:
    found = {
        path.name: path.read_text(encoding="utf-8").count("StashKey[")
        for path in PLUGIN.glob("*.py")
    }
    assert {name: n for name, n in found.items() if n} == {"session.py": 2}


#: The steps of one audit that are unit-tested without pytest (tests/unit/test_plugin_flow.py).
STEPS = ("baseline_of", "conclude", "judge", "shard_note", "body_error", "gate_property")


def test_the_audit_steps_use_no_pytest() -> None:
    steps = [
        node
        for node in _tree(PLUGIN / "fixtures.py").body
        if isinstance(node, ast.FunctionDef) and node.name in STEPS
    ]
    assert sorted(n.name for n in steps) == sorted(STEPS)
    used = {n.id for step in steps for n in ast.walk(step) if isinstance(n, ast.Name)}
    assert not used & {"pytest", "_pytest", "httpx"}
