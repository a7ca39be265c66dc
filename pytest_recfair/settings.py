"""One frozen settings object per fairness audit, merged CLI > marker > ini > defaults.

Pure: no pytest import. The plugin hands over three plain mappings (command-line values,
marker keyword arguments, ini values) and gets back a validated :class:`AuditSettings`,
or a :class:`~pytest_recfair.errors.ConfigError` that names the key, what was expected,
what was given and the allowed keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, cast

from pytest_recfair.errors import ConfigError
from pytest_recfair.gate.unanswered import check_max_failed
from pytest_recfair.kinds import (
    CANDIDATE_STYLES,
    METRICS,
    MISSING_POLICIES,
    PARSE_STYLES,
    RECORD_MODES,
    STATISTICS,
    THRESHOLDS,
    VARIANTS,
    CandidateStyle,
    MetricName,
    MissingPolicy,
    ParseStyle,
    RecordMode,
    Statistic,
    Variant,
)

__all__ = [
    "CLI_KEYS",
    "DEFAULTS",
    "INI_KEYS",
    "MARKER_KEYS",
    "METRICS",
    "MISSING_POLICIES",
    "RECORD_MODES",
    "VARIANTS",
    "AuditSettings",
    "resolve",
    "validate_marker",
]


@dataclass(frozen=True, slots=True)
class AuditSettings:
    """Everything one audit needs to know, after merging and validation."""

    # what to audit (marker arguments; ini keys recfair_<name> give project defaults)
    attr: str | None = None  # None: every attribute of the grid
    metric: str = "jaccard"  # one metric, or several joined by commas (see .metrics)
    k: int = 25
    variant: Variant = "normalized"
    max_snsr: float | None = None
    max_snsv: float | None = None
    min_pafs: float | None = None
    max_entropy: float | None = None
    max_refusal_gap: float | None = None
    max_unusable: float | None = 0.2  # share of replies without a usable list; 1 = off
    max_failed: float = 0.0  # share of prompts allowed no valid response (left out)
    tolerance: float = 0.0
    gate: str = "snsr"  # statistics gated against the baseline (see .gated); others reported
    domain: str = "movie"
    seeds: str | None = None  # fixture name, bundled set name or file; None: domain default
    entities: int | None = None  # subsample size; None: every seed entity
    repeats: int = 1
    language: str = "en"
    perturbation: str | None = None
    grid: str = "faireval"
    templates: str = "natural"
    missing: MissingPolicy = "zero"
    parse: ParseStyle | None = None  # None: "fairllm" with variant="fairllm", else "default"
    # item-side audits: catalogue fields of the recommended items (docs/itemside.md)
    item_field: str | None = None  # one field, or several joined by commas
    catalogue: str | None = None  # file; None: the recfair_catalogue fixture
    max_shift: float | None = None  # total variation distance of a group from neutral
    # candidate-position audits (docs/itemside.md)
    candidates: str | None = None  # fixture name or file: entity -> candidate titles
    orders: int = 5  # candidate orders per (entity, group)
    pick: CandidateStyle = "pick"
    max_position_bias: float | None = None
    max_missed_rate: float | None = None
    # published runs: cases never answered (written by python -m pytest_recfair import)
    absent: str | None = None
    # the model id a callable recommender is reported under (marker only: the ini key
    # recfair_model is the default HTTP provider's model)
    model: str | None = None
    # how to run it (command line / ini only)
    record_mode: RecordMode = "none"
    update: bool = False
    report: str | None = None
    concurrency: int = 8
    update_force: bool = False  # --fairness-update stores even a run of unusable replies
    seed: int = 0  # the entity subsample
    resample_seed: int = 0  # the gate's sign flips and the intervals' bootstrap draws
    alpha: float = 0.05
    n_resamples: int = 2000
    cassette_dir: str = "fixtures/cassettes"
    baseline_dir: str = "baselines"
    # the baseline's stable name (default: the test's name, not its file); marker argument
    baseline: str | None = None
    # cassettes recorded by vcrpy / pytest-recording, read through vcrpy (comma-separated)
    vcr_cassettes: str | None = None
    batch: bool = False  # record missing prompts through the provider's batch API
    batch_poll: float = 10.0  # seconds before the first batch poll (then x1.5, max 60)
    shard_dir: str = "fairness-shards"  # where --fairness-shard=I/N writes its results
    # live runs: what the provider is sent, budget and plan (docs/providers.md)
    timeout: float = 60.0  # seconds per request (or per call of a callable recommender)
    max_retries: int = 5
    temperature: float | None = None  # None: the provider's own (0 for the HTTP ones)
    max_tokens: int | None = None
    sampling_seed: int | None = None  # the model's seed parameter (OpenAI, Gemini)
    system: str | None = None  # replaces the templates' system message
    extra_headers: str | None = None  # "Header: ENV_VAR, ..." (values from the environment)
    prices: str | None = None  # "input, output" USD per million tokens
    max_requests: int | None = None  # budget of one pytest run; None: no limit
    max_cost: float | None = None  # USD, estimated from prices
    max_reply_chars: int = 100_000  # longer replies are cut, with a note
    plan: bool = False  # --fairness-plan: print the plan, send nothing

    @property
    def metrics(self) -> tuple[MetricName, ...]:
        """The metrics to score, in order ("jaccard,serp" -> ("jaccard", "serp"))."""
        # validated at construction: every part is one of the metric names
        return cast("tuple[MetricName, ...]", tuple(self.metric.split(",")))

    @property
    def gated(self) -> tuple[Statistic, ...]:
        """The statistics gated against the baseline ("snsr,pafs" -> ("snsr", "pafs"))."""
        return cast("tuple[Statistic, ...]", tuple(self.gate.split(",")))

    @property
    def parse_style(self) -> ParseStyle:
        """How replies are parsed: the ``parse`` setting, or the one that goes with the
        variant (the FaiRLLM notebook's cleaning for ``variant="fairllm"``)."""
        if self.parse is not None:
            return self.parse
        return "fairllm" if self.variant == "fairllm" else "default"

    @property
    def personality(self) -> bool:
        return self.attr is not None and self.attr.strip().casefold() == "personality"

    def thresholds(self) -> dict[str, float]:
        """The absolute thresholds that are set, by name (max_snsr, min_pafs, ...)."""
        out: dict[str, float] = {}
        for name in THRESHOLDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = float(value)
        return out


DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(AuditSettings)}

