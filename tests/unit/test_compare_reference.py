"""compare.runs: the --fairness-compare-fail grammar and the comparison of one audit
with a reference run (the pytest runs are in tests/integration/test_plugin_history_compare.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_recfair.compare.runs import (
    Reference,
    Rule,
    apply_reference,
    figures,
    load_reference,
    parse_rules,
)
from pytest_recfair.errors import ConfigError
from pytest_recfair.report.markdown import to_json
from pytest_recfair.results import AuditResult
from tests.support.synth_results import audit


def test_rules_parse_names_signs_and_percentages() -> None:
    rules = parse_rules("snsr:0.02, religion.PAFS:-5%,unusable:+0.1")
    assert rules == (
        Rule(("snsr",), 0.02, False, 0),
        Rule(("religion", "pafs"), 5.0, True, -1),
        Rule(("unusable",), 0.1, False, 1),
    )
    assert [r.text() for r in rules] == ["snsr:0.02", "religion.pafs:-5%", "unusable:+0.1"]
    for bad in ("snsr", "snsr:", ":0.1", "snsr:abc", "snsr:0.1,", "snsr:-"):
        with pytest.raises(ConfigError, match="NAME:\\[\\+\\|-\\]LIMIT"):
            parse_rules(bad)


def test_a_rule_picks_by_the_last_part_and_any_other_named() -> None:
    (r,) = parse_rules("religion.snsr:0.1")
    assert r.picks("religion.jaccard.snsr")
    assert not r.picks("gender.jaccard.snsr")
    assert not r.picks("religion.jaccard.snsv")
    (any_snsr,) = parse_rules("snsr:0.1")
    assert any_snsr.picks("gender.serp.snsr")
    # the worse direction: a rise, a fall where higher is fairer, or as the sign says
    assert any_snsr.worse("x.jaccard.snsr") == 1
    assert parse_rules("pafs:0.1")[0].worse("x.jaccard.pafs") == -1
    assert parse_rules("pafs:+0.1")[0].worse("x.jaccard.pafs") == 1


def _fig(r: AuditResult, key: str) -> float:
    return figures(r)[key]


def test_only_a_change_beyond_the_limit_in_the_worse_direction_fails() -> None:
    before = audit(seed=0)
    after = audit(seed=7, bias={"Islamic": -0.12})
    key = "religion.jaccard.snsr"
    rise = _fig(after, key) - _fig(before, key)
    assert rise > 0
    ref = Reference("history entry 0003_x.json (abc1234)", {before.meta.test_id: before})
    gated = replace(after, gate=None)
    # just above the rise: passes; just below: fails, naming the reference
    assert apply_reference(gated, ref, parse_rules(f"snsr:{rise * 1.01}")).gate.passed  # type: ignore[union-attr]
    out = apply_reference(gated, ref, parse_rules(f"snsr:{rise * 0.99}")).gate
    assert out is not None
    (f,) = out.failures
    assert (f.kind, f.attribute, f.baseline, f.value) == (
        "compare",
        "religion",
        _fig(before, key),
        _fig(after, key),
    )
    assert "history entry 0003_x.json (abc1234)" in (f.detail or "")
    # relative: the same rise as a share of the reference value
    pct = 100 * rise / _fig(before, key)
    assert apply_reference(gated, ref, parse_rules(f"snsr:{pct * 1.01}%")).gate.passed  # type: ignore[union-attr]
    assert not apply_reference(gated, ref, parse_rules(f"snsr:{pct * 0.99}%")).gate.passed  # type: ignore[union-attr]
    # the fairer way round never fails
    back = Reference("r", {after.meta.test_id: after})
    assert apply_reference(replace(before, gate=None), back, parse_rules("snsr:0")).gate.passed  # type: ignore[union-attr]


def test_a_test_not_in_the_reference_is_a_note_and_other_settings_fail() -> None:
    r = replace(audit(seed=0), gate=None)
    empty = Reference("r", {})
    out = apply_reference(r, empty, parse_rules("snsr:0.1")).gate
    assert out is not None
    assert out.passed
    assert out.notes == ("not in the reference r: not compared",)
    other_k = audit(seed=0, k=10)
    ref = Reference("r", {r.meta.test_id: other_k})
    gated = apply_reference(r, ref, parse_rules("snsr:0.1")).gate
    assert gated is not None
    assert not gated.passed
    assert "not compared with the reference r" in (gated.failures[0].detail or "")


def test_a_reference_is_a_file_or_a_history_entry(tmp_path: Path) -> None:
    from pytest_recfair.report.history import append_run

    (tmp_path / "run.json").write_text(to_json([audit()]), encoding="utf-8")
    ref = load_reference("run.json", history_dir=None, cwd=tmp_path)
    assert ref.label == "--fairness-compare run.json"
    assert list(ref.results) == [audit().meta.test_id]
    hist = tmp_path / "hist"
    append_run(hist, [audit()], env={"GITHUB_SHA": "0123456789" * 4})
    entry = load_reference("latest", history_dir=hist, cwd=tmp_path)
    assert entry.label.startswith("history entry 0001_")
    assert "(0123456," in entry.label
    with pytest.raises(ConfigError, match="no such file"):
        load_reference("nope.json", history_dir=None, cwd=tmp_path)
    with pytest.raises(ConfigError, match="no such entry"):
        load_reference("9", history_dir=hist, cwd=tmp_path)


def test_another_kind_is_compared_through_its_own_figures() -> None:
    """A role-play audit (no list-overlap attributes): the rules pick its JUnit figures."""
    from pytest_recfair.engine.base import AuditRequest
    from pytest_recfair.engine.stream import measure
    from pytest_recfair.prompts.grids import load_grid
    from pytest_recfair.settings import resolve
    from pytest_recfair.sim.recommender import SimulatedRecommender

    s = resolve(marker={"kind": "roleplay", "attr": "religion"})
    grid = load_grid("faireval")
    result = measure(AuditRequest(s, SimulatedRecommender("demo", seed=1), [], grid, "t"))
    found = figures(result)
    rates = {k: v for k, v in found.items() if k.endswith(".biased_rate")}
    assert rates
    assert not any(k.endswith(".snsr") for k in found)
    key, rate = max(rates.items(), key=lambda kv: kv[1])
    assert rate > 0  # the demo model is biased somewhere
    # the reference had none biased: the rate's rise fails, naming the figure
    ref_data = {**result.extras["roleplay"]}
    ref_data["cells"] = [{**c, "rate": 0.0, "biased": 0} for c in ref_data["cells"]]
    ref = replace(result, extras={**result.extras, "roleplay": ref_data})
    out = apply_reference(result, Reference("r", {"t": ref}), parse_rules("biased_rate:0"))
    assert out.gate is not None
    details = [f.detail or "" for f in out.gate.failures]
    assert any(d.startswith(f"{key} rose by") for d in details)
    assert len(details) == sum(1 for v in rates.values() if v > 0)
