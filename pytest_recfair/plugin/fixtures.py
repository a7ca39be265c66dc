"""The input fixtures' work: where each looks for its file or fixture, how it reads it."""

from __future__ import annotations

import keyword
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_recfair import settings
from pytest_recfair.errors import ConfigError
from pytest_recfair.plugin.session import run_state

if TYPE_CHECKING:
    from pytest_recfair.engine.base import AuditInputs

#: what resolves a relative input path: a fixture's request, or the test item at
#: collection (both have the test file's ``path`` and the ``config``)
Node = pytest.FixtureRequest | pytest.Item


def default_provider(config: pytest.Config, judge: bool = False) -> Any:
    """The provider the ini keys name; with ``judge`` the recfair_judge_* keys, each
    falling back to the recommender's (None without recfair_judge_model)."""
    from pytest_recfair.providers.http import from_config

    def ini(key: str) -> str | None:
        value = (judge and config.getini(f"recfair_judge_{key}")) or config.getini(f"recfair_{key}")
        return str(value or "").strip() or None

    model = str(config.getini("recfair_judge_model" if judge else "recfair_model") or "").strip()
    if not model and judge:
        return None
    if not model:
        raise ConfigError(
            "no recommender configured: set the ini key recfair_model (and recfair_provider, "
            "recfair_base_url, recfair_api_key_env), or override the recfair_recommender "
            "fixture in conftest.py. See docs/quickstart.md."
        )
    return from_config(
        ini("provider") or "openai",
        model=model,
        base_url=ini("base_url"),
        api_key_env=ini("api_key_env"),
    )


def seeds(request: pytest.FixtureRequest, s: settings.AuditSettings) -> Any:
    """The seed entities (marker seeds=: fixture name, bundled set or file)."""
    from pytest_recfair.api import bundled_seeds, seed_entities
    from pytest_recfair.prompts.seeds import load_seeds

    source = s.seeds
    if source is None:
        return load_seeds(bundled_seeds(s.domain, "@fairness"))
    path = find_file(request, source)
    if path is not None:
        return load_seeds(path, domain=s.domain)
    if source.isidentifier() and not keyword.iskeyword(source):
        try:
            value = request.getfixturevalue(source)
        except pytest.FixtureLookupError:
            pass
        else:
            return seed_entities(value, s.domain, f"seeds fixture {source!r}")
    if path_like(source):
        raise not_found(request, "seeds", source)
    return load_seeds(source, domain=s.domain)


def grid(request: pytest.FixtureRequest, s: settings.AuditSettings) -> Any:
    """The attribute grid (marker grid=: bundled name or YAML file)."""
    from pytest_recfair.prompts.grids import load_grid

    path = find_file(request, s.grid)
    if path is None and path_like(s.grid):
        raise not_found(request, "grid", s.grid)
    return load_grid(path if path is not None else s.grid)


def catalogue(request: pytest.FixtureRequest, s: settings.AuditSettings) -> Any:
    """The catalogue file of an item-side audit, or None."""
    return _file(request, "catalogue", s.catalogue)


def _file(request: pytest.FixtureRequest, key: str, source: str | None) -> Path | None:
    path = None if source is None else find_file(request, source)
    if path is None and source is not None:
        raise not_found(request, key, source)
    return path


def candidates(request: pytest.FixtureRequest, s: settings.AuditSettings) -> Any:
    """The candidate titles of a candidate-position audit: a file or a fixture's value."""
    source = s.candidates
    if source is None:
        return None
    path = find_file(request, source)
    if path is not None:
        return path
    if source.isidentifier() and not keyword.iskeyword(source):
        return request.getfixturevalue(source)
    raise not_found(request, "candidates", source, "or fixture")


def inputs(request: pytest.FixtureRequest, s: settings.AuditSettings) -> AuditInputs:
    """What the kind of audit needs beyond seeds and grid (catalogue, candidates, absent)."""
    from pytest_recfair.engine.base import AuditInputs
    from pytest_recfair.replies import catalogue as read

    found_catalogue = request.getfixturevalue("recfair_catalogue")
    judge = request.getfixturevalue("recfair_judge")
    found_candidates = request.getfixturevalue("recfair_candidates")
    absent = _file(request, "absent", s.absent)
    return AuditInputs(
        catalogue=None
        if found_catalogue is None
        else read.as_catalogue(found_catalogue, "recfair_catalogue"),
        candidates=None
        if found_candidates is None
        else read.read_candidates(found_candidates, "candidates"),
        absent=frozenset() if absent is None else read.read_absent(absent),
        where=(request.path.parent, request.config.rootpath),
        judge=None if judge is None else recommender_for(judge, s),
    )