MARKER_KEYS: tuple[str, ...] = (
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
    "candidates",
    "orders",
    "pick",
    "max_position_bias",
    "max_missed_rate",
    "absent",
    "model",
    "baseline",
    "timeout",
    "max_retries",
    "temperature",
    "max_tokens",
    "sampling_seed",
    "system",
    "extra_headers",
    "prices",
    "max_reply_chars",
)

# command-line option (dest) -> settings key; dests are namespaced "fairness_*"
CLI_KEYS: dict[str, str] = {
    "fairness_record": "record_mode",
    "fairness_update": "update",
    "fairness_update_force": "update_force",
    "fairness_entities": "entities",
    "fairness_repeats": "repeats",
    "fairness_concurrency": "concurrency",
    "fairness_seed": "seed",
    "fairness_alpha": "alpha",
    "fairness_batch": "batch",
    "fairness_plan": "plan",
}

# ini key -> settings key: every setting has a "recfair_<name>" ini key
INI_KEYS: dict[str, str] = {
    f"recfair_{f.name}": f.name
    for f in fields(AuditSettings)
    if f.name != "model"  # recfair_model names the default HTTP provider's model
}


def _plain(value: Any, key: str, source: str) -> str:
    """The setting as the user wrote it: ``recfair_k = 'abc' (ini)``, ``--fairness-seed``."""
    if source == "ini":
        return f"recfair_{key}={value!r} (ini)"
    if source == "command-line":
        opt = next((d for d, k in CLI_KEYS.items() if k == key), None)
        if opt is not None:
            return f"--{opt.replace('_', '-')}={value!r} (command-line)"
    return f"{key}={value!r} ({source})"


def _to_int(value: Any, key: str, source: str, *, minimum: int) -> int:
    if isinstance(value, bool):
        raise _bad(key, value, source, f"an integer >= {minimum}")
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise _bad(key, value, source, f"an integer >= {minimum}") from None
    if not isinstance(value, int) or value < minimum:
        raise _bad(key, value, source, f"an integer >= {minimum}")
    return value


def _to_float(value: Any, key: str, source: str, *, lo: float, hi: float | None) -> float:
    expected = f"a number in [{lo}, {hi}]" if hi is not None else f"a number >= {lo}"
    if isinstance(value, bool):
        raise _bad(key, value, source, expected)
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise _bad(key, value, source, expected) from None
    if not isinstance(value, int | float) or math.isnan(value):
        raise _bad(key, value, source, expected)
    if value < lo or (hi is not None and value > hi):
        raise _bad(key, value, source, expected)
    return float(value)


