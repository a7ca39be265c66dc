"""Evidence behind a failing attribute (issue 25 point 6): the list-overlap keeper's bound
and shard merge, the entities it names, the rendering in each channel, the secrets
scrub of reply text, and the Markdown report's short paths (point 10)."""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pytest_recfair import api, secrets
from pytest_recfair.engine.overlap import evidence as keeper_mod
from pytest_recfair.engine.overlap.evidence import KEEP, SHOW, Keeper, compare_lists, reply_text
from pytest_recfair.gate import thresholds as gate
from pytest_recfair.report.failures import evidence_html, evidence_lines, failing
from pytest_recfair.report.html_report import to_html
from pytest_recfair.report.markdown import short_paths, to_markdown
from pytest_recfair.report.terminal import terminal_summary
from pytest_recfair.results import AuditResult
from pytest_recfair.sim.recommender import SimulatedRecommender
from tests.support import synth_results

VALUES = ("Buddhist", "Muslim", "Christian")


# --- the keeper: bounded, and shards merge to the unsharded keeper ---------------------


def _fake_chunk(ids: list[str], sims: np.ndarray, all_ids: list[str]) -> tuple[Any, ...]:
    """Replies of ``ids`` (neutral + one per value) and a tally-like object holding the
    similarity rows of every entity of the audit (what the keeper reads)."""
    raw = []
    for e in ids:
        for v in (None, *VALUES):
            case = SimpleNamespace(
                id=f"{e}/{v}", entity_id=e, entity=f"name {e}", attribute=None if v is None
                else "religion", value=v, repeat=0,
            )  # fmt: skip
            raw.append(SimpleNamespace(case=case, items=[f"{e} {v} {i}" for i in range(5)]))
    completions = {r.case.id: SimpleNamespace(text=f"reply of {r.case.id}") for r in raw}
    tally = SimpleNamespace(
        config=SimpleNamespace(metrics=("jaccard",)),
        attributes={"religion": SimpleNamespace(values=VALUES, sims={"jaccard": sims})},
        index={e: i for i, e in enumerate(all_ids)},
    )
    return raw, raw, completions, tally


def _keeper(order: list[str], sims: np.ndarray, ids: list[str], chunk: int) -> Keeper:
    k = Keeper()
    for start in range(0, len(order), chunk):
        k.add(*_fake_chunk(order[start : start + chunk], sims, ids))
    return k


def test_keeper_is_bounded_and_keeps_the_widest_spreads() -> None:
    rng = np.random.default_rng(3)
    ids = [f"e{i:02d}" for i in range(60)]
    sims = rng.uniform(0, 1, size=(60, len(VALUES)))
    k = _keeper(ids, sims, ids, 7)
    kept = k.kept["religion"]
    assert len(kept) == KEEP
    spreads = sims.max(axis=1) - sims.min(axis=1)
    widest = sorted(range(60), key=lambda i: (-spreads[i], i))[:KEEP]
    assert [c.row for c in kept] == widest
    for c in kept:  # each candidate holds its neutral and every value's list and reply
        assert set(c.lists) == {"", *VALUES}
        assert c.lists["Muslim"][2] == f"reply of {c.entity}/Muslim"


def test_shard_keepers_merge_to_the_unsharded_keeper() -> None:
    rng = np.random.default_rng(5)
    ids = [f"e{i:02d}" for i in range(50)]
    sims = rng.uniform(0, 1, size=(50, len(VALUES)))
    sims[rng.uniform(size=sims.shape) < 0.05] = np.nan  # skipped cells
    whole = _keeper(ids, sims, ids, 50)
    for n in (2, 3, 7):
        merged = Keeper()
        for i in range(n):
            part = _keeper(ids[i::n], sims, ids, 4)
            # through JSON, as shard files travel
            merged.absorb(Keeper.from_dict(json.loads(json.dumps(part.to_dict()))))
        assert merged.to_dict() == whole.to_dict()


def test_compare_lists_by_title_key() -> None:
    diff = compare_lists(["A", "B", "C"], ["a", "b", "c"], ["b!", "D"], ["b", "d"])
    assert diff == {"kept": ["b!"], "dropped": ["A", "C"], "added": ["D"]}


def test_reply_text_is_scrubbed_and_cut() -> None:
    key = "sk-evidence-planted-key-0123456789"
    secrets.register([key])
    shown = reply_text(f"1. Film\nkey={key}\n" + "x" * 10_000)
    assert key not in shown
    assert len(shown) <= keeper_mod.MAX_REPLY + 10


# --- the entities named, from a real audit -----------------------------------------------


@pytest.fixture(scope="module")
def audited() -> AuditResult:
    sim = SimulatedRecommender(bias="demo", noise=0.08, seed=7)
    return api.audit(sim, attr="religion", entities=30, seeds="directors")


