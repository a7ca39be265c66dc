"""One frozen settings object per fairness audit, merged CLI > marker > ini > defaults.

Pure: no pytest import. The plugin hands over three plain mappings (command-line values,
marker keyword arguments, ini values) and gets back a validated :class:`AuditSettings`,
or a :class:`~pytest_recfair.errors.ConfigError` that names the key, what was expected,
what was given and the allowed keys.

Each setting is declared once, as a field of :class:`AuditSettings` whose metadata says
how it is parsed, whether the marker takes it, its command-line option and its help
text; ``MARKER_KEYS``, ``INI_KEYS``, ``CLI_KEYS`` and the parsers are derived from those
fields. Values are stored parsed (tuples, :class:`~pytest_recfair.settings.values.Prices`,
header pairs), so no caller parses them again. The session-wide options (shard, merge,
prune, history, reports) resolve once into a :class:`RunSettings` (:mod:`.run`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any, Final

from pytest_recfair.errors import ConfigError
from pytest_recfair.settings import values
from pytest_recfair.settings.declared import AuditSettings, Option, Setting
from pytest_recfair.settings.values import RUN_OPTIONS, Parser, RunSettings, resolve_run
from pytest_recfair.vocab import METRICS, MISSING_POLICIES, RECORD_MODES, VARIANTS

__all__ = [
    "CLI_KEYS",
    "DEFAULTS",
    "INI_KEYS",
    "MARKER_KEYS",
    "METRICS",
    "MISSING_POLICIES",
    "RECORD_MODES",
    "RUN_OPTIONS",
    "VARIANTS",
    "AuditSettings",
    "Option",
    "RunSettings",
    "Setting",
    "ini_help",
    "resolve",
    "resolve_run",
    "validate_marker",
]


def _declarations() -> dict[str, tuple[str, Setting]]:
    """Setting key -> (field name, declaration), in field order."""
    out: dict[str, tuple[str, Setting]] = {}
    for f in fields(AuditSettings):
        spec: Setting = f.metadata["setting"]
        key = spec.key or f.name
        out[key] = (f.name, replace(spec, key=key))
    return out


SETTINGS: Final[dict[str, tuple[str, Setting]]] = _declarations()

_FIELD_DEFAULTS: Final[dict[str, Any]] = {f.name: f.default for f in fields(AuditSettings)}

# setting key -> default value (the parsed form: ("jaccard",) for metric)
DEFAULTS: dict[str, Any] = {key: _FIELD_DEFAULTS[name] for key, (name, _) in SETTINGS.items()}

MARKER_KEYS: tuple[str, ...] = tuple(k for k, (_, d) in SETTINGS.items() if d.marker)

# command-line option (dest) -> settings key; dests are namespaced "fairness_*"
CLI_KEYS: dict[str, str] = values.CLI_KEYS
CLI_KEYS.update({d.option.dest: k for k, (_, d) in SETTINGS.items() if d.option is not None})

# ini key -> settings key: every setting has a "recfair_<name>" ini key, but model
# (recfair_model names the default HTTP provider's model)
INI_KEYS: dict[str, str] = {f"recfair_{k}": k for k, (_, d) in SETTINGS.items() if d.ini}

_PARSERS: dict[str, Parser] = {k: d.parse for k, (_, d) in SETTINGS.items()}


def ini_help(key: str) -> str:
    """The help text of the ini key ``recfair_<key>``."""
    return SETTINGS[key][1].help or f"default for @fairness({key}=...)"


def validate_marker(args: tuple[Any, ...], kwargs: Mapping[str, Any], where: str = "") -> None:
    """Check ``@pytest.mark.fairness(...)`` arguments; raise ConfigError naming the bad one.

    Runs at collection, so a typo in a marker is a usage error before any prompt is sent.
    """
    place = f" on {where}" if where else ""
    allowed = ", ".join(MARKER_KEYS)
    if args:
        raise ConfigError(
            f"@fairness{place} takes keyword arguments only, got positional {args!r}. "
            f"Allowed arguments: {allowed}."
        )
    unknown = sorted(set(kwargs) - set(MARKER_KEYS))
    if unknown:
        guesses = [(key, values.nearest(key, MARKER_KEYS)) for key in unknown]
        said = "; ".join(f"{k!r}: did you mean {g!r}?" if g else repr(k) for k, g in guesses)
        raise ConfigError(
            f"@fairness{place}: unknown argument(s) {said} (the {len(MARKER_KEYS)} marker "
            "arguments are listed in docs/configuration.md)."
        )
    for key, value in kwargs.items():
        try:
            _PARSERS[key](value, key, "marker")
        except ConfigError as exc:
            raise ConfigError(f"@fairness{place}: {exc}") from None


def resolve(
    *,
    cli: Mapping[str, Any] | None = None,
    marker: Mapping[str, Any] | None = None,
    ini: Mapping[str, Any] | None = None,
) -> AuditSettings:
    """Merge the three sources (CLI wins, then marker, then ini, then defaults) and validate.

    ``cli`` is keyed by option dest (``fairness_entities``) or by settings key; ``None``
    values mean "not given". ``ini`` is keyed by ini name (``recfair_k``) or settings key;
    empty strings mean "not given". ``marker`` holds the marker's keyword arguments.
    """
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    layers: list[tuple[str, Mapping[str, Any] | None]] = [
        ("ini", ini),
        ("marker", marker),
        ("command-line", cli),
    ]
    for source, layer in layers:
        for raw_key, value in (layer or {}).items():
            key = _key(raw_key, source)
            if source == "marker" and key not in MARKER_KEYS:
                raise ConfigError(
                    f"@fairness: unknown argument {raw_key!r}. "
                    f"Allowed arguments: {', '.join(MARKER_KEYS)}."
                )
            if value is None and source != "marker":
                continue
            if source == "ini" and isinstance(value, str) and not value.strip():
                continue
            # store_true options arrive as False when absent: do not let them mask ini
            if source == "command-line" and value is False:
                continue
            if key in merged:  # overridden, but a bad value is still an error
                _PARSERS[key](merged[key], key, sources[key])
            merged[key] = value
            sources[key] = source
    parsed: dict[str, Any] = dict(_FIELD_DEFAULTS)
    for key, value in merged.items():
        parsed[SETTINGS[key][0]] = _PARSERS[key](value, key, sources[key])
    return AuditSettings(**parsed)


def _key(raw_key: str, source: str) -> str:
    if raw_key in _PARSERS:
        return raw_key
    if source == "command-line" and raw_key in CLI_KEYS:
        return CLI_KEYS[raw_key]
    if source == "ini" and raw_key in INI_KEYS:
        return INI_KEYS[raw_key]
    allowed = {
        "command-line": ", ".join(f"--{d.replace('_', '-')}" for d in CLI_KEYS),
        "ini": ", ".join(INI_KEYS),
        "marker": ", ".join(MARKER_KEYS),
    }[source]
    raise ConfigError(
        f"fairness settings: unknown {source} key {raw_key!r}. Allowed keys: {allowed}."
    )