def _to_bool(value: Any, key: str, source: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"1", "true", "yes", "on"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"0", "false", "no", "off", ""}:
        return False
    raise _bad(key, value, source, "true or false")


def _choice(choices: tuple[str, ...]) -> Callable[[Any, str, str], str]:
    def parse(value: Any, key: str, source: str) -> str:
        if isinstance(value, str) and value.strip().lower() in choices:
            return value.strip().lower()
        raise _bad(key, value, source, "one of " + ", ".join(repr(c) for c in choices))

    return parse


def _metrics(value: Any, key: str, source: str) -> str:
    """One metric, "all", a comma-separated string or a list of metrics -> "a,b,c"."""
    expected = "one of 'jaccard', 'serp', 'prag', 'all', or a list of them"
    if isinstance(value, str):
        parts = [p.strip().lower() for p in value.split(",")]
    elif isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        parts = [v.strip().lower() for v in value]
    else:
        raise _bad(key, value, source, expected)
    if parts == ["all"]:
        parts = list(METRICS)
    if not parts or any(p not in METRICS for p in parts) or len(set(parts)) != len(parts):
        raise _bad(key, value, source, expected)
    return ",".join(parts)


def _statistics(value: Any, key: str, source: str) -> str:
    """One statistic, "all", a comma-separated string or a list of them -> "a,b"."""
    expected = f"one of {', '.join(repr(x) for x in STATISTICS)}, 'all', or a list of them"
    if isinstance(value, str):
        parts = [p.strip().lower() for p in value.split(",")]
    elif isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        parts = [v.strip().lower() for v in value]
    else:
        raise _bad(key, value, source, expected)
    if parts == ["all"]:
        parts = list(STATISTICS)
    if not parts or any(p not in STATISTICS for p in parts) or len(set(parts)) != len(parts):
        raise _bad(key, value, source, expected)
    return ",".join(parts)


def _perturbation(value: Any, key: str, source: str) -> str:
    """ "typo", or the longer spec "typo:N:kind+kind" that prompts.perturb understands."""
    from pytest_recfair.prompts.perturb import parse_perturbation

    expected = "'typo' (or 'typo:N', 'typo:kind+kind', 'typo:N:kind+kind')"
    if not isinstance(value, str):
        raise _bad(key, value, source, expected)
    try:
        parse_perturbation(value)
    except ConfigError:
        raise _bad(key, value, source, expected) from None
    return value.strip().lower()


def _text(value: Any, key: str, source: str) -> str:
    if isinstance(value, Path):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise _bad(key, value, source, "a non-empty string")
    return value.strip()


def _optional(
    parse: Callable[[Any, str, str], Any],
) -> Callable[[Any, str, str], Any]:
    def inner(value: Any, key: str, source: str) -> Any:
        if value is None:
            return None
        # ini and CLI can only spell "not set" as text; a marker passes None
        if source != "marker" and isinstance(value, str) and value.strip().lower() in {"", "none"}:
            return None
        return parse(value, key, source)

    return inner


def _bad(key: str, value: Any, source: str, expected: str) -> ConfigError:
    return ConfigError(
        f"fairness setting {_plain(value, key, source)}: expected {expected}. "
        f"Fix the {source} value; see docs/configuration.md."
    )


def _unit(value: Any, key: str, source: str) -> float:
    return _to_float(value, key, source, lo=0.0, hi=1.0)


def _nonneg(value: Any, key: str, source: str) -> float:
    return _to_float(value, key, source, lo=0.0, hi=None)


def _max_failed(value: Any, key: str, source: str) -> float:
    try:
        return check_max_failed(value, key)
    except ConfigError:
        raise _bad(
            key, value, source, "a share of prompts in [0, 1) such as 0.01 or '1%' (0: none)"
        ) from None


def _prices(value: Any, key: str, source: str) -> str:
    """Two prices (input, output; USD per million tokens) -> "0.15,0.6"."""
    from pytest_recfair.engine.budget import parse_prices

    try:
        prices = parse_prices(value, key)
    except ConfigError:
        raise _bad(key, value, source, "two prices, input then output, e.g. '0.15, 0.60'") from None
    if prices is None:
        raise _bad(key, value, source, "two prices, input then output, e.g. '0.15, 0.60'")
    return f"{prices.input_per_mtok:g},{prices.output_per_mtok:g}"


