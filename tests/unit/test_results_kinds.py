"""Results shaped per kind: a common header and each kind's own settings in its meta, and
files written before that shape (baselines, stored runs) still read, numbers unchanged."""

from __future__ import annotations

import gzip
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.engine import registry
from pytest_recfair.gate import baselines
from pytest_recfair.report.history import load_run
from pytest_recfair.report.markdown import to_json
from pytest_recfair.report.registry import render
from pytest_recfair.results import META_TYPES, AuditMeta, AuditResult, ListMeta
from tests.support.synth_results import audit

# Written by the code before results were shaped per kind (commit ca06ca6), gzipped: the
# demo's baselines/ (file name -> text), and a JSON run report of four demo audits, one of
# each kind (`pytest --fairness -k "french or candidate_positions or restaurant_prices or
# roleplay_religion" --fairness-report=run.json`).
OLD = Path(__file__).parents[1] / "data" / "before_kinds"
OLD_BASELINES: dict[str, str] = json.loads(
    gzip.decompress((OLD / "baselines.json.gz").read_bytes())
)
OLD_RUN = OLD / "run.json.gz"
HEADER = {f.name for f in fields(AuditMeta)}


def _kind_of_old(doc: dict[str, Any]) -> str:
    return next(iter(doc.get("extras") or {}), "overlap")


def _same_numbers(old: dict[str, Any], new: dict[str, Any]) -> None:
    """The new document holds the old one's numbers, bit for bit, in the new places."""
    kind = new["meta"]["kind"]
    shared = [  # baselines written before the standard errors were added lack them
        {k: a[k] for k in was}
        for a, was in zip(new.get("attributes", []), old["attributes"], strict=True)
    ]
    assert shared == old["attributes"]
    assert ({kind: new[kind]} if kind in new else {}) == (old.get("extras") or {})
    for key in ("prompt_tokens", "completion_tokens", "cost", "failed", "prompts"):
        assert new.get(key) == old.get(key), key
    # the old meta's values where it had the field (a default where it did not)
    assert all(old["meta"].get(k, v) == v for k, v in new["meta"].items() if k != "kind")
    if kind != "overlap":
        assert not {"metric", "variant", "missing", "attributes"} & (set(new["meta"]) | set(new))


def test_every_kind_has_its_meta_type() -> None:
    assert set(META_TYPES) == {k.name for k in registry.kinds()}
    for name, cls in META_TYPES.items():
        assert name == cls.KIND
        assert {f.name for f in fields(cls)} >= HEADER


def test_only_the_list_overlap_meta_has_a_metric_variant_and_missing_policy() -> None:
    own = {f.name for f in fields(ListMeta)} - HEADER
    for cls in META_TYPES.values():
        if cls is not ListMeta:
            assert not {"metric", "variant", "missing"} & {f.name for f in fields(cls)}
    assert {"grid", "templates", "domain", "k", "metric", "variant", "missing"} <= own


@pytest.mark.parametrize("name", sorted(OLD_BASELINES))
def test_a_baseline_written_before_loads_and_rewrites_with_the_same_numbers(
    name: str, tmp_path: Path
) -> None:
    path = tmp_path / "old" / name
    path.parent.mkdir()
    path.write_text(OLD_BASELINES[name], encoding="utf-8")
    old = json.loads(OLD_BASELINES[name])
    assert old["schema_version"] == 1
    assert "kind" not in old["meta"]
    loaded = baselines.load(path)
    assert loaded.meta.kind == _kind_of_old(old)
    assert type(loaded.meta) is META_TYPES[loaded.meta.kind]
    again = tmp_path / name
    baselines.write(again, loaded)
    new = json.loads(again.read_text(encoding="utf-8"))
    assert new["schema_version"] == baselines.SCHEMA_VERSION
    _same_numbers(old, new)
    assert baselines.load(again).to_dict() == loaded.to_dict()
    assert baselines.result_incompatibility(loaded, baselines.load(again)) is None


def test_a_stored_run_written_before_loads_with_its_kinds(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(gzip.decompress(OLD_RUN.read_bytes()))
    old = {r["meta"]["test_id"]: r for r in json.loads(path.read_text())["results"]}
    run = load_run(path)
    # every kind there was when it was stored (the exposure kind came later)
    kinds = sorted(r.name for r in registry.kinds() if r.name != "exposure")
    assert sorted(r.meta.kind for r in run.results) == kinds
    # written again in the new shape, read back: the same results
    new = tmp_path / "new.json"
    new.write_text(to_json(run.results, run.baselines), encoding="utf-8")
    again = load_run(new)
    assert [r.to_dict() for r in again.results] == [r.to_dict() for r in run.results]
    for doc in json.loads(new.read_text())["results"]:
        old_doc = old[doc["meta"]["test_id"]]
        _same_numbers(old_doc, doc)
        assert doc["gate"] == old_doc["gate"]
    for fmt in (".md", ".html", ".json"):
        assert render(fmt, list(again.results))


def test_a_baseline_of_another_kind_is_not_compared() -> None:
    base = audit()
    other = AuditMeta.from_dict({**base.meta.to_dict(), "kind": "items", "item_field": "x"})
    problem = baselines.result_incompatibility(base, AuditResult(meta=other, attributes=()))
    assert problem is not None
    assert "kind of audit (baseline 'overlap', this run 'items')" in problem
