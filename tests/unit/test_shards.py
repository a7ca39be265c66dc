"""Shard selection, shard files and their merge (pytest_recfair.engine.sharding)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.engine import base
from pytest_recfair.engine import sharding as shards
from pytest_recfair.engine.overlap import kind as overlap_kind
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.settings import AuditSettings
from pytest_recfair.settings.values import Shard, parse_shard
from tests.support.tally_replies import LAYOUT, config, entities, replies, tally_of


def merge_results(parts: list[base.ShardResult]) -> tuple[dict[str, Any], Any]:
    """The list-overlap kind's merge of shards: the whole audit's metadata and tally."""
    merged = overlap_kind.OVERLAP.merge(AuditSettings(), parts, lambda: ([], base.AuditInputs()))
    assert isinstance(merged.scorer, overlap_kind.OverlapScorer)
    return merged.meta, merged.scorer.tally


@pytest.mark.parametrize(("n", "count"), [(0, 3), (1, 4), (10, 3), (1000, 7), (31, 31)])
def test_shards_are_disjoint_and_cover_everything(n: int, count: int) -> None:
    items = [f"e{i}" for i in range(n)]
    parts = [base.shard_share(items, Shard(i, count)) for i in range(1, count + 1)]
    flat = [x for p in parts for x in p]
    assert sorted(flat) == sorted(items)
    assert len(flat) == len(set(flat))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert base.shard_share(items, Shard(2, count)) == base.shard_share(items, Shard(2, count))
    assert base.shard_share(items, None) == items


@pytest.mark.parametrize("text", ["0/3", "4/3", "a/b", "3", "1/0", "-1/2", ""])
def test_bad_shard_spec_is_one_clear_line(text: str) -> None:
    with pytest.raises(ConfigError, match=r"--fairness-shard: expected I/N") as info:
        parse_shard(text)
    assert "\n" not in str(info.value)


def test_parse_shard() -> None:
    assert parse_shard(" 2 / 4 ") == Shard(2, 4)
    assert str(Shard(2, 4)) == "2/4"


def _write_all(root: Path, count: int, meta: dict[str, object]) -> list[Path]:
    rs = replies(9, 1)
    paths = []
    for i in range(1, count + 1):
        mine = set(base.shard_share(entities(9), Shard(i, count)))
        t = tally_of([r for r in rs if r.case.entity_id in mine], 9, config(), 2)
        path = shards.shard_path(root, "tests/test_x.py::test_audit", Shard(i, count))
        doc = base.shard_doc(
            test_id="tests/test_x.py::test_audit", shard=Shard(i, count), meta=meta, tally=t
        )
        shards.write_shard(path, doc)
        paths.append(path)
    return paths


def test_files_round_trip_and_merge(tmp_path: Path) -> None:
    meta = {"test_id": "t", "model": "m", "seeds_hash": "abc", "record_mode": "none"}
    paths = _write_all(tmp_path / "out", 3, meta)
    assert all(p.name.endswith(f".shard-{i}-of-3.json") for i, p in enumerate(paths, 1))
    (tmp_path / "out" / "other.json").write_text('{"not": "a shard"}')
    found = shards.collect([tmp_path / "out"])
    assert list(found) == ["tests/test_x.py::test_audit"]
    merged_meta, tally = merge_results(found["tests/test_x.py::test_audit"])
    assert merged_meta == meta
    whole = tally_of(replies(9, 1), 9, config(), 9)
    assert tally.to_dict() == whole.to_dict()
    assert set(LAYOUT) == set(tally.attributes)


def test_missing_duplicate_and_mismatched_shards(tmp_path: Path) -> None:
    meta = {"test_id": "t", "model": "m", "seeds_hash": "abc"}
    paths = _write_all(tmp_path, 3, meta)
    results = [shards.load_shard(p) for p in paths]
    with pytest.raises(DataError, match=r"needs shards 1\.\.3 once each; missing 2/3"):
        merge_results([results[0], results[2]])
    with pytest.raises(DataError, match="given twice 1/3"):
        merge_results([results[0], results[0], results[1]])
    doc = json.loads(paths[1].read_text())
    doc["meta"]["seeds_hash"] = "zzz"
    paths[1].write_text(json.dumps(doc))
    with pytest.raises(DataError, match="seeds_hash differ"):
        merge_results([shards.load_shard(p) for p in paths])


def test_unreadable_shard_files_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{cut")
    with pytest.raises(DataError, match=f"shard result {bad}: cannot be read"):
        shards.load_shard(bad)
    bad.write_text('{"format": "pytest-recfair-shard", "version": 1}')
    with pytest.raises(DataError, match=r"invalid at \$: 'tally' is a required property"):
        shards.load_shard(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        shards.collect([tmp_path / "nowhere"])


def test_reply_shards_round_trip_and_unite(tmp_path: Path) -> None:
    """Kinds that score across entities write replies; the merge unites them, and a
    tally shard among reply shards is refused."""
    test_id = "tests/test_x.py::test_items"
    meta = {"test_id": test_id, "model": "m", "seeds_hash": "abc"}
    parts = [
        {"completions": {"a": {"text": "1. X", "usage": [3, 4]}}, "errors": {}},
        {"completions": {"b": {"text": "1. Y", "usage": None}}, "errors": {"c": "HTTP 500"}},
    ]
    for i, part in enumerate(parts, 1):
        path = shards.shard_path(tmp_path, test_id, Shard(i, 2))
        doc = base.shard_doc(test_id=test_id, shard=Shard(i, 2), meta=meta, replies=part)
        shards.write_shard(path, doc)
    found = shards.collect([tmp_path])[test_id]
    assert all(r.tally is None for r in found)
    merged_meta, united = base.merge_replies(found)
    assert merged_meta == meta
    assert set(united["completions"]) == {"a", "b"}
    assert united["errors"] == {"c": "HTTP 500"}
    with pytest.raises(DataError, match="different kinds of result"):
        merge_results(found)


def test_malformed_replies_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    doc = {
        "format": base.SHARD_FORMAT,
        "version": 1,
        "test_id": "t",
        "shard": {"index": 1, "count": 1},
        "meta": {},
        "replies": {"completions": []},
    }
    path.write_text(json.dumps(doc))
    with pytest.raises(
        DataError, match=r"bad\.json: invalid at \$\.replies: 'errors' is a required"
    ):
        shards.load_shard(path)


def _edit(change: Callable[[dict[str, Any]], object]) -> Callable[[bytes], bytes]:
    def damage(raw: bytes) -> bytes:
        doc = json.loads(raw)
        change(doc)
        return json.dumps(doc).encode()

    return damage


def _sims_as_strings(doc: dict[str, Any]) -> None:
    for at in doc["tally"]["attributes"].values():
        at["sims"] = dict.fromkeys(at["sims"], "0.5")


def _one_cell_a_string(doc: dict[str, Any]) -> None:
    at = next(iter(doc["tally"]["attributes"].values()))
    rows = next(iter(at["sims"].values()))
    rows[-1][-1] = str(rows[-1][-1])  # float("0.5") would have read it silently


DAMAGES: list[tuple[Callable[[bytes], bytes], str]] = [
    (_edit(_sims_as_strings), r"invalid at \$\.tally\.attributes\.\w+\.sims\.\w+: '0\.5' is not "),
    (_edit(_one_cell_a_string), r"invalid at \$\.tally\.attributes\.\w+\.sims\.\w+(\[\d+\])*: '"),
    (_edit(lambda d: d["tally"].pop("rows")), r"invalid at \$\.tally: 'rows' is a required"),
    (_edit(lambda d: d["shard"].update(index="2")), r"invalid at \$\.shard\.index: '2' is not of"),
    (_edit(lambda d: d["tally"].update(merges=-1)), r"invalid at \$\.tally\.merges: -1 is less"),
    (lambda raw: raw[: len(raw) // 2], r"cannot be read as JSON \((Unterminated|Expecting)"),
    (
        lambda raw: raw.replace(b'"ent-001"', b'"ent-\xff01"', 1),
        r"cannot be read as JSON \('utf-8' codec",
    ),
    (lambda raw: raw.replace(b"0.", b"NaN, 0.", 1), r"cannot be read as JSON \(NaN is not a JSON"),
]


@pytest.mark.parametrize(("damage", "expected"), DAMAGES)
def test_a_damaged_shard_is_one_line_naming_file_problem_and_fix(
    tmp_path: Path, damage: Callable[[bytes], bytes], expected: str
) -> None:
    """The merge reads shard files through the schema they are written by (issue 33):
    no AttributeError, no silently read string, one line with the file and the place."""
    meta = {"test_id": "t", "model": "m", "seeds_hash": "abc"}
    path = _write_all(tmp_path, 2, meta)[1]
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(DataError, match=expected) as info:
        shards.collect([tmp_path])
    message = str(info.value)
    assert message.startswith(f"shard result {path}: ")
    assert message.endswith("re-run that shard.")
    assert "\n" not in message


def test_a_merge_with_other_settings_names_where_to_set_them() -> None:
    from types import SimpleNamespace

    here = SimpleNamespace(k=5, model="m", repeats=1, seed=2)
    there = SimpleNamespace(test_id="t.py::t", k=6, model="m", repeats=1, seed=1)
    with pytest.raises(ConfigError) as err:
        shards._check_settings(here, there, "a.json")  # type: ignore[arg-type]
    text = str(err.value)
    assert "k 5 here, 6 in the shards; seed 2 here, 1 in the shards" in text
    assert "(marker k=; --fairness-seed=N, which also seeds the bootstrap)" in text
    assert "\n" not in text
