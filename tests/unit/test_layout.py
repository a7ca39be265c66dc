"""Package layout: every module imports on its own, no import cycle, short functions."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_recfair

PACKAGE = Path(pytest_recfair.__file__).parent
MAX_FUNCTION_LINES = 80


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (packages by their __init__.py)."""
    out = {"pytest_recfair": PACKAGE / "__init__.py"}
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="pytest_recfair."):
        rel = Path(*info.name.split(".")[1:])
        path = PACKAGE / rel / "__init__.py" if info.ispkg else PACKAGE / rel.with_suffix(".py")
        out[info.name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Modules of the package that importing ``name`` imports: module and class level,
    not inside functions (lazy imports run later) nor under ``if TYPE_CHECKING``."""
    found: set[str] = set()
    for node in _import_time(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(name, path, node)
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.add(sub if sub in MODULES else base)
    return {m for m in found if m in MODULES and m != name}


def _import_time(node: ast.AST) -> list[ast.AST]:
    """The nodes that run when the module is imported."""
    out: list[ast.AST] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            out.extend(n for c in child.orelse for n in [c, *_import_time(c)])
            continue
        out.append(child)
        out.extend(_import_time(child))
    return out


def _absolute(name: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = name.split(".")
    package = parts if path.name == "__init__.py" else parts[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _graph() -> dict[str, set[str]]:
    return {name: _imports(name, path) for name, path in MODULES.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as a path of module names, or None (iterative DFS)."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    for root in sorted(graph):
        if state.get(root):
            continue
        stack = [(root, iter(sorted(graph[root])))]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state.get(child) == 1:
                names = [n for n, _ in stack]
                return [*names[names.index(child) :], child]
            elif not state.get(child):
                state[child] = 1
                stack.append((child, iter(sorted(graph[child]))))
    return None


def test_the_graph_sees_the_package_imports() -> None:
    graph = _graph()
    assert "pytest_recfair.engine.pipeline" in graph["pytest_recfair.engine"]
    assert "pytest_recfair.engine.registry" in graph["pytest_recfair.engine.pipeline"]
    # lazy (function-level) imports do not count: the plugin imports audit on use
    assert "pytest_recfair.engine" not in graph["pytest_recfair.plugin"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("name", sorted(n for n in MODULES if not n.endswith("__main__")))
def test_module_imports_alone_in_a_fresh_interpreter(name: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", f"import {name}"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr.strip().splitlines()[-1:]


# Modules with a function over the limit when this test was written, being split by
# their owners (issue 8): xfail until then, and an XPASS shows when one is done.
KNOWN_LONG: dict[str, str] = {}  # module -> why it may still hold a long function


def _marked(name: str) -> object:
    if name in KNOWN_LONG:
        return pytest.param(name, marks=pytest.mark.xfail(reason=KNOWN_LONG[name]))
    return name


@pytest.mark.parametrize("name", [_marked(n) for n in sorted(MODULES)])
def test_no_function_longer_than_80_lines(name: str) -> None:
    long = []
    for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                long.append(f"{node.name} ({length} lines)")
    assert not long, f"{name}: functions longer than 80 lines: " + ", ".join(long)
