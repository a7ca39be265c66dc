"""AuditSettings: merge order CLI > marker > ini > defaults, and validation messages."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_recfair.errors import ConfigError
from pytest_recfair.settings import (
    CLI_KEYS,
    INI_KEYS,
    MARKER_KEYS,
    AuditSettings,
    resolve,
    validate_marker,
)


def test_defaults() -> None:
    s = resolve()
    assert s == AuditSettings()
    assert (s.attr, s.metric, s.k, s.record_mode, s.alpha) == (None, "jaccard", 25, "none", 0.05)
    assert s.metrics == ("jaccard",)
    assert s.gated == ("snsr",)
    # the only threshold on by default: at most 20% of replies without a usable list
    assert s.thresholds() == {"max_unusable": 0.2}


def test_precedence_cli_over_marker_over_ini() -> None:
    ini = {"recfair_entities": "30", "recfair_k": "20", "recfair_metric": "serp"}
    marker = {"entities": 10, "metric": "prag"}
    s = resolve(ini=ini, marker=marker)
    assert (s.entities, s.k, s.metric) == (10, 20, "prag")
    s = resolve(ini=ini, marker=marker, cli={"fairness_entities": 5})
    assert (s.entities, s.k, s.metric) == (5, 20, "prag")


def test_absent_cli_values_do_not_mask_lower_layers() -> None:
    cli = dict.fromkeys(CLI_KEYS) | {"fairness_update": False}
    s = resolve(cli=cli, ini={"recfair_update": "true", "recfair_seed": "9"})
    assert s.update is True
    assert s.seed == 9


def test_empty_ini_values_are_not_given() -> None:
    s = resolve(ini=dict.fromkeys(INI_KEYS, ""))
    assert s == AuditSettings()


def test_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolve().k = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("all", ("jaccard", "serp", "prag")),
        ("serp, prag", ("serp", "prag")),
        (["prag", "jaccard"], ("prag", "jaccard")),
        ("PRAG", ("prag",)),
    ],
)
def test_metric_lists(value: object, expected: tuple[str, ...]) -> None:
    assert resolve(marker={"metric": value}).metrics == expected


def test_thresholds_only_the_set_ones() -> None:
    s = resolve(marker={"max_snsr": 0.1, "min_pafs": 0.9, "max_unusable": None})
    assert s.thresholds() == {"max_snsr": 0.1, "min_pafs": 0.9}


@pytest.mark.parametrize(
    ("value", "gated"),
    [("snsr", ("snsr",)), ("all", ("snsr", "snsv", "pafs")), (["pafs", "snsr"], ("pafs", "snsr"))],
)
def test_gate_names_the_gated_statistics(value: object, gated: tuple[str, ...]) -> None:
    assert resolve(marker={"gate": value}).gated == gated
    assert resolve(ini={"recfair_gate": "all"}).gated == ("snsr", "snsv", "pafs")


def test_gate_rejects_unknown_statistics() -> None:
    with pytest.raises(ConfigError, match="gate='entropy' \\(marker\\): expected one of 'snsr'"):
        resolve(marker={"gate": "entropy"})


def test_resample_seed_is_separate_from_the_subsample_seed() -> None:
    s = resolve(cli={"fairness_seed": 3}, ini={"recfair_resample_seed": "9"})
    assert (s.seed, s.resample_seed) == (3, 9)


@pytest.mark.parametrize(
    ("marker", "fragment"),
    [
        ({"k": 0}, "k=0 (marker): expected an integer >= 1"),
        ({"k": 2.5}, "k=2.5 (marker): expected an integer >= 1"),
        ({"metric": "ndcg"}, "metric='ndcg' (marker): expected one of 'jaccard'"),
        ({"metric": ["serp", "serp"]}, "expected one of 'jaccard'"),
        ({"max_snsv": -0.1}, "max_snsv=-0.1 (marker): expected a number in [0.0, 1.0]"),
        ({"tolerance": "lots"}, "tolerance='lots' (marker): expected a finite number >= 0.0"),
        ({"missing": "drop"}, "expected one of 'zero', 'skip'"),
        ({"attr": ""}, "attr='' (marker): expected a non-empty string"),
    ],
)
def test_bad_values_name_key_and_expectation(marker: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_marker((), marker, where="t.py::test")
    assert fragment in str(info.value)
    assert "@fairness on t.py::test" in str(info.value)


def test_unknown_marker_argument_names_the_nearest_one() -> None:
    """Issue 34 point 5: the nearest argument, not a list of every one."""
    with pytest.raises(ConfigError) as info:
        validate_marker((), {"max_snr": 0.1, "colour": 1})
    message = str(info.value)
    assert "'max_snr': did you mean 'max_snsr'?" in message
    assert "'colour'" in message
    assert f"the {len(MARKER_KEYS)} marker arguments are listed in docs/configuration.md" in message
    assert ", ".join(MARKER_KEYS[:4]) not in message


def test_positional_marker_arguments_rejected() -> None:
    with pytest.raises(ConfigError, match="keyword arguments only"):
        validate_marker(("religion",), {})


def test_unknown_ini_key_lists_allowed() -> None:
    with pytest.raises(ConfigError, match=r"unknown ini key 'recfair_colour'.*recfair_attr"):
        resolve(ini={"recfair_colour": "red"})


def test_bad_cli_value_names_source() -> None:
    with pytest.raises(ConfigError, match=r"alpha=0\.7 \(command-line\)"):
        resolve(cli={"fairness_alpha": 0.7})


def test_bool_parsing_from_ini() -> None:
    assert resolve(ini={"recfair_update": "yes"}).update is True
    assert resolve(ini={"recfair_update": "off"}).update is False
    with pytest.raises(ConfigError, match="expected true or false"):
        resolve(ini={"recfair_update": "maybe"})


def test_choice_settings_take_exactly_the_vocabularies() -> None:
    from pytest_recfair import vocab

    assert resolve(marker={"metric": "all"}).metrics == vocab.METRICS
    for key, choices in (("variant", vocab.VARIANTS), ("missing", vocab.MISSING_POLICIES)):
        assert tuple(getattr(resolve(marker={key: c}), key) for c in choices) == choices
        with pytest.raises(ConfigError, match=key):
            resolve(marker={key: "other"})
