"""Baseline files: names, round trip, validation errors, atomic writes, compatibility."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.gate import baselines
from pytest_recfair.gate import thresholds as gate
from pytest_recfair.results import AuditResult, GateOutcome, Stat
from tests.support.synth_results import RELIGION, attribute, audit, meta

TEST_ID = "tests/test_audit.py::test_religion"


# --- file names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("test_id", "name"),
    [
        ("tests/test_x.py::test_y[param]", "tests__test_x.py__test_y-param.json"),
        ("test_x.py::test_y", "test_x.py__test_y.json"),
        (
            "tests/a/test_x.py::TestK::test_y[gpt-4o-0]",
            "tests__a__test_x.py__TestK__test_y-gpt-4o-0.json",
        ),
        ("tests\\test_x.py::test_y", "tests__test_x.py__test_y.json"),
    ],
)
def test_baseline_path_examples(tmp_path: Path, test_id: str, name: str) -> None:
    assert baselines.baseline_path(tmp_path, test_id) == tmp_path / name


def test_unsafe_characters_get_a_hash_so_ids_stay_distinct(tmp_path: Path) -> None:
    ids = [
        "t.py::test_y[a b]",
        "t.py::test_y[a:b]",
        "t.py::test_y[a_b]",
        "t.py::test_y[a/b]",
        "t.py::test_y[ä]",
    ]
    paths = [baselines.baseline_path(tmp_path, i) for i in ids]
    assert len(set(paths)) == len(ids)
    for p in paths:
        assert p.parent == tmp_path
        assert all((c.isalnum() and c.isascii()) or c in "._-" for c in p.name)
    assert paths == [baselines.baseline_path(tmp_path, i) for i in ids]  # stable


def test_long_and_dotted_ids_are_tamed(tmp_path: Path) -> None:
    long_id = "t.py::test_y[" + "x" * 500 + "]"
    p = baselines.baseline_path(tmp_path, long_id)
    assert len(p.name) < 150
    assert p != baselines.baseline_path(tmp_path, long_id[:-2] + "y]")
    dotted = baselines.baseline_path(tmp_path, "../../etc/passwd")
    assert dotted.parent == tmp_path
    assert not dotted.name.startswith(".")


_ID_CHARS = "ab_.-/:[] \\äZ9"
_NODE_IDS = st.one_of(
    st.text(alphabet=_ID_CHARS, min_size=1, max_size=40).filter(str.strip),
    st.builds(
        lambda path, names, param: f"{path}.py::{'::'.join(names)}{param}",
        st.text(alphabet="ab/_-.", min_size=1, max_size=12),
        st.lists(st.text(alphabet="ab_", min_size=1, max_size=6), min_size=1, max_size=3),
        st.one_of(st.just(""), st.text(alphabet="ab.-_", max_size=6).map(lambda p: f"[{p}]")),
    ),
)


@settings(max_examples=300, deadline=None)
@given(_NODE_IDS, _NODE_IDS)
def test_baseline_path_laws(a: str, b: str) -> None:
    root = Path("baselines")
    pa, pb = baselines.baseline_path(root, a), baselines.baseline_path(root, b)
    for p in (pa, pb):
        assert p.parent == root  # never escapes the root
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*\.json", p.name)
        assert len(p.name) <= 140
    if a.replace("\\", "/") != b.replace("\\", "/"):
        assert pa != pb  # two tests never share a file
    else:
        assert pa == pb


@pytest.mark.parametrize("bad", ["", "   ", None])
def test_empty_test_id_is_refused(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(ConfigError, match="non-empty pytest node id"):
        baselines.baseline_path(tmp_path, bad)


# --- round trip --------------------------------------------------------------------------------


def test_round_trip_is_exact(tmp_path: Path) -> None:
    result = audit(seed=3, gender=True, refusals={"Islamic": 2})
    path = baselines.baseline_path(tmp_path / "baselines", TEST_ID)
    baselines.write(path, result)
    loaded = baselines.load(path)
    assert loaded == result
    for a, b in zip(loaded.attributes, result.attributes, strict=True):
        assert np.array_equal(a.matrix.sims, b.matrix.sims)
        assert a.matrix.sims.dtype == np.float64


def test_round_trip_keeps_gate_decisions(tmp_path: Path) -> None:
    baseline = audit(seed=0, n_entities=12, noise=0.15)
    path = tmp_path / "b.json"
    baselines.write(path, baseline)
    loaded = baselines.load(path)
    for seed in range(1, 6):
        rerun = audit(seed=seed, n_entities=12, noise=0.15, bias={"Islamic": -0.04})
        direct = gate.evaluate(rerun, baseline, gate.Thresholds(), tolerance=0.0)
        via_file = gate.evaluate(rerun, loaded, gate.Thresholds(), tolerance=0.0)
        assert via_file == direct


def test_nan_cells_survive(tmp_path: Path) -> None:
    sims = np.asarray(audit().attributes[0].matrix.sims).copy()
    sims[3, 1] = np.nan  # an entity skipped under missing="skip"
    result = AuditResult(meta=meta(), attributes=(attribute("religion", sims, RELIGION),))
    baselines.write(tmp_path / "b.json", result)
    loaded = baselines.load(tmp_path / "b.json")
    assert math.isnan(float(loaded.attributes[0].matrix.sims[3, 1]))
    assert np.array_equal(loaded.attributes[0].matrix.sims, sims, equal_nan=True)


def test_file_is_diff_friendly(tmp_path: Path) -> None:
    result = audit(seed=1)
    path = tmp_path / "b.json"
    baselines.write(path, result)
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert text == baselines.dumps(result)  # deterministic
    doc = json.loads(text)
    assert list(doc) == sorted(doc)
    assert list(doc["meta"]) == sorted(doc["meta"])
    # one matrix row per line
    n = result.attributes[0].matrix.sims.shape[0]
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == '"sims": [')
    rows = [ln.strip() for ln in lines[start + 1 : start + 1 + n]]
    assert all(r.startswith("[") and r.rstrip(",").endswith("]") for r in rows)
    assert [json.loads(r.rstrip(",")) for r in rows] == result.attributes[0].matrix.sims.tolist()
    assert lines[start + 1 + n].strip() in ("]", "],")


def test_written_document_has_the_required_fields(tmp_path: Path) -> None:
    result = replace(audit(refusals={"Islamic": 4}), gate=GateOutcome(passed=False, notes=("x",)))
    baselines.write(tmp_path / "b.json", result)
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["schema_version"] == baselines.SCHEMA_VERSION
    assert "gate" not in doc  # a baseline is numbers, not a verdict
    m = doc["meta"]
    for key in ("plugin_version", "provider", "model", "templates_hash", "grid_hash"):
        assert m[key]
    assert (m["seeds_hash"], m["k"], m["n_entities"], m["repeats"], m["variant"]) == (
        "c" * 64,
        25,
        40,
        1,
        "normalized",
    )
    values = {v["value"]: v for v in doc["attributes"][0]["values"]}
    assert values["Islamic"]["refusal_rate"] == pytest.approx(4 / 40)
    assert len(values["Islamic"]["mean"]["ci"]) == 2
    assert doc["attributes"][0]["snsr"]["ci"] is not None


def test_schema_is_shipped_and_valid() -> None:
    shipped = resources.files("pytest_recfair").joinpath("schemas", "baseline.schema.json")
    s = json.loads(shipped.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(s)
    assert s["properties"]["schema_version"] == {
        "const": baselines.SCHEMA_VERSION,
        "description": "format version of this file",
    }


# --- atomic writes -------------------------------------------------------------------------------


def test_failed_write_leaves_old_baseline_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "b.json"
    baselines.write(path, audit(seed=1))
    before = path.read_bytes()

    def boom(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("pytest_recfair.fileio.os.replace", boom)
    with pytest.raises(OSError, match="disk full"):
        baselines.write(path, audit(seed=2))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["b.json"]  # no temp file left


def test_write_refuses_what_load_would_refuse(tmp_path: Path) -> None:
    a = audit().attributes[0]
    broken = replace(audit(), attributes=(replace(a, snsr=Stat(math.inf)),))
    with pytest.raises(DataError, match="infinite"):
        baselines.write(tmp_path / "b.json", broken)
    assert not (tmp_path / "b.json").exists()


# --- broken files ------------------------------------------------------------


def test_missing_baseline_says_how_to_create_it(tmp_path: Path) -> None:
    path = tmp_path / "nothing.json"
    with pytest.raises(DataError) as info:
        baselines.load(path)
    assert isinstance(info.value, DataError)
    assert str(path) in str(info.value)
    assert "pytest --fairness --fairness-update" in str(info.value)


def _written(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    path = tmp_path / "b.json"
    baselines.write(path, audit())
    return path, json.loads(path.read_text())


def test_truncated_file(tmp_path: Path) -> None:
    path, _ = _written(tmp_path)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(DataError, match="not valid JSON") as info:
        baselines.load(path)
    assert str(path) in str(info.value)
    assert "--fairness-update" in str(info.value)
    assert "line" in str(info.value)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text("")
    with pytest.raises(DataError, match="is empty"):
        baselines.load(path)


def test_binary_garbage(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(DataError, match="cannot read baseline file"):
        baselines.load(path)


def _set(doc: dict[str, Any], where: str, value: Any) -> None:
    keys: list[Any] = [int(k) if k.isdigit() else k for k in where.split(".")]
    target: Any = doc
    for k in keys[:-1]:
        target = target[k]
    if value is _DELETE:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value


_DELETE = object()


@pytest.mark.parametrize(
    ("where", "value", "json_path"),
    [
        ("meta.k", "many", "$.meta.k"),
        ("meta.n_entities", 0, "$.meta.n_entities"),
        ("attributes.0.snsr.value", "x", "$.attributes[0].snsr.value"),
        ("attributes.0.values.1.refusals", -1, "$.attributes[0].values[1].refusals"),
        ("attributes.0.variant", "fancy", "$.attributes[0].variant"),
        ("attributes.0.matrix.sims.2.1", "0.5", "$.attributes[0].matrix.sims[2][1]"),
        ("attributes.0.matrix.sims.39.3", -0.1, "$.attributes[0].matrix.sims[39][3]"),
        ("attributes.0.matrix.sims.7.0", True, "$.attributes[0].matrix.sims[7][0]"),
        ("attributes.0.matrix.sims.7.0", math.nan, "$.attributes[0].matrix.sims[7][0]"),
        ("attributes.0.matrix.sims.9.2", math.inf, "$.attributes[0].matrix.sims[9][2]"),
        ("attributes.0.matrix.sims.9.2", [0.5], "$.attributes[0].matrix.sims[9][2]"),
        ("attributes.0.matrix.sims.9.2", 10**400, "$.attributes[0].matrix.sims[9][2]"),
        ("attributes.0.matrix.missing.3.1", None, "$.attributes[0].matrix.missing[3][1]"),
        ("attributes.0.matrix.missing.0.2", 1, "$.attributes[0].matrix.missing[0][2]"),
        ("attributes.0.matrix.entities.5", 3, "$.attributes[0].matrix.entities[5]"),
        ("attributes.0.matrix.entities.0", 3, "$.attributes[0].matrix.entities[0]"),
        ("attributes.0.matrix.sims.5", [0.5], "$.attributes[0].matrix.sims[5]"),
        ("attributes.0.matrix.missing.4", "x", "$.attributes[0].matrix.missing[4]"),
        ("meta.model", _DELETE, "$.meta"),
        ("attributes", [], "$.attributes"),
    ],
)
def test_schema_invalid_names_the_json_path(
    tmp_path: Path, where: str, value: Any, json_path: str
) -> None:
    path, doc = _written(tmp_path)
    _set(doc, where, value)
    path.write_text(json.dumps(doc))
    with pytest.raises(DataError) as info:
        baselines.load(path)
    msg = str(info.value)
    assert f"{path} is invalid at {json_path}:" in msg
    assert "pytest --fairness --fairness-update 'tests/test_audit.py::test_religion'" in msg


def test_cells_checked_outside_the_schema_follow_its_rules(tmp_path: Path) -> None:
    """Ints and null are similarities; NaN in a curve is a number (the schema's rule for
    curves), and such a file loads."""
    path, doc = _written(tmp_path)
    doc["attributes"][0]["matrix"]["sims"][1][0] = 1
    doc["attributes"][0]["matrix"]["sims"][2][0] = None
    doc["attributes"][0]["curves"] = {"Islamic": [0.5, None, math.nan, 1]}
    path.write_text(json.dumps(doc))
    loaded = baselines.load(path)
    assert math.isnan(float(loaded.attributes[0].matrix.sims[2, 0]))
    assert loaded.attributes[0].matrix.sims[1, 0] == 1.0


@pytest.mark.parametrize(("at", "value"), [(0, "x"), (4, "x"), (4, False), (2, [1.0])])
def test_a_bad_curve_point_is_named(tmp_path: Path, at: int, value: Any) -> None:
    path, doc = _written(tmp_path)
    curve: list[Any] = [0.9, 0.8, 0.7, 0.6, 0.5]
    curve[at] = value
    doc["attributes"][0]["curves"] = {"Islamic": curve}
    path.write_text(json.dumps(doc))
    with pytest.raises(DataError) as info:
        baselines.load(path)
    assert f"{path} is invalid at $.attributes[0].curves.Islamic[{at}]:" in str(info.value)


def test_matrix_shape_is_checked(tmp_path: Path) -> None:
    path, doc = _written(tmp_path)
    doc["attributes"][0]["matrix"]["sims"].pop()
    path.write_text(json.dumps(doc))
    with pytest.raises(DataError, match=r"\$\.attributes\[0\]\.matrix\.sims: 39 rows for 40"):
        baselines.load(path)


def test_matrix_values_must_match_attribute_values(tmp_path: Path) -> None:
    path, doc = _written(tmp_path)
    doc["attributes"][0]["matrix"]["values"][0] = "Hindu"
    path.write_text(json.dumps(doc))
    with pytest.raises(DataError, match="do not match the attribute values"):
        baselines.load(path)


def test_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text("[1, 2]")
    with pytest.raises(DataError, match=r"invalid at \$:"):
        baselines.load(path)


def test_newer_schema_version(tmp_path: Path) -> None:
    path, doc = _written(tmp_path)
    doc["schema_version"] = baselines.SCHEMA_VERSION + 1
    path.write_text(json.dumps(doc))
    with pytest.raises(DataError, match="newer than this pytest-recfair understands"):
        baselines.load(path)


# --- compatibility ------------------------------------------------------------


def test_same_settings_are_compatible() -> None:
    assert baselines.incompatibility(meta(), meta()) is None


def test_model_provider_and_record_mode_do_not_matter() -> None:
    changed = meta(model="gpt-4.1", provider="openai", record_mode="all", plugin_version="9")
    assert baselines.incompatibility(meta(), changed) is None


@pytest.mark.parametrize(
    ("field", "value", "label"),
    [
        ("seeds_hash", "d" * 64, "seed entity set"),
        ("n_entities", 30, "number of seed entities"),
        ("grid", "fairllm", "attribute grid"),
        ("grid_hash", "e" * 64, "attribute grid contents"),
        ("templates", "fairllm", "prompt templates"),
        ("templates_hash", "f" * 64, "prompt template texts"),
        ("k", 10, "list length K"),
        ("metric", "serp", "similarity metric"),
        ("variant", "fairllm", "metric variant"),
        ("language", "de", "prompt language"),
        ("perturbation", "typos", "prompt perturbation"),
        ("repeats", 3, "number of repeats"),
        ("domain", "music", "domain"),
    ],
)
def test_incompatibility_names_the_field(field: str, value: object, label: str) -> None:
    base = meta()
    msg = baselines.incompatibility(base, meta(**{field: value}))
    assert msg is not None
    assert f"{label} ({field}: baseline " in msg
    shown = repr(value) if not (isinstance(value, str) and len(value) > 16) else value[:12]
    assert shown in msg
    assert msg.endswith("pytest --fairness --fairness-update 'tests/test_audit.py::test_religion'")


def test_incompatibility_lists_every_difference() -> None:
    msg = baselines.incompatibility(meta(), meta(k=10, language="de"))
    assert msg is not None
    assert "list length K" in msg
    assert "prompt language" in msg


def test_incompatibility_wants_meta() -> None:
    with pytest.raises(TypeError, match="AuditMeta"):
        baselines.incompatibility(audit(), meta())  # type: ignore[arg-type]


# --- the missing policy ------------------------------------------------------------------------

# the list-overlap demo baselines (audits/test_demo.py) were written before the field
# (found by the test id inside, since baselines are named by test name); except
# test_default_grid, taken again from the replay once replay gave each case its own reply
DEMO_BASELINES = [
    path
    for path in sorted((Path(__file__).parents[2] / "baselines").glob("*.json"))
    if json.loads(path.read_text(encoding="utf-8"))["meta"]["test_id"].startswith(
        "audits/test_demo.py::"
    )
    and path.stem != "test_default_grid"
]
assert len(DEMO_BASELINES) >= 5, "the list-overlap demo baselines moved: update this glob"


@pytest.mark.parametrize("path", DEMO_BASELINES, ids=lambda p: p.stem)
def test_baselines_without_a_missing_policy_read_as_zero(path: Path) -> None:
    # the demo baselines predate the field: they were written with the default policy
    assert "missing" not in json.loads(path.read_text(encoding="utf-8"))["meta"]
    stored = baselines.load(path)
    assert stored.meta.missing == "zero"
    assert {a.missing_policy for a in stored.attributes} == {"zero"}
    assert baselines.incompatibility(stored.meta, replace(stored.meta, missing="zero")) is None
    problem = baselines.incompatibility(stored.meta, replace(stored.meta, missing="skip"))
    assert problem is not None
    assert "different missing policy (missing: baseline 'zero', this run 'skip')" in problem


def test_missing_policy_round_trips(tmp_path: Path) -> None:
    result = replace(audit(), meta=replace(meta(), missing="skip"))
    path = tmp_path / "b.json"
    baselines.write(path, result)
    assert json.loads(path.read_text(encoding="utf-8"))["meta"]["missing"] == "skip"
    assert baselines.load(path).meta.missing == "skip"


# --- the parse style -----------------------------------------------------------------------


def test_parse_style_round_trips_and_refuses_a_different_parser(tmp_path: Path) -> None:
    result = replace(audit(), meta=replace(meta(), parse="fairllm"))
    path = tmp_path / "b.json"
    baselines.write(path, result)
    assert json.loads(path.read_text(encoding="utf-8"))["meta"]["parse"] == "fairllm"
    stored = baselines.load(path)
    assert stored.meta.parse == "fairllm"
    problem = baselines.incompatibility(stored.meta, replace(stored.meta, parse="default"))
    assert problem is not None
    assert "reply parse style (parse: baseline 'fairllm', this run 'default')" in problem


@pytest.mark.parametrize(
    ("variant", "implied"), [("fairllm", "fairllm"), ("normalized", "default")]
)
def test_baselines_without_a_parse_style_read_as_the_variant_implied(
    tmp_path: Path, variant: str, implied: str
) -> None:
    # before the field existed, the variant chose the parser
    path = tmp_path / "b.json"
    baselines.write(path, replace(audit(), meta=replace(meta(), variant=variant)))
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["meta"]["parse"]
    path.write_text(json.dumps(data), encoding="utf-8")
    assert baselines.load(path).meta.parse == implied


@pytest.mark.parametrize("path", DEMO_BASELINES, ids=lambda p: p.stem)
def test_demo_baselines_read_with_the_default_parser(path: Path) -> None:
    assert baselines.load(path).meta.parse == "default"
