"""Package layout: every module imports on its own, no import cycle, short functions, short
modules, a small top level, and no code outside a kind of audit's own module that branches
on that kind (issue 19: a new kind is one module plus one registry line)."""

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
MAX_MODULE_LINES = 600
MAX_TOP_LEVEL_MODULES = 12


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
    """Modules of the package that ``name`` imports anywhere: at module level, inside
    functions (a lazy import is a dependency all the same) and under ``if TYPE_CHECKING``;
    with the packages a module of theirs runs (``from a.b.c import x`` runs ``a.b``),
    but the importer's own ancestors."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(name, path, node)
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.add(sub if sub in MODULES else base)
    for module in list(found):
        parts = module.split(".")
        found.update(".".join(parts[:i]) for i in range(2, len(parts)))
    return {m for m in found if m in MODULES and m != name and not name.startswith(m + ".")}


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
    assert "pytest_recfair.engine.registry" in graph["pytest_recfair.engine.stream"]
    # lazy (function-level) imports count: the plugin imports the engine on use
    assert "pytest_recfair.engine.stream" in graph["pytest_recfair.plugin.fixtures"]
    # ... and so do imports for type checking only, and the packages they run
    assert "pytest_recfair.engine.verdict" in graph["pytest_recfair.plugin.session"]
    assert "pytest_recfair.engine" in graph["pytest_recfair.plugin.session"]
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


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_longer_than_600_lines(name: str) -> None:
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{name}: {lines} lines (at most {MAX_MODULE_LINES})"


def test_at_most_12_top_level_modules() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def _kind_homes() -> list[tuple[str, str, set[str]]]:
    """(kind name, its home: module or own package, names that stand for it there)."""
    from pytest_recfair.engine.registry import kinds

    out = []
    for kind in kinds():
        module = type(kind).__module__
        parent = module.rpartition(".")[0]
        home = module if parent == "pytest_recfair.engine" else parent
        mod = sys.modules[module]
        names = {n for n, v in vars(mod).items() if v is kind} | {type(kind).__name__}
        out.append((kind.name, home, names))
    return out


def _kind_branches(tree: ast.AST, kind: str, names: set[str]) -> list[str]:
    """Places that single out one kind: its object or class by name, or its name compared
    with something or used to pick a kind's entry (``extras["items"]``, ``.get("items")``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in names:
            found.append(f"line {node.lineno}: {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in names:
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Compare) and any(
            isinstance(op, ast.Eq | ast.NotEq | ast.Is | ast.IsNot) for op in node.ops
        ):
            for c in [node.left, *node.comparators]:
                if isinstance(c, ast.Constant) and c.value == kind:
                    found.append(f"line {node.lineno}: compared with {kind!r}")
        elif isinstance(node, ast.Subscript | ast.Call):
            target = node.value if isinstance(node, ast.Subscript) else node.func
            text = ast.unparse(target)
            args = [node.slice] if isinstance(node, ast.Subscript) else node.args[:1]
            if ("extras" in text or "kind" in text) and any(
                isinstance(a, ast.Constant) and a.value == kind for a in args
            ):
                found.append(f"line {node.lineno}: {text}[{kind!r}]")
    return found


def test_no_branch_on_an_audit_kind_outside_its_own_module() -> None:
    homes = _kind_homes()
    assert {k for k, _, _ in homes} >= {"overlap"}
    assert len(homes) >= 3
    offences = []
    for name, path in MODULES.items():
        if name == "pytest_recfair.engine.registry":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for kind, home, names in homes:
            if name == home or name.startswith(home + "."):
                continue
            offences += [f"{name} ({kind}) {w}" for w in _kind_branches(tree, kind, names)]
    assert not offences, "code branching on a kind outside its module:\n" + "\n".join(offences)


def test_the_kind_branch_check_sees_a_branch() -> None:
    tree = ast.parse("if kind is OVERLAP: pass\nx = r.extras.get('items')\ny = k.name == 'items'\n")
    assert len(_kind_branches(tree, "items", {"OVERLAP"})) == 3


def test_the_version_is_pyprojects() -> None:
    import tomllib

    from pytest_recfair.vocab import PLUGIN_VERSION

    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["version"] == PLUGIN_VERSION == pytest_recfair.__version__
