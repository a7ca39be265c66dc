"""Architecture: the engine and the gate decide, the report words (issue 19, point 3).

No module under ``pytest_recfair/engine/`` or ``pytest_recfair/gate/`` imports the
report's renderers or its words (``report.failures``, the terminal summary, the formats,
``report.registry``), at module level or inside a function: failures leave them as structured
``GateFailure`` records and ``report.failures`` turns them into sentences. A kind of audit
owns its report sections (issue 19, point 1), so it may use the report's formatting
toolkit and implement its section protocol — :data:`TOOLKIT`, nothing else.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import pytest_recfair

PACKAGE = Path(pytest_recfair.__file__).parent
DECIDING = ("engine", "gate")

#: What a kind's report sections may use: numbers and p-values as text, HTML building
#: blocks, and the protocol the sections implement. None of them words a failure.
TOOLKIT = frozenset({"pytest_recfair.report.fmt", "pytest_recfair.report.sections"})


def _imported(tree: ast.AST, module: str) -> set[str]:
    """Every module an ``import``/``from ... import`` anywhere in ``tree`` names (relative
    imports resolved against ``module``), including imports inside functions."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[: -node.level]
                base = ".".join([*parts, base] if base else parts)
            out.add(base)
            # "from pytest_recfair import report" names the package in the alias
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


def _modules() -> list[tuple[str, set[str]]]:
    found = []
    for layer in DECIDING:
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            rel = path.relative_to(PACKAGE).as_posix()
            dotted = "pytest_recfair." + rel.removesuffix(".py").replace("/", ".")
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            found.append((rel, _imported(tree, dotted)))
    return found


def _imports_report(names: set[str]) -> bool:
    return any(
        (n == "pytest_recfair.report" or n.startswith("pytest_recfair.report."))
        and not any(n == m or n.startswith(m + ".") for m in TOOLKIT)
        for n in names
    )


def test_the_check_sees_every_kind_of_import() -> None:
    src = (
        "import pytest_recfair.report.fmt\n"
        "def f():\n"
        "    from pytest_recfair import report\n"
        "    from ..report import failures\n"
    )
    names = _imported(ast.parse(src), "pytest_recfair.engine.x")
    assert "pytest_recfair.report.fmt" in names
    assert _imports_report(names)
    assert not _imports_report({"pytest_recfair.report.fmt", "pytest_recfair.report.fmt.fmt"})
    assert "pytest_recfair.report" in names
    assert "pytest_recfair.report.failures" in names
    assert not _imports_report(_imported(ast.parse("import pytest_recfair.reporting"), "m"))


def test_the_layers_are_there() -> None:
    names = {rel for rel, _ in _modules()}
    assert "engine/verdict.py" in names
    assert "gate/thresholds.py" in names


@pytest.mark.parametrize("layer", DECIDING)
def test_engine_and_gate_never_import_the_report(layer: str) -> None:
    offenders = [
        rel for rel, names in _modules() if rel.startswith(f"{layer}/") and _imports_report(names)
    ]
    assert offenders == [], (
        f"{', '.join(offenders)} import pytest_recfair.report: return structured "
        f"GateFailure records and let report.failures word them"
    )


def test_gate_limits_stay_light() -> None:
    """settings (imported at pytest start-up) reads the threshold names and the tolerance
    check from gate.limits: it must not pull numpy or the rest of the gate in."""
    path = PACKAGE / "gate" / "limits.py"
    names = _imported(ast.parse(path.read_text(encoding="utf-8")), "pytest_recfair.gate.limits")
    ours = {n for n in names if n.startswith("pytest_recfair")}
    assert ours <= {"pytest_recfair.errors", "pytest_recfair.errors.ConfigError"}
    assert not any(n.split(".")[0] in {"numpy", "scipy", "yaml"} for n in names)


