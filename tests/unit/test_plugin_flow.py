"""The plugin's audit steps without pytest (pytest_recfair.plugin.fixtures and session)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from pytest_recfair.compare.models import ModelSlot
from pytest_recfair.engine.base import AuditRequest
from pytest_recfair.engine.stream import measure
from pytest_recfair.plugin import fixtures
from pytest_recfair.plugin.session import AuditState
from pytest_recfair.prompts.grids import load_grid
from pytest_recfair.prompts.seeds import load_seeds
from pytest_recfair.providers import CallableProvider
from pytest_recfair.settings import resolve
from pytest_recfair.settings.values import Shard
from pytest_recfair.sim.recommender import SimulatedRecommender


def _top(prompt: str) -> list[str]:
    return ["A", "B"]


def test_a_callable_is_reported_under_a_readable_model_id() -> None:
    s = resolve()
    named = fixtures.recommender_for(_top, s)
    assert isinstance(named, CallableProvider)
    assert named.model.endswith("_top")
    anonymous = fixtures.recommender_for(lambda prompt: ["A"], s)
    assert anonymous.model == "recfair_recommender"  # a lambda's name says nothing
    assert fixtures.recommender_for(_top, resolve(marker={"model": "mine"})).model == "mine"
    own = SimpleNamespace(model="gpt-x", __call__=_top)
    assert fixtures.recommender_for(own, s) is own  # it has its own model id


def test_the_model_slot_carries_the_resampling_settings() -> None:
    s = resolve(ini={"recfair_n_resamples": "99", "recfair_resample_seed": "4"})
    assert AuditState(s).model_slot() is None
    state = AuditState(s, slot=("t.py::test", "m1", 1))
    assert state.model_slot() == ModelSlot("t.py::test", "m1", 1, 0.05, 99, 4)


def test_shard_note_and_body_error() -> None:
    out = SimpleNamespace(scored=3, total=10, path=Path("shards/x.json"))
    note = fixtures.shard_note(Shard(1, 4), out)
    assert "3 of 10 entities scored" in note
    assert "--fairness-merge" in note
    assert fixtures.body_error(AssertionError("first\nsecond")) == "AssertionError: first"
    assert len(fixtures.body_error(ValueError("x" * 500))) == 300


def test_gate_property_is_set_once() -> None:
    props: list[tuple[str, object]] = [("recfair.gate", "pass"), ("recfair.model", "m")]
    assert fixtures.gate_property(props, passed=False) == [
        ("recfair.model", "m"),
        ("recfair.gate", "fail"),
    ]


def test_measure_conclude_and_judge_without_pytest(tmp_path: Path) -> None:
    s = resolve(
        marker={"entities": 4, "attr": "religion"},
        ini={"recfair_n_resamples": "50", "recfair_baseline_dir": str(tmp_path)},
    )
    used: set[Path] = set()
    state = fixtures.baseline_of(s, tmp_path, "t.py::test_x", used)
    assert state.path in used  # marked used for --fairness-prune
    result = measure(
        AuditRequest(
            s,
            SimulatedRecommender(),
            load_seeds("directors"),
            load_grid("faireval"),
            "t.py::test_x",
        )
    )
    slot = ModelSlot("t.py::test", "m1", 0)
    comparison, gated, record = fixtures.conclude(s, result, state, slot)
    assert gated.gate is not None
    assert record.model_slot is slot
    assert record.payload()["model_slot"]["label"] == "m1"
    verdict, unwritable = fixtures.judge(s, record, comparison, "t.py::test_x", "AssertionError: x")
    assert unwritable is None
    assert not verdict.passed  # the body failed, so the audit did
    assert record.result is verdict.result
