"""Typed settings: each setting declared once, values stored parsed, run-level options."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_recfair import settings
from pytest_recfair.errors import ConfigError
from pytest_recfair.report.history import check_history_dir
from pytest_recfair.report.registry import check_report_path
from pytest_recfair.settings import AuditSettings, resolve
from pytest_recfair.settings.values import Prices, RunSettings, Shard, resolve_run

# the marker arguments as they were written out by hand before the declarations
MARKER_KEYS_BEFORE = [
    "attr",
    "metric",
    "k",
    "variant",
    "max_snsr",
    "max_snsv",
    "min_pafs",
    "max_entropy",
    "max_refusal_gap",
    "max_unusable",
    "max_failed",
    "tolerance",
    "gate",
    "domain",
    "seeds",
    "entities",
    "repeats",
    "language",
    "perturbation",
    "grid",
    "templates",
    "missing",
    "parse",
    "item_field",
    "catalogue",
    "max_shift",
    "reference",
    "bins",
    "max_exposure_gap",
    "min_long_tail_share",
    "max_popularity_lift",
    "candidates",
    "orders",
    "pick",
    "max_position_bias",
    "max_missed_rate",
    "kind",
    "questions",
    "oracle",
    "max_biased",
    "with_role",
    "role_effect",
    "absent",
    "model",
    "intercept",
    "baseline",
    "timeout",
    "max_retries",
    "temperature",
    "max_tokens",
    "sampling_seed",
    "system",
    "role",
    "extra_headers",
    "prices",
    "max_reply_chars",
    "baseline_floor",
    "baseline_noise_limit",
    # issue 23.6: quality beside fairness (appended, one block)
    "min_quality",
    "max_quality_gap",
    "quality_tolerance",
    "quality_field",
]


def test_keys_are_derived_from_one_declaration_per_field() -> None:
    assert list(settings.MARKER_KEYS) == MARKER_KEYS_BEFORE
    assert set(settings.SETTINGS) == set(settings.DEFAULTS)
    assert len(settings.SETTINGS) == len(dataclasses.fields(AuditSettings))
    assert "recfair_model" not in settings.INI_KEYS  # the HTTP provider's model
    assert len(settings.INI_KEYS) == len(settings.SETTINGS) - 1
    assert settings.CLI_KEYS == {
        "fairness_entities": "entities",
        "fairness_repeats": "repeats",
        "fairness_record": "record_mode",
        "fairness_update": "update",
        "fairness_concurrency": "concurrency",
        "fairness_update_force": "update_force",
        "fairness_seed": "seed",
        "fairness_alpha": "alpha",
        "fairness_batch": "batch",
        "fairness_plan": "plan",
        "fairness_explore": "explore",
    }


def test_every_ini_key_has_help() -> None:
    assert settings.SETTINGS["prices"][1].help.startswith("USD per million")
    assert settings.SETTINGS["k"][1].help == "default for @fairness(k=...)"
    assert all(settings.SETTINGS[k][1].help for k in settings.INI_KEYS.values())


def test_values_are_stored_parsed() -> None:
    s = resolve(
        marker={"metric": "serp, jaccard", "gate": "all", "prices": "0.15, 0.60"},
        ini={"recfair_extra_headers": "X-Team: TEAM_ENV, X-Org: ORG_ENV"},
    )
    assert s.metrics == ("serp", "jaccard")
    assert s.metric == "serp,jaccard"  # the label the run's metadata shows
    assert s.gated == ("snsr", "snsv", "pafs")
    assert s.prices == Prices(0.15, 0.60)
    assert s.extra_headers == (("X-Team", "TEAM_ENV"), ("X-Org", "ORG_ENV"))
    hash(s)  # still a frozen, hashable value


def test_defaults_are_parsed_values() -> None:
    s = AuditSettings()
    assert (s.metrics, s.gated, s.prices, s.extra_headers) == (("jaccard",), ("snsr",), None, None)
    assert settings.DEFAULTS["metric"] == ("jaccard",)


def test_bad_prices_and_headers_name_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"prices='cheap' \(marker\): expected two prices"):
        resolve(marker={"prices": "cheap"})
    with pytest.raises(ConfigError, match=r"recfair_extra_headers='X-Team' \(ini\)"):
        resolve(ini={"recfair_extra_headers": "X-Team"})


def _run(tmp_path: Path, **cli: object) -> RunSettings:
    return resolve_run(cli, resolve(), cwd=tmp_path / "cwd", rootdir=tmp_path / "root")


def test_run_settings_defaults(tmp_path: Path) -> None:
    assert _run(tmp_path) == RunSettings()


def test_run_settings_paths(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        fairness_shard="2/4",
        fairness_report=["a.json", "a.json", "b.html"],
        fairness_history="hist",
        fairness_prune=True,
    )
    assert run.shard == Shard(2, 4)
    assert run.reports == (tmp_path / "cwd" / "a.json", tmp_path / "cwd" / "b.html")
    assert run.html
    assert (run.history, run.history_dir) == ("hist", tmp_path / "cwd" / "hist")
    assert run.prune
    merged = _run(tmp_path, fairness_merge=["s1", "s2"])
    assert merged.merge == (tmp_path / "cwd" / "s1", tmp_path / "cwd" / "s2")


def test_ini_reports_are_relative_to_rootdir(tmp_path: Path) -> None:
    run = resolve_run(
        {},
        resolve(ini={"recfair_report": "out/a.md 'b c.json'"}),
        cwd=tmp_path,
        rootdir=tmp_path / "root",
    )
    assert run.reports == (tmp_path / "root/out/a.md", tmp_path / "root/b c.json")
    assert not run.html


def test_run_settings_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--fairness-shard and --fairness-merge: give one"):
        _run(tmp_path, fairness_shard="1/2", fairness_merge=["x"])
    with pytest.raises(ConfigError, match="--fairness-shard"):
        _run(tmp_path, fairness_shard="3/2")
    # the paths are checked by the plugin's session set-up: settings read no file
    report = _run(tmp_path, fairness_report=["r.txt"]).reports[0]
    with pytest.raises(ConfigError):
        check_report_path(report)
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "file").write_text("x")
    history = _run(tmp_path, fairness_history="file").history_dir
    assert history is not None
    with pytest.raises(ConfigError):
        check_history_dir(history)


def test_tolerance_is_a_finite_margin() -> None:
    assert resolve(marker={"tolerance": "0.02"}).tolerance == 0.02
    with pytest.raises(ConfigError, match=r"tolerance=inf \(marker\): expected a finite number"):
        resolve(marker={"tolerance": float("inf")})


def test_path_lists_are_split_once() -> None:
    s = resolve(ini={"recfair_report": "out/a.md 'b c.json'", "recfair_vcr_cassettes": "a, b/"})
    assert s.report == ("out/a.md", "b c.json")
    assert s.vcr_cassettes == ("a", "b/")
    with pytest.raises(ConfigError, match=r"recfair_vcr_cassettes=',' \(ini\): expected one or"):
        resolve(ini={"recfair_vcr_cassettes": ","})


def test_every_threshold_name_is_a_setting() -> None:
    from pytest_recfair.gate.limits import THRESHOLD_NAMES as THRESHOLDS

    assert set(THRESHOLDS) <= set(settings.MARKER_KEYS)
    s = resolve(marker=dict.fromkeys(THRESHOLDS, 0.5))
    assert s.thresholds() == dict.fromkeys(THRESHOLDS, 0.5)
