"""Models side by side (sidebyside.py and report/sidebyside.py), on synthetic results."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pytest_recfair.compare.models import ModelComparison, ModelSlot, compare_models
from pytest_recfair.report import terminal as render
from pytest_recfair.report.html_report import to_html
from pytest_recfair.report.markdown import to_json, to_markdown
from pytest_recfair.results import AuditResult
from tests.support import synth_results


def _result(model: str, bias: dict[str, float] | None = None, seed: int = 0) -> AuditResult:
    r = synth_results.audit(
        seed=seed,
        bias=bias or {},
        gender=True,
        model=model,
        test_id=f"tests/test_a.py::test_x[{model}]",
    )
    return r


def _slots(*labels: str, group: str = "tests/test_a.py::test_x") -> dict[str, ModelSlot]:
    return {
        f"tests/test_a.py::test_x[{label}]": ModelSlot(group, label, i, n_resamples=500)
        for i, label in enumerate(labels)
    }


def _results(*pairs: tuple[str, dict[str, float] | None, int]) -> dict[str, AuditResult]:
    return {r.meta.test_id: r for r in (_result(m, b, s) for m, b, s in pairs)}


def test_two_models_one_clearly_biased() -> None:
    results = _results(("fair", None, 1), ("biased", {"Islamic": -0.25}, 2))
    (c,) = compare_models(results, _slots("fair", "biased"))
    assert c.models == ("fair", "biased")
    assert c.model_ids == ("fair", "biased")
    religion = c.attributes.index("religion")
    fair, biased = c.snsr[religion]
    assert fair is not None
    assert biased is not None
    assert fair.value < biased.value
    row = next(p for p in c.pairs if p.attribute == "religion")
    assert row.fairer == "fair"
    assert row.p_value is not None
    assert row.p_value <= c.alpha
    assert "fair is significantly fairer than biased" in render.pair_text(row)


def test_order_follows_the_parameters_not_the_arrival() -> None:
    results = _results(("m1", None, 1), ("m2", None, 2))
    slots = _slots("m1", "m2")
    backwards = dict(reversed(list(results.items())))
    assert compare_models(backwards, dict(reversed(list(slots.items())))) == compare_models(
        results, slots
    )


def test_a_single_model_or_no_slot_is_not_compared() -> None:
    results = _results(("m1", None, 1), ("m2", None, 2))
    assert compare_models(results, {}) == []
    one = dict(list(_slots("m1", "m2").items())[:1])
    assert compare_models(results, one) == []


def test_three_models_adjust_over_pairs() -> None:
    results = _results(("a", None, 1), ("b", None, 2), ("c", {"Islamic": -0.25}, 3))
    (c,) = compare_models(results, _slots("a", "b", "c"))
    assert {(p.a, p.b) for p in c.pairs} == {("a", "b"), ("a", "c"), ("b", "c")}
    slot = next(iter(_slots("a").values()))
    two = compare_models(
        {k: v for k, v in results.items() if "[c]" not in k},
        {k: replace(slot, label=k[-2], index=i) for i, k in enumerate(list(results)[:2])},
    )
    ab3 = [p for p in c.pairs if (p.a, p.b) == ("a", "b")]
    ab1 = two[0].pairs
    for p3, p1 in zip(ab3, ab1, strict=True):
        assert p3.p_value == pytest.approx(min(1.0, 3 * p1.p_value), rel=1e-9)  # type: ignore[operator]


def test_round_trip_and_every_format() -> None:
    results = _results(("fair", None, 1), ("biased", {"Islamic": -0.25}, 2))
    models = compare_models(results, _slots("fair", "biased"))
    again = [ModelComparison.from_dict(json.loads(json.dumps(m.to_dict()))) for m in models]
    assert again == models
    rs = list(results.values())
    data = json.loads(to_json(rs, models=models))
    assert data["models"][0]["models"] == ["fair", "biased"]
    assert any("significantly fairer" in p["message"] for p in data["models"][0]["pairs"])
    assert "models" not in json.loads(to_json(rs))
    md = to_markdown(rs, models=models)
    assert "| attribute | fair | biased |" in md
    html = to_html(rs, models=models)
    assert "<th>attribute</th><th>fair</th><th>biased</th>" in html
    assert "Models side by side" not in to_html(rs)


def test_terminal_fits_the_width() -> None:
    labels = ("model-alpha", "model-beta", "model-gamma", "model-delta")
    results = _results(*((m, None, i) for i, m in enumerate(labels)))
    models = compare_models(results, _slots(*labels))
    for width in (80, 120):
        lines = render.terminal_lines(models, width)
        assert all(len(line) <= width for line in lines), width
    wide = render.terminal_lines(models, 120)
    assert any(line.split()[:1] == ["attribute"] for line in wide)  # a table at 120
    narrow = render.terminal_lines(models, 80)
    assert any(line.lstrip().startswith("religion: model-alpha ") for line in narrow)  # one a line


def test_unusable_attribute_reads_na() -> None:
    results = _results(("m1", None, 1), ("m2", None, 2))
    r = results["tests/test_a.py::test_x[m1]"]
    a = r.attributes[0]
    broken = replace(a, matrix=replace(a.matrix, missing=np.ones_like(a.matrix.missing)))
    results[r.meta.test_id] = replace(r, attributes=(broken, *r.attributes[1:]))
    (c,) = compare_models(results, _slots("m1", "m2"))
    assert c.snsr[0][0] is not None
    assert np.isnan(c.snsr[0][0].value)
    assert all(p.attribute != a.attribute for p in c.pairs)


def test_a_stored_run_renders_its_models_again(tmp_path: Path) -> None:
    """`python -m pytest_recfair report RUN.json` gives the side-by-side section back."""
    from pytest_recfair.report.history import parse_run
    from pytest_recfair.report.registry import render

    results = _results(("fair", None, 1), ("biased", {"Islamic": -0.25}, 2))
    models = compare_models(results, _slots("fair", "biased"))
    rs = list(results.values())
    text = to_json(rs, models=models)
    run = parse_run(text, tmp_path / "run.json")
    assert run.models == tuple(models)
    for fmt in (".json", ".md", ".html"):
        again = render(fmt, run.results, run.baselines, models=run.models)
        assert again == render(fmt, rs, None, models=models)
