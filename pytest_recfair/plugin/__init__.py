"""The ``pytest11`` entry point: hooks and fixtures, each handing off to the plugin's
modules. Nothing here imports the engine: pytest start-up stays light."""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from pytest_recfair.plugin import collection, fixtures, options, session
from pytest_recfair.plugin.session import audit_state, run_state
from pytest_recfair.settings import AuditSettings


def marker() -> pytest.MarkDecorator:
    """``pytest.mark.fairness`` (``from pytest_recfair import fairness``), looked up on
    use: --strict-markers checks a name against the configuration current at lookup."""
    return pytest.mark.fairness


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    with _bulk(config):  # --fairness-compare and the checks import numpy and more
        session.configure(config)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    return session.report_header(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    collection.modify_items(config, items)


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reports what it collected
def pytest_collection_finish(session: pytest.Session) -> None:
    # after -k/-m: the inputs of every selected audit, before any test runs (issue 34)
    with _bulk(session.config):  # the kinds' modules load here
        collection.check_run(session)


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> Generator[None, Any, Any]:
    collection.depend_on_recommender(collector, name, obj)
    return (yield)


@pytest.fixture(scope="session")
def recfair_recommender(pytestconfig: pytest.Config) -> Any:
    """The recommender under audit; override in conftest.py (default: provider from ini)."""
    return fixtures.default_provider(pytestconfig)


@pytest.fixture(scope="session")
def recfair_http_client(pytestconfig: pytest.Config) -> Iterator[Any]:
    """An ``httpx2.Client`` for your pipeline's SDK (``OpenAI(http_client=...)``,
    ``Anthropic(http_client=...)``): the model calls it sends while answering an audit
    prompt are recorded into, and replayed from, that prompt's cassette."""
    yield from fixtures.http_clients(pytestconfig, "httpx2", True)


@pytest.fixture(scope="session")
def recfair_async_http_client(pytestconfig: pytest.Config) -> Iterator[Any]:
    """The ``httpx2.AsyncClient`` twin of recfair_http_client (``AsyncOpenAI``,
    ``ChatOpenAI(http_async_client=...)``)."""
    yield from fixtures.http_clients(pytestconfig, "httpx2", False)


@pytest.fixture(scope="session")
def recfair_httpx_client(pytestconfig: pytest.Config) -> Iterator[Any]:
    """recfair_http_client for code still on httpx 0.x (an ``httpx.Client``)."""
    yield from fixtures.http_clients(pytestconfig, "httpx", True)


@pytest.fixture(scope="session")
def recfair_async_httpx_client(pytestconfig: pytest.Config) -> Iterator[Any]:
    """recfair_async_http_client for code still on httpx 0.x (an ``httpx.AsyncClient``)."""
    yield from fixtures.http_clients(pytestconfig, "httpx", False)


@pytest.fixture
def recfair_settings(request: pytest.FixtureRequest) -> AuditSettings:
    """The merged, validated settings (CLI > marker > ini > defaults) of this audit."""
    found = audit_state(request.node)
    return found.settings if found is not None else run_state(request.config).settings


@pytest.fixture
def recfair_seeds(request: pytest.FixtureRequest, recfair_settings: AuditSettings) -> Any:
    """The seed entities of this audit (marker seeds=: fixture name, bundled set or file)."""
    return fixtures.seeds(request, recfair_settings)


@pytest.fixture
def recfair_grid(request: pytest.FixtureRequest, recfair_settings: AuditSettings) -> Any:
    """The attribute grid of this audit (marker grid=: bundled name or YAML file)."""
    from pytest_recfair.prompts.grids import load_grid

    return load_grid(fixtures.locate(request, "grid", recfair_settings.grid))


@pytest.fixture
def recfair_catalogue(request: pytest.FixtureRequest, recfair_settings: AuditSettings) -> Any:
    """Item metadata for item-side audits (marker/ini catalogue=: a CSV, JSON or YAML file);
    override in conftest.py to return a Catalogue, a path or a list of item records."""
    return fixtures.input_file(request, "catalogue", recfair_settings.catalogue)


@pytest.fixture
def recfair_candidates(request: pytest.FixtureRequest, recfair_settings: AuditSettings) -> Any:
    """Candidate titles per entity for candidate-position audits (marker candidates=: a
    fixture name or a JSON/YAML file mapping entity -> titles)."""
    return fixtures.candidates(request, recfair_settings)


@pytest.fixture(scope="session")
def recfair_judge(pytestconfig: pytest.Config) -> Any:
    """The model that judges answers for kinds that need a judge (role-play Why
    questions); override in conftest.py (default: the recfair_judge_* ini keys, or None)."""
    return fixtures.default_provider(pytestconfig, judge=True)


@pytest.fixture
def recfair_cassettes(request: pytest.FixtureRequest, recfair_settings: AuditSettings) -> Any:
    """The cassette store of this run (ini recfair_cassette_dir, mode --fairness-record)."""
    return fixtures.cassettes(request.config, recfair_settings)


@pytest.fixture
def fairness_result(request: pytest.FixtureRequest, recfair_settings: AuditSettings) -> Any:
    """The AuditResult of this @fairness test: similarities, SNSR/SNSV/PAFS with CIs."""
    with _bulk(request.config):
        return fixtures.fairness_result(request, recfair_settings)


@pytest.fixture(autouse=True)
def _recfair_autorun(request: pytest.FixtureRequest) -> None:
    """Runs the audit of a @fairness test that did not ask for fairness_result itself."""
    marked = request.node.get_closest_marker("fairness") is not None
    if marked and request.config.getoption("fairness"):
        request.getfixturevalue("fairness_result")


def _bulk(config: pytest.Config) -> contextlib.AbstractContextManager[None]:
    """The plugin's own work, run as ``fileio.bulk_work`` runs it (with --fairness)."""
    if not config.getoption("fairness", False):
        return contextlib.nullcontext()
    from pytest_recfair.fileio import bulk_work

    return bulk_work()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from fixtures.judged_call(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    session.ship(item, call, report)
    return report