def _headers(value: Any, key: str, source: str) -> str:
    """ "X-Team: TEAM_ENV, X-Org: ORG_ENV" (or a dict) -> the same, checked: each value is
    the NAME of an environment variable, so no header value is ever written in a config."""
    from pytest_recfair.providers.envheaders import parse_header_envs

    try:
        pairs = parse_header_envs(value)
    except ConfigError as exc:
        raise _bad(key, value, source, str(exc).removeprefix("expected ")) from None
    return ", ".join(f"{h}: {env}" for h, env in pairs.items())


_PARSERS: dict[str, Callable[[Any, str, str], Any]] = {
    "attr": _optional(_text),
    "metric": _metrics,
    "k": lambda v, k, s: _to_int(v, k, s, minimum=1),
    "variant": _choice(VARIANTS),
    "max_snsr": _optional(_unit),
    "max_snsv": _optional(_unit),
    "min_pafs": _optional(_unit),
    "max_entropy": _optional(_nonneg),
    "max_refusal_gap": _optional(_unit),
    "max_unusable": _optional(_unit),
    "max_failed": _max_failed,
    "tolerance": _nonneg,
    "gate": _statistics,
    "domain": _text,
    "seeds": _optional(_text),
    "entities": _optional(lambda v, k, s: _to_int(v, k, s, minimum=1)),
    "repeats": lambda v, k, s: _to_int(v, k, s, minimum=1),
    "language": _text,
    "perturbation": _optional(_perturbation),
    "grid": _text,
    "templates": _text,
    "missing": _choice(MISSING_POLICIES),
    "parse": _optional(_choice(PARSE_STYLES)),
    "item_field": _optional(_text),
    "catalogue": _optional(_text),
    "max_shift": _optional(_unit),
    "candidates": _optional(_text),
    "orders": lambda v, k, s: _to_int(v, k, s, minimum=2),
    "pick": _choice(CANDIDATE_STYLES),
    "max_position_bias": _optional(_unit),
    "max_missed_rate": _optional(_unit),
    "absent": _optional(_text),
    "model": _optional(_text),
    "record_mode": _choice(RECORD_MODES),
    "update": _to_bool,
    "update_force": _to_bool,
    "report": _optional(_text),
    "concurrency": lambda v, k, s: _to_int(v, k, s, minimum=1),
    "seed": lambda v, k, s: _to_int(v, k, s, minimum=0),
    "resample_seed": lambda v, k, s: _to_int(v, k, s, minimum=0),
    "alpha": lambda v, k, s: _to_float(v, k, s, lo=1e-9, hi=0.5),
    "n_resamples": lambda v, k, s: _to_int(v, k, s, minimum=10),
    "cassette_dir": _text,
    "baseline_dir": _text,
    "baseline": _optional(_text),
    "vcr_cassettes": _optional(_text),
    "batch": _to_bool,
    "batch_poll": lambda v, k, s: _to_float(v, k, s, lo=0.01, hi=3600.0),
    "shard_dir": _text,
    "timeout": lambda v, k, s: _to_float(v, k, s, lo=0.001, hi=None),
    "max_retries": lambda v, k, s: _to_int(v, k, s, minimum=0),
    "temperature": _optional(lambda v, k, s: _to_float(v, k, s, lo=0.0, hi=2.0)),
    "max_tokens": _optional(lambda v, k, s: _to_int(v, k, s, minimum=1)),
    "sampling_seed": _optional(lambda v, k, s: _to_int(v, k, s, minimum=0)),
    "system": _optional(_text),
    "extra_headers": _optional(_headers),
    "prices": _optional(_prices),
    "max_requests": _optional(lambda v, k, s: _to_int(v, k, s, minimum=0)),
    "max_cost": _optional(_nonneg),
    "max_reply_chars": lambda v, k, s: _to_int(v, k, s, minimum=1),
    "plan": _to_bool,
}


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
        raise ConfigError(
            f"@fairness{place}: unknown argument(s) {', '.join(unknown)}. "
            f"Allowed arguments: {allowed}."
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
    parsed: dict[str, Any] = dict(DEFAULTS)
    for key, value in merged.items():
        parsed[key] = _PARSERS[key](value, key, sources[key])
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
