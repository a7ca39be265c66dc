"""Command-line options and ini keys, resolved into settings once at configure time."""

from __future__ import annotations

import configparser
import tomllib
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair import settings
from pytest_recfair.errors import ConfigError
from pytest_recfair.settings.values import nearest
from pytest_recfair.vocab import PROVIDER_KINDS, RECORD_MODES, REPORT_FORMATS

PROVIDER_INI = {
    "recfair_provider": "provider API shape: " + ", ".join(PROVIDER_KINDS) + " (default openai)",
    "recfair_model": "model id sent to the provider (required unless recfair_recommender "
    "is overridden)",
    "recfair_base_url": "provider base URL (default: the provider's public endpoint)",
    "recfair_api_key_env": "name of the environment variable that holds the API key",
    "recfair_judge_provider": "the judge model's API shape (default: recfair_provider)",
    "recfair_judge_model": "model id of the judge of role-play Why answers (none: not asked)",
    "recfair_judge_base_url": "the judge's base URL (default: recfair_base_url)",
    "recfair_judge_api_key_env": "the judge's API key variable (default: recfair_api_key_env)",
}


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("recfair", "fairness audits of LLM recommenders (pytest-recfair)")
    group.addoption(
        "--fairness",
        action="store_true",
        default=False,
        help="run the tests marked @pytest.mark.fairness (fairness audits)",
    )
    for part in _HELP_LAYOUT:
        declared = part.items() if isinstance(part, dict) else map(_setting_option, part)
        for flag, kwargs in declared:
            default = False if kwargs.get("action") == "store_true" else None
            group.addoption(flag, dest=flag[2:].replace("-", "_"), default=default, **kwargs)
    for ini_name, key in settings.INI_KEYS.items():
        parser.addini(ini_name, settings.SETTINGS[key][1].help)
    for ini_name, help_text in PROVIDER_INI.items():
        parser.addini(ini_name, help_text)


# the options of settings that are not integers (a yes/no setting is a switch)
_VALUES: dict[str, dict[str, Any]] = {
    "record_mode": {"metavar": "MODE", "choices": RECORD_MODES, "type": None},
    "alpha": {"metavar": "X", "type": float},
}


def _setting_option(key: str) -> tuple[str, dict[str, Any]]:
    """``--fairness-<flag>`` of a setting: a switch for a yes/no setting, else a value."""
    setting = settings.SETTINGS[key][1]
    value = {"metavar": "N", "type": int, **_VALUES.get(key, {})}
    how = {"action": "store_true"} if isinstance(settings.DEFAULTS[key], bool) else value
    return "--" + setting.dest.replace("_", "-"), {"help": setting.option, **how}


# the order of --help: the settings' options (by key) and the run's own options
# (docs/reports.md, cassettes.md, scale.md), grouped by topic
_HELP_LAYOUT: tuple[tuple[str, ...] | dict[str, dict[str, Any]], ...] = (
    ("record_mode", "update", "update_force"),
    {
        "--fairness-report": {
            "metavar": "PATH",
            "action": "append",
            "help": "write a fairness report; format from the extension "
            + "/".join(REPORT_FORMATS)
            + "; repeat for several (ini: recfair_report, paths separated by spaces)",
        },
        "--fairness-history": {
            "metavar": "DIR",
            "help": "append this run's JSON report to DIR under a new numbered name",
        },
    },
    ("entities", "repeats", "concurrency", "seed", "alpha", "plan", "batch"),
    {
        "--fairness-prune": {
            "action": "store_true",
            "help": "list cassette interactions and baselines no test used; delete them only "
            "after a full run (no test deselected, failed or skipped; see docs/cassettes.md)",
        },
        "--fairness-prune-dry-run": {
            "action": "store_true",
            "help": "list what --fairness-prune would delete after this run; delete nothing",
        },
        "--fairness-shard": {
            "metavar": "I/N",
            "help": "audit shard I of N of each test's entities and write its result to "
            "recfair_shard_dir, for --fairness-merge (one CI job per shard)",
        },
        "--fairness-merge": {
            "metavar": "FILE_OR_DIR",
            "action": "append",
            "help": "gate and report the audits merged from these shard results (repeatable); "
            "nothing is sent or replayed",
        },
    },
    ("explore",),
    {
        "--fairness-compare": {
            "metavar": "REF",
            "help": "compare each audit with a stored run: a JSON report, or an entry of "
            "--fairness-history DIR (number, latest, -N, commit prefix)",
        },
        "--fairness-compare-fail": {
            "metavar": "EXPR",
            "help": "fail an audit worse than --fairness-compare's run: NAME:[+|-]LIMIT[%%] "
            "rules, comma-separated, e.g. snsr:0.02,pafs:0.05",
        },
    },
)
assert sorted(k for p in _HELP_LAYOUT if isinstance(p, tuple) for k in p) == sorted(
    settings.CLI_KEYS.values()
), "every setting with an option is placed in --help once"
#: dests of the run's own options (above): each acts on audits only
RUN_OPTIONS = tuple(f[2:].replace("-", "_") for p in _HELP_LAYOUT if isinstance(p, dict) for f in p)


