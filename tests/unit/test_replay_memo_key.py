"""The whole-audit replay cache's key (engine/replaymemo.py): every input of the stream
is in it by content (a moved folder keeps it), and an audit outside a clean replay gets
none (it is streamed as usual)."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.cassettes import cache
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.engine import registry, replaymemo
from pytest_recfair.engine.base import AuditInputs, AuditRequest
from pytest_recfair.prompts.grids import load_grid
from pytest_recfair.prompts.seeds import load_seeds
from pytest_recfair.providers import from_config
from pytest_recfair.settings import AuditSettings, resolve
from pytest_recfair.settings.values import Shard
from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.vocab import RecordMode

BASE = "http://127.0.0.1:8000/v1"
GRID = load_grid("faireval")
ENTITIES = load_seeds("directors")[:3]


@pytest.fixture(autouse=True)
def own_store() -> Iterator[None]:
    before = cache.folder()
    cache.use(None)
    yield
    cache.use(before)


def _settings(**marker: object) -> AuditSettings:
    return resolve(marker={"entities": 3, "attr": "religion"} | marker)


def _key(root: Path, mode: RecordMode = "none", **change: object) -> bytes | None:
    settings = change.pop("settings", _settings())
    assert isinstance(settings, AuditSettings)
    provider = change.pop("provider", from_config("openai", model="m-1", base_url=BASE))
    request = AuditRequest(settings, provider, ENTITIES, GRID, "t::a", CassetteStore(root, mode))
    built = change.pop("built", None)
    request = dataclasses.replace(request, **change)  # type: ignore[arg-type]
    got = replaymemo.key(request, *_kind_and(settings, built))
    return None if got is None else got.value()


def _kind_and(settings: AuditSettings, built: Any = None) -> tuple[Any, ...]:
    """The kind, grid, entities and the first entity's prompts (as the stream builds
    them) that :func:`replaymemo.key` takes."""
    kind = registry.kind_for(settings)
    if built is None:
        built = [kind.build_cases(settings, GRID, ENTITIES[:1], AuditInputs())]
    return kind, GRID, ENTITIES, lambda: built


def test_every_input_of_the_stream_is_in_the_key(tmp_path: Path) -> None:
    store = CassetteStore(tmp_path, "none")
    for entity in ENTITIES:
        store.path_for(entity.id).write_text('{"interactions": []}')
    base = _key(tmp_path)
    assert base is not None
    assert _key(tmp_path) == base  # deterministic
    others = [
        _key(tmp_path, settings=_settings(k=10)),
        _key(tmp_path, settings=_settings(metric="serp")),
        _key(tmp_path, provider=from_config("openai", model="m-2", base_url=BASE)),
        _key(tmp_path, provider=from_config("openai", model="m-1", base_url=BASE, temperature=0.3)),
        _key(tmp_path, provider=from_config("anthropic", model="m-1", base_url=BASE)),
        _key(tmp_path, test_id="t::b"),
        _key(tmp_path, failed={"case-1": "HTTP 500"}),
        _key(tmp_path, inputs=AuditInputs(absent=frozenset({("religion", "a Muslim", "x")}))),
        _key(tmp_path, built=[["another prompt"]]),  # a template edited: other prompts
    ]
    assert None not in others
    assert len({base, *others}) == len(others) + 1
    store.path_for(ENTITIES[1].id).write_text('{"interactions": [] }')  # re-recorded
    assert _key(tmp_path) not in (None, base)


def test_no_key_outside_a_clean_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = CassetteStore(tmp_path, "none")
    for entity in ENTITIES[:2]:
        store.path_for(entity.id).write_text('{"interactions": []}')
    assert _key(tmp_path) is None  # an entity without a cassette: its miss is reported
    store.path_for(ENTITIES[2].id).write_text('{"interactions": []}')
    assert _key(tmp_path) is not None
    assert _key(tmp_path, "once") is None  # a recording mode may go to the network
    assert _key(tmp_path, shard=Shard(1, 2)) is None  # a shard writes its own result
    assert _key(tmp_path, provider=SimulatedRecommender()) is None  # says no request
    judge = SimulatedRecommender()
    assert _key(tmp_path, inputs=AuditInputs(judge=judge)) is None
    with_judge = AuditInputs(judge=from_config("openai", model="judge", base_url=BASE))
    assert _key(tmp_path, inputs=with_judge) not in (None, _key(tmp_path))
    monkeypatch.setenv("RECFAIR_CACHE", "off")
    assert _key(tmp_path) is None


def test_the_key_is_the_same_computed_at_once_or_in_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first run (an empty memo) computes the key in a background thread while the
    audit streams; a later run at once, to look it up: both must give the same key."""
    store = CassetteStore(tmp_path, "none")
    for entity in ENTITIES:
        store.path_for(entity.id).write_text('{"interactions": []}')
    settings = _settings()
    request = AuditRequest(
        settings, from_config("openai", model="m-1", base_url=BASE), ENTITIES, GRID, "t::a", store
    )
    first = replaymemo.key(request, *_kind_and(settings))
    assert first is not None
    assert not first.now
    monkeypatch.setattr(cache, "warm", lambda: True)
    later = replaymemo.key(request, *_kind_and(settings))
    assert later is not None
    assert later.now
    assert first.value() == later.value() is not None


def test_cassettes_hashed_in_two_threads_give_the_keys_of_one(tmp_path: Path) -> None:
    paths = []
    for i in range(100):  # past the 64 files below which one thread hashes them
        paths.append(tmp_path / f"e{i}.json")
        paths[-1].write_text(f'{{"interactions": [{i}]}}')
    paths.append(tmp_path / "absent.json")
    one = replaymemo._files_digest(paths[:-1], 1)
    assert one is not None
    assert one == replaymemo._files_digest(paths[:-1], 2)
    assert replaymemo._files_digest(paths, 2) is None  # one could not be read
    assert replaymemo._files_digest(paths[1:-1], 1) != one


def test_a_moved_folder_keeps_its_key(tmp_path: Path) -> None:
    """No absolute path in the key: a checkout moved elsewhere finds its entries."""
    (tmp_path / "a").mkdir()
    store = CassetteStore(tmp_path / "a", "none")
    for entity in ENTITIES:
        store.path_for(entity.id).write_text('{"interactions": []}')
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    assert _key(tmp_path / "a") == _key(tmp_path / "b") is not None
