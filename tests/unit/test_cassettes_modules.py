"""The cassettes package after its split (issue 19): each job in its own module, what
callers imported from ``cassettes.store`` still there, and no module naming CLI flags
(the record option's name comes from ``vocab.RECORD_OPTION``)."""

from __future__ import annotations

import importlib
import inspect

import pytest

# prune.py is the --fairness-prune feature, named after its flag in its docstring.
MODULES = ["store", "vcrfile", "miss"]


@pytest.mark.parametrize("name", MODULES)
def test_no_cassette_module_names_cli_flags(name: str) -> None:
    module = importlib.import_module(f"pytest_recfair.cassettes.{name}")
    assert "--fairness" not in inspect.getsource(module)


def test_callers_import_from_the_store_only_what_it_defines() -> None:
    # issue 31: the store keeps no alias names; a recorded request, a key or a miss is
    # imported from the module that defines it (vcrfile, miss)
    import ast
    from pathlib import Path

    import pytest_recfair

    root = Path(pytest_recfair.__file__).parent
    for path in [*root.rglob("*.py"), *Path(__file__).parents[1].rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "pytest_recfair.cassettes.store":
                assert {a.name for a in node.names} == {"CassetteStore"}, path


def test_the_runner_exports_its_own_names_and_the_package_the_users() -> None:
    from pytest_recfair import providers
    from pytest_recfair.providers import runner, runstate
    from pytest_recfair.providers import runstate as progress

    for name in runner.__all__:
        assert hasattr(runner, name), name
        assert getattr(runner, name).__module__ == runner.__name__  # no re-export
    for name in providers.__all__:  # the users' documented entry point
        assert hasattr(providers, name), name
    assert providers.RunOptions is runstate.RunOptions
    assert issubclass(progress.Progress, progress.LiveLine)  # one meter, drawn on a stream


def test_the_transport_extension_keys_are_the_strings_requests_carry() -> None:
    from pytest_recfair.providers import transport

    assert (transport.EXT_ENTITY, transport.EXT_REPEAT, transport.EXT_CASE) == (
        "recfair_entity_id",
        "recfair_repeat",
        "recfair_case",
    )
    assert transport.EXT_RECORD == "recfair_record"