def check_strictness(config: pytest.Config) -> None:
    """Errors for what would otherwise be silently ignored: a misspelt recfair_* ini key,
    and a --fairness-* option without --fairness (the audits would be skipped)."""
    known = [*settings.INI_KEYS, *PROVIDER_INI]
    path = config.inipath
    keys = [(k, str(path)) for k in ini_file_keys(path)] if path is not None else []
    keys += [(o.split("=", 1)[0], "-o") for o in config.getoption("override_ini", None) or []]
    for key, where in keys:
        if key.startswith("recfair_") and key not in known:
            near = nearest(key, known)
            hint = f"did you mean {near!r}?" if near else "see docs/configuration.md"
            raise ConfigError(
                f"{where}: unknown ini key {key!r}; {hint} (pytest-recfair reads only the "
                f"recfair_* keys listed in docs/configuration.md)."
            )
    if config.getoption("fairness"):
        return
    # every option that only acts on audits: given without --fairness it would do nothing
    audit_options = (*settings.CLI_KEYS, *RUN_OPTIONS)
    given = [d for d in audit_options if config.getoption(d, None) not in (None, False)]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise ConfigError(
            f"{flag} acts on fairness audits, which run only with --fairness; add it "
            f"(pytest --fairness {flag} ...) or drop {flag}."
        )


def resolve(config: pytest.Config, marker: dict[str, Any]) -> settings.AuditSettings:
    """The settings of one audit (``marker``: its merged marker arguments)."""
    cli = {dest: config.getoption(dest) for dest in settings.CLI_KEYS}
    ini = {name: config.getini(name) for name in settings.INI_KEYS}
    return settings.resolve(cli=cli, marker=marker, ini=ini)


# Unknown ``recfair_*`` ini keys: pytest warns about unknown keys only under
# --strict-config, and a misspelt ``recfair_max_snrs`` would leave the gate without its
# limit. pytest offers no public view of the keys it found, so the ini file it chose is
# read again with the standard parsers; ``-o`` overrides are checked too.
def ini_file_keys(path: Path) -> list[str]:
    """The keys of pytest's section in ``path`` (pytest.ini, tox.ini, setup.cfg or
    pyproject.toml); unreadable or foreign files give none (pytest reports those)."""
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(path.read_text(encoding="utf-8"))
            tool = data.get("tool", {}).get("pytest", {})
            section = tool.get("ini_options", tool)
            return [str(k) for k in section if isinstance(k, str)]
        parser = configparser.RawConfigParser(strict=False)
        parser.read(path, encoding="utf-8")
    except (OSError, ValueError, configparser.Error, tomllib.TOMLDecodeError):
        return []
    return next((parser.options(n) for n in ("pytest", "tool:pytest") if parser.has_section(n)), [])
