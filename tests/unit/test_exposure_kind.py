"""engine/exposure.py's set-up: groups, reference and popularity from the catalogue and a
history file, and the one-line errors that stop an audit before any request."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pytest_recfair.engine.exposure import setup
from pytest_recfair.errors import RecfairError
from pytest_recfair.replies.catalogue import catalogue_from_records
from pytest_recfair.settings import AuditSettings

CATALOGUE = catalogue_from_records(
    [{"id": f"c{i}", "title": f"Cafe {i:02d}", "genre": "ab"[i % 2], "plays": i * 10 + 1}
     for i in range(10)]
)  # fmt: skip


def test_history_by_id_and_title_with_counts_gives_the_reference_and_popularity(
    tmp_path: Path,
) -> None:
    rows = [{"id": "c1", "count": 3}, {"title": "Cafe 02"}, {"title": "Nowhere Diner"}]
    (tmp_path / "h.json").write_text(json.dumps(rows), encoding="utf-8")
    su = setup(AuditSettings(item_field="genre", reference="h.json"), CATALOGUE, (tmp_path,))
    assert su.groups == ("a", "b")
    assert su.reference.tolist() == [0.25, 0.75]  # Cafe 02 is "a" once, c1 "b" three times
    assert su.history == {"source": str(tmp_path / "h.json"), "matched": 2, "total": 3}
    assert su.quantile is not None
    assert int(np.argmax(su.quantile)) == 1  # the most interacted item is the most popular


def test_bins_make_popularity_groups_and_the_catalogue_is_the_reference() -> None:
    su = setup(AuditSettings(item_field="plays", bins=5), CATALOGUE, ())
    assert su.groups == ("Q1", "Q2", "Q3", "Q4", "Q5")
    assert su.reference.tolist() == [0.2] * 5
    assert su.group_of.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (AuditSettings(item_field="genre", bins=3), "bins=3.*'genre'.*is text"),
        (AuditSettings(item_field="genre,plays"), "groups items by one catalogue field"),
        (AuditSettings(item_field="genre", reference="none.csv"), "no such history file"),
    ],
)
def test_bad_settings_are_one_clear_error(settings: AuditSettings, message: str) -> None:
    with pytest.raises(RecfairError, match=message):
        setup(settings, CATALOGUE, ())
    with pytest.raises(RecfairError, match="needs a catalogue"):
        setup(AuditSettings(item_field="genre"), None, ())


def test_the_plan_sizes_the_gated_mgu_not_the_reported_dgu() -> None:
    """The plan's hook: MGU's SE from its 95% interval, a Holm family of the drift measures
    the baseline measured (no popularity: MGU alone; with it: MGU, long tail, lift)."""
    from statistics import NormalDist

    from pytest_recfair.engine.exposure import ExposureSections

    data = {"field": "price", "mgu_ci": [0.01, 0.03], "dgu_ci": [0.0, 0.5], "n_entities": 40,
            "mgu": 0.02, "long_tail": None, "lift": [None, None]}  # fmt: skip
    ((label, se, n, m),) = ExposureSections().resolution(data, None)
    assert label == "price exposure · MGU"
    assert se == pytest.approx(0.02 / (2 * NormalDist().inv_cdf(0.975)))
    assert (n, m) == (40, 1)
    popular = {**data, "long_tail": 0.4, "lift": [0.1, -0.2]}
    assert ExposureSections().resolution(popular, None)[0][3] == 3
    assert ExposureSections().resolution({**data, "mgu_ci": None}, None) == []