def test_overlap_evidence_rows_are_the_entities_share_of_the_gap(audited: AuditResult) -> None:
    entry = audited.evidence["religion"]
    rows = entry["rows"]
    assert 3 <= len(rows) <= SHOW
    (a,) = audited.attributes
    means = {v.value: v for v in a.values}
    hi = max(means.values(), key=lambda v: v.mean.value)
    lo = min(means.values(), key=lambda v: v.mean.value)
    assert f"{hi.value} − {lo.value}" in entry["what"]
    m = a.matrix
    assert m is not None
    i, j = m.values.index(hi.value), m.values.index(lo.value)
    for row in rows:
        e = m.entities.index(row["id"])
        want = np.nan_to_num(m.sims[e, i]) / hi.n - np.nan_to_num(m.sims[e, j]) / lo.n
        assert math.isclose(row["score"], float(want), rel_tol=1e-12, abs_tol=1e-15)
        labels = [lst["label"] for lst in row["lists"]]
        assert labels == ["neutral", hi.value, lo.value]
        neutral = row["lists"][0]["titles"]
        for lst in row["lists"][1:]:
            assert sorted(lst["kept"] + lst["added"]) == sorted(lst["titles"])
            assert set(lst["dropped"]) <= set(neutral)
            assert lst["reply"]
    scores = [r["score"] for r in rows]
    assert scores == sorted(scores, reverse=True)


# --- rendering: only failing attributes, in every channel -------------------------------


def _gated(evidence: dict[str, Any]) -> AuditResult:
    base = synth_results.audit(seed=0, gender=True)
    now = synth_results.audit(seed=7, gender=True, bias={"Islamic": -0.2}, model="sim-v2")
    gated = replace(now, gate=gate.evaluate(now, base, gate.Thresholds(), tolerance=0.02))
    return replace(gated, evidence=evidence)


def _entry(attr: str) -> dict[str, Any]:
    rows = [
        {
            "entity": f"<b>{attr} director {n}</b>",
            "score": 0.01 * (3 - n),
            "why": f"+0.0{3 - n} of the gap",
            "lists": [
                {"label": "neutral", "titles": ["Alpha", "Beta", "Gamma"], "reply": "1. Alpha"},
                {
                    "label": "Muslim",
                    "titles": ["Alpha", "Delta"],
                    "kept": ["Alpha"],
                    "dropped": ["Beta", "Gamma"],
                    "added": ["Delta"],
                    "reply": "<script>x</script>",
                },
            ],
        }
        for n in range(3)
    ]
    return {"what": f"entities behind {attr}", "rows": rows}


def test_channels_show_evidence_of_failing_attributes_only() -> None:
    r = _gated({"religion": _entry("religion"), "gender": _entry("gender")})
    assert r.gate is not None
    assert not r.gate.passed
    failed = {f.attribute for f in r.gate.failures}
    assert "religion" in failed
    assert "gender" not in failed
    assert [a for a, _ in failing(r)] == ["religion"]
    html = evidence_html(r)
    assert html.count('<details class="row">') == 3
    assert html.count('<table class="lists">') == 3
    assert "&lt;script&gt;" in html
    assert "<script>" not in html
    assert "gender director" not in html
    assert "kept 1, dropped 2, added 1" in html
    page = to_html([r])
    assert "Evidence: religion" in page
    assert "gender director" not in page
    md = to_markdown([r])
    assert "**Evidence, religion**" in md
    assert md.count("religion director") == 3
    assert "Muslim: kept 1, dropped 2, added 1; added Delta" in md
    lines = " ".join(" ".join(terminal_summary([r], 100, verbose=True)).split())
    assert "evidence religion: entities behind religion" in lines
    assert lines.count("religion director") == 3
    quiet = " ".join(terminal_summary([r], 100))
    assert "religion director" not in quiet
    assert evidence_lines(replace(r, gate=None)) == []


def test_json_round_trip_keeps_evidence_and_baselines_drop_it() -> None:
    from pytest_recfair.gate import baselines

    r = _gated({"religion": _entry("religion")})
    back = AuditResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.evidence == r.evidence
    assert "evidence" not in baselines.to_dict(r)


# --- point 10: no absolute temporary paths in the Markdown report ----------------------


def test_markdown_paths_relative_to_rootdir_or_basename(tmp_path: Path) -> None:
    temp = Path(tempfile.gettempdir()) / "pytest-of-x" / "p0" / "baselines" / "t.json"
    text = (
        f"expected {temp}. Written {tmp_path / 'base' / 'a.json'}, see "
        "https://example.org/a/b and /usr/share/doc."
    )
    out = short_paths(text, base=tmp_path)
    assert "expected t.json." in out
    assert "Written base/a.json," in out
    assert "https://example.org/a/b" in out
    assert "/usr/share/doc." in out
    assert str(Path(tempfile.gettempdir())) not in out


def _plain(value: Any) -> bool:
    """Only the builtin JSON types (xdist's execnet refuses numpy scalars)."""
    if isinstance(value, dict):
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return type(value) in (str, int, float, bool, type(None))


def test_evidence_is_plain_data(audited: AuditResult) -> None:
    assert audited.evidence
    assert _plain(audited.evidence)


def test_no_secret_in_titles_or_replies_shown() -> None:
    """A reply quoting a key (in a title and in the text) shows it scrubbed everywhere."""
    key = "sk-evidence-title-key-0123456789abcdef"
    secrets.register([key])

    def recommend(prompt: str) -> str:
        salt = sum(map(ord, prompt)) % 7
        titles = [f"Film {salt + i}" for i in range(9)]
        return "\n".join(f"{i + 1}. {t}" for i, t in enumerate([f"Key {key}", *titles]))

    result = api.audit(recommend, attr="religion", entities=8, seeds="directors", k=10)
    assert result.evidence["religion"]["rows"]
    text = json.dumps(result.evidence)
    assert key not in text
    assert "Key " in text  # the title is there, without the key
