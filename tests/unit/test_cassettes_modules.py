"""The cassettes package after its split (issue 19): each job in its own module, what
callers imported from ``cassettes.store`` still there, and no module naming CLI flags
(the record option's name comes from ``vocab.RECORD_OPTION``)."""

from __future__ import annotations

import importlib
import inspect

import pytest

# prune.py is the --fairness-prune feature, named after its flag in its docstring.
MODULES = ["store", "vcrfile", "index", "miss"]


@pytest.mark.parametrize("name", MODULES)
def test_no_cassette_module_names_cli_flags(name: str) -> None:
    module = importlib.import_module(f"pytest_recfair.cassettes.{name}")
    assert "--fairness" not in inspect.getsource(module)


def test_the_store_still_exports_what_callers_import() -> None:
    from pytest_recfair.cassettes import index, miss, store, vcrfile
    from pytest_recfair.cassettes import miss as policy

    for name in store.__all__:
        assert hasattr(store, name), name
    assert store.MODE_POLICIES is policy.MODE_POLICIES
    assert store.CassetteMiss is miss.CassetteMiss
    assert store.RecordedRequest is vcrfile.RecordedRequest
    assert store.canonical_body is index.canonical_body
    assert store.sanitize_name is vcrfile.sanitize_name


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