def cassettes(config: pytest.Config, s: settings.AuditSettings) -> Any:
    """The cassette store of this run (ini recfair_cassette_dir, mode --fairness-record)."""
    from pytest_recfair.cassettes import failures
    from pytest_recfair.cassettes.store import CassetteStore

    base = config.rootpath
    state = run_state(config)
    shard = state.run.shard
    # shard jobs note their failed prompts in files of their own (merged on read)
    failures.set_shard(base / s.cassette_dir, f"{shard.index}of{shard.count}" if shard else None)
    return CassetteStore(
        base / s.cassette_dir,
        s.record_mode,
        imports=[base / p for p in s.vcr_cassettes or ()],
        usage=None if state.pruner is None else state.pruner.use(s),
        rewritten=state.rewritten,
    )


def http_clients(config: pytest.Config, generation: str, sync: bool) -> Iterator[Any]:
    """The recfair_http_client fixtures' client: ``generation`` httpx2 or httpx (0.x)."""
    from pytest_recfair.providers import pipeline

    limit = run_state(config).settings.max_reply_chars
    make = pipeline.http_client if sync else pipeline.async_http_client
    client = make(generation, limit)
    yield client
    if sync:
        client.close()  # an async client's pools close with the loop each audit ran on


def user_fixture(request: pytest.FixtureRequest, name: str) -> Any:
    """A user's fixture's value, or its error said once with its own frames (later tests:
    one line)."""
    try:
        return request.getfixturevalue(name)
    except (pytest.FixtureLookupError, pytest.fail.Exception, pytest.skip.Exception):
        raise
    except Exception as exc:
        error = exc
    # failed outside the except block: no "during handling ..." chain in the report
    seen = run_state(request.config).fixture_errors
    what = f"{type(error).__name__}: {error}"
    if id(error) in seen:  # a session fixture re-raises the same error for every test
        pytest.fail(f"{name} failed earlier in this run ({what}); see the first error.", False)
    seen.add(id(error))
    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if not {"_pytest", "pluggy", "pytest_recfair"} & set(Path(f.filename).parts)
    ]
    where = "".join(traceback.format_list(frames)).rstrip()
    pytest.fail(f"the {name} fixture raised {what}\n{where}", pytrace=False)


def not_found(request: Node, key: str, source: str, other: str = "") -> ConfigError:
    """The error for an input file that is not next to the test file nor in rootdir."""
    from pytest_recfair.prompts.seeds import EXAMPLE_FILES, EXAMPLES_COMMAND

    if Path(source).is_absolute():
        where = "it does not exist"
    else:
        where = (
            f"looked for {request.path.parent / source} (next to the test file) and "
            f"{request.config.rootpath / source} (rootdir): relative paths resolve from "
            "there, not from the current directory"
        )
    hint = "fix the path"
    if Path(source).as_posix() in EXAMPLE_FILES:
        hint = f"it is a file of the docs' examples: `{EXAMPLES_COMMAND}` in rootdir writes it"
    what = f"no such file {other}".rstrip()
    return ConfigError(f"@fairness({key}={source!r}): {what}; {where}; {hint}.")


def path_like(source: str) -> bool:
    """A value that names a file (a folder or a suffix), not a bundled set or fixture."""
    return "/" in source or "\\" in source or bool(Path(source).suffix)


def find_file(request: Node, source: str) -> Path | None:
    """A seeds/grid file, relative to the test file first, then to rootdir."""
    found = [Path(source)]
    if not Path(source).is_absolute():
        found = [request.path.parent / source, request.config.rootpath / source]
    for c in found:
        if c.is_file():
            return c
    return None


def recommender_for(recommender: Any, s: settings.AuditSettings) -> Any:
    """The recommender with this test's provider settings (ini and marker), under a
    readable model id: marker ``model=``, its ``model`` attribute, its name, else (a
    lambda or closure) the fixture's name."""
    from pytest_recfair.providers.adapter import CallableProvider, callable_label
    from pytest_recfair.providers.http import configure

    recommender = configure(
        recommender,
        temperature=s.temperature,
        max_tokens=s.max_tokens,
        seed=s.sampling_seed,
        header_envs=dict(s.extra_headers) if s.extra_headers else None,
    )
    if isinstance(recommender, CallableProvider) or callable(
        getattr(recommender, "build_request", None)
    ):
        return recommender
    own = getattr(recommender, "model", None)
    if s.model is None and isinstance(own, str) and own:
        return recommender
    label = s.model or callable_label(recommender)
    if "<" in label:  # <lambda>, <locals>: the fixture's name says more
        label = "recfair_recommender"
    return CallableProvider(recommender, model=label)