def test_the_toolkit_words_no_failure() -> None:
    """The modules a kind may use import no renderer and no failure words themselves."""
    for dotted in TOOLKIT:
        rel = dotted.removeprefix("pytest_recfair.").replace(".", "/") + ".py"
        names = _imported(ast.parse((PACKAGE / rel).read_text(encoding="utf-8")), dotted)
        assert not _imports_report(names), (dotted, sorted(names))


def test_metrics_is_pure_numpy() -> None:
    """metrics/ (issue 19, point 5): the standard library, numpy, and of the project only
    errors, vocab and metrics itself — no yaml, rapidfuzz, catalogue or httpx."""
    allowed_ours = ("pytest_recfair.errors", "pytest_recfair.vocab", "pytest_recfair.metrics")
    offenders = {}
    for path in sorted((PACKAGE / "metrics").rglob("*.py")):
        dotted = "pytest_recfair." + path.relative_to(PACKAGE).as_posix()[:-3].replace("/", ".")
        names = _imported(ast.parse(path.read_text(encoding="utf-8")), dotted)
        bad = sorted(
            n
            for n in names
            if n
            and not n.startswith(allowed_ours)
            and n.split(".")[0] not in {"numpy", "__future__"}
            and n.split(".")[0] not in sys.stdlib_module_names
        )
        if bad:
            offenders[path.name] = bad
    assert offenders == {}


def _package_imports(folder: str) -> dict[str, set[str]]:
    """Each module under ``folder`` -> the package's modules it names anywhere."""
    out = {}
    for path in sorted((PACKAGE / folder).rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        dotted = "pytest_recfair." + rel.removesuffix(".py").replace("/", ".")
        names = _imported(ast.parse(path.read_text(encoding="utf-8")), dotted)
        out[rel] = {n for n in names if n.startswith("pytest_recfair.")}
    return out


#: Who may not import whom (issue 31: one direction, counting imports inside functions
#: and for type checking): the readers of results never import the engine; settings are
#: pure data below the engine and the providers; a kind merges its shards as data, so it
#: never imports the sharding that orchestrates it; the providers never reach up into
#: the engine.
FORBIDDEN = [
    ("report", ("pytest_recfair.engine", "pytest_recfair.plugin")),
    ("compare", ("pytest_recfair.engine", "pytest_recfair.plugin")),
    (
        "settings",
        (
            "pytest_recfair.engine",
            "pytest_recfair.providers",
            "pytest_recfair.report",
            "pytest_recfair.compare",
            "pytest_recfair.plugin",
            "pytest_recfair.cassettes",
        ),
    ),
    ("providers", ("pytest_recfair.engine", "pytest_recfair.plugin", "pytest_recfair.report")),
    ("engine/overlap", ("pytest_recfair.engine.sharding",)),
]


@pytest.mark.parametrize(("folder", "banned"), FORBIDDEN, ids=[f for f, _ in FORBIDDEN])
def test_imports_flow_one_way(folder: str, banned: tuple[str, ...]) -> None:
    offenders = {
        rel: sorted(n for n in names if n.startswith(banned))
        for rel, names in _package_imports(folder).items()
    }
    assert {rel: bad for rel, bad in offenders.items() if bad} == {}


@pytest.mark.parametrize(
    "name", ["items.py", "positions.py", "exposure.py", "roleplay.py", "base.py"]
)
def test_kinds_beside_the_engine_never_import_sharding(name: str) -> None:
    path = PACKAGE / "engine" / name
    names = _imported(ast.parse(path.read_text(encoding="utf-8")), f"pytest_recfair.engine.{name}")
    assert not any(n.startswith("pytest_recfair.engine.sharding") for n in names)


def test_the_one_way_check_sees_lazy_and_type_only_imports() -> None:
    src = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from pytest_recfair.engine.base import AuditKind\n"
        "def f():\n"
        "    from pytest_recfair.engine import registry\n"
    )
    names = _imported(ast.parse(src), "pytest_recfair.report.x")
    assert "pytest_recfair.engine.base" in names
    assert "pytest_recfair.engine.registry" in names
