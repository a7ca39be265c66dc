"""One frozen settings object per audit, merged CLI > marker > ini > defaults. Pure. Each
setting is one field of :class:`AuditSettings`, its :class:`Setting` metadata the rest."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Final

from pytest_recfair.errors import ConfigError
from pytest_recfair.gate.limits import THRESHOLD_NAMES
from pytest_recfair.settings import values as v
from pytest_recfair.settings.values import Parser
from pytest_recfair.vocab import (
    CANDIDATE_STYLES,
    INTERCEPTS,
    MISSING_POLICIES,
    PARSE_STYLES,
    RECORD_MODES,
    REPORT_FORMATS,
    VARIANTS,
    CandidateStyle,
    MetricName,
    MissingPolicy,
    ParseStyle,
    RecordMode,
    Statistic,
    Variant,
)

if TYPE_CHECKING:
    from pytest_recfair.settings.values import HeaderEnvs, Prices


@dataclass(frozen=True, slots=True)
class Setting:
    """How one setting is given: its key (marker argument, ``recfair_<key>``), parser."""

    parse: Parser
    key: str = ""  # "": the field's name
    help: str = ""  # the ini key's help; "" -> "default for @fairness(<key>=...)"
    marker: bool = True  # a @fairness argument (else command line / ini only)
    ini: bool = True
    option: str | None = None  # the help of its command-line option (None: it has none)
    dest: str = ""  # that option's dest: ``fairness_<key>`` unless given


def _s(default: Any, parse: Parser, **how: Any) -> Any:
    """A settings field with its declaration (:class:`Setting`'s fields) as metadata; a
    setting without a default may be unset ("none" in the ini file or on the command line)."""
    parse = v.optional(parse) if default is None else parse
    return field(default=default, metadata={"setting": Setting(parse, **how)})


def _run(default: Any, parse: Parser, **how: Any) -> Any:
    """A setting of the run (command line and ini), not a @fairness argument."""
    return _s(default, parse, marker=False, **how)


_MODES = ", ".join(RECORD_MODES)
_PACE = "per minute to pace live requests to (default: the provider's rate-limit headers)"


@dataclass(frozen=True, slots=True)
class AuditSettings:
    """Everything one audit needs to know, merged and validated."""

    # what to audit (marker arguments; ini keys recfair_<name> give project defaults)
    attr: str | None = _s(None, v.text)  # None: every attribute of the grid
    metrics: tuple[MetricName, ...] = _s(("jaccard",), v.metrics, key="metric")
    k: int = _s(25, v.whole(1))
    variant: Variant = _s("normalized", v.choice(VARIANTS))
    max_snsr: float | None = _s(None, v.unit)
    max_snsv: float | None = _s(None, v.unit)
    min_pafs: float | None = _s(None, v.unit)
    max_entropy: float | None = _s(None, v.nonneg)
    max_refusal_gap: float | None = _s(None, v.unit)
    max_unusable: float | None = _s(0.2, v.optional(v.unit))  # replies without a list; 1: off
    max_failed: float = _s(0.0, v.max_failed)  # share of prompts allowed no valid response
    tolerance: float = _s(0.0, v.tolerance)
    gated: tuple[Statistic, ...] = _s(("snsr",), v.statistics, key="gate")  # others: reported
    domain: str = _s("movie", v.text)
    seeds: str | None = _s(None, v.text)  # fixture, bundled set or file
    entities: int | None = _s(  # subsample size; None: every seed entity
        None, v.whole(1), option="audit a deterministic subsample of N seed entities"
    )
    repeats: int = _s(
        1, v.whole(1), option="ask each prompt N times (entropy and noise floor when N > 1)"
    )
    language: str = _s("en", v.text)
    perturbation: str | None = _s(None, v.perturbation)
    grid: str = _s("faireval", v.text)
    templates: str = _s("natural", v.text)
    missing: MissingPolicy = _s("zero", v.choice(MISSING_POLICIES))
    parse: ParseStyle | None = _s(None, v.choice(PARSE_STYLES))  # None: by variant (parse_style)
    # item-side audits (docs/itemside.md): field(s), catalogue file (None: the fixture)
    item_field: str | None = _s(None, v.text)
    catalogue: str | None = _s(None, v.text)
    max_shift: float | None = _s(None, v.unit)
    reference: str = _s("catalogue", v.text)  # exposure: "catalogue" or an interactions file
    # popularity groups of a numeric item_field: N quantile groups, or edges "10,100"
    bins: int | tuple[float, ...] | None = _s(None, v.bins)
    max_exposure_gap: float | None = _s(None, v.unit)
    min_long_tail_share: float | None = _s(None, v.unit)
    max_popularity_lift: float | None = _s(None, v.unit)
    # candidate-position audits (docs/itemside.md)
    candidates: str | None = _s(None, v.text)
    orders: int = _s(5, v.whole(2))
    pick: CandidateStyle = _s("pick", v.choice(CANDIDATE_STYLES))
    max_position_bias: float | None = _s(None, v.unit)
    max_missed_rate: float | None = _s(None, v.unit)
    # role-play audits (BiasLens, docs/roleplay.md)
    kind: str | None = _s(None, v.text)  # a registry name; None: the other settings choose
    questions: str | None = _s(None, v.text)  # a bundled set ("default") or a CSV/YAML/JSON file
    # how role-play answers are read: "parsed" or the paper's rules, "biaslens"
    oracle: str = _s("parsed", v.choice(("parsed", "biaslens")))
    max_biased: float | None = _s(None, v.unit)  # of an attribute x type cell's biased rate
    with_role: bool = _s(True, v.to_bool)  # ask with the role statement ("You are a {role}")
    role_effect: bool = _s(False, v.to_bool)  # also ask without the role: the role's effect
    absent: str | None = _s(None, v.text)  # published runs' cases never answered (by import)
    # a callable recommender's model id (marker only: recfair_model is the HTTP provider's)
    model: str | None = _s(None, v.text, ini=False)
    intercept: str = _s(
        "none",
        v.choice(INTERCEPTS),
        help="record a Python pipeline's own HTTP calls through vcrpy: vcr (default: "
        "none; hand it recfair_http_client instead)",
    )
    record_mode: RecordMode = _run(
        "none",
        v.choice(RECORD_MODES),
        help=f"cassette record mode: {_MODES} (default none)",
        option=f"cassette record mode: {_MODES} (default none: replay only; ini: "
        "recfair_record_mode)",
        dest="fairness_record",
    )
    update: bool = _run(
        False,
        v.to_bool,
        help="write/refresh baselines instead of comparing (true/false)",
        option="write or refresh fairness baselines from this run (ini: recfair_update)",
    )
    report: tuple[str, ...] | None = _run(
        None,
        v.paths(shlex.split),
        help="write a fairness report to this path (" + ", ".join(REPORT_FORMATS) + ")",
    )
    concurrency: int = _run(8, v.whole(1), option="at most N requests in flight (default 8)")
    update_force: bool = _run(
        False,
        v.to_bool,
        option="with --fairness-update: store the baseline even when too many replies were "
        "unusable (ini: recfair_update_force)",
    )
    seed: int = _run(  # the entity subsample
        0,
        v.whole(0),
        option="seed of the entity subsample and perturbations (default 0; the gate's "
        "resampling has its own: ini recfair_resample_seed)",
    )
    resample_seed: int = _run(0, v.whole(0))  # the gate's sign flips, the bootstrap's draws
    alpha: float = _run(
        0.05,
        v.number(1e-9, 0.5),
        help="significance level of the baseline comparison (default 0.05)",
        option="significance level of the rise-over-baseline test (default 0.05; ini: "
        "recfair_alpha)",
    )
    n_resamples: int = _run(
        2000, v.whole(10), help="bootstrap resamples for confidence intervals (default 2000)"
    )
    cassette_dir: str = _run(
        "fixtures/cassettes",
        v.text,
        help="cassette directory, relative to rootdir (default fixtures/cassettes)",
    )
    baseline_dir: str = _run(
        "baselines", v.text, help="baseline directory, relative to rootdir (default baselines)"
    )
    baseline: str | None = _s(None, v.text)  # its stable name (default: the test's, not its file)
    vcr_cassettes: tuple[str, ...] | None = _run(
        None,
        v.paths(lambda text: text.split(",")),
        help="cassettes recorded with vcrpy/pytest-recording to replay from "
        "(comma-separated files or folders, relative to rootdir; YAML or JSON)",
    )
    batch: bool = _run(
        False,
        v.to_bool,
        help="record missing prompts through the provider's batch API (true/false)",
        option="record the prompts that have no recording through the provider's batch API "
        "(OpenAI Batch API, Anthropic Message Batches) at half price, then replay them "
        "(ini: recfair_batch)",
    )
    batch_poll: float = _run(
        10.0,
        v.number(0.01, 3600.0),
        help="seconds before the first batch status poll (default 10; then x1.5, max 60)",
    )
    shard_dir: str = _run(
        "fairness-shards",
        v.text,
        help="where --fairness-shard writes shard results (default fairness-shards)",
    )
    # live runs: what the provider is sent, budget and plan (docs/providers.md)
    timeout: float = _s(
        60.0, v.number(0.001, None), help="seconds per request to the recommender (default 60)"
    )
    max_retries: int = _s(5, v.whole(0), help="retries of a failed request (default 5)")
    max_retry_after: float = _run(
        120.0,
        v.number(0.0, 3600.0),
        help="seconds a Retry-After or rate-limit header may hold a request, at most (default 120)",
    )
    temperature: float | None = _s(  # None: the provider's own (0 for the HTTP ones)
        None,
        v.number(0.0, 2.0),
        help="sampling temperature sent to the provider (default: the provider's, 0)",
    )
    max_tokens: int | None = _s(None, v.whole(1), help="reply length limit sent to the provider")
    sampling_seed: int | None = _s(
        None, v.whole(0), help="the model's seed parameter (OpenAI, Gemini)"
    )
    system: str | None = _s(None, v.text, help="system message replacing the templates' one")
    role: str | None = _s(None, v.text)  # a persona: "You are a {role}." opens the system message
    extra_headers: HeaderEnvs | None = _s(
        None,
        v.headers,
        help="extra request headers as 'Name: ENV_VAR' pairs (values from the environment)",
    )
    prices: Prices | None = _s(  # USD per million input and output tokens
        None, v.prices, help="USD per million input and output tokens, e.g. '0.15, 0.60'"
    )
    judge_prices: Prices | None = _run(  # the judge's (role-play Why answers): plan, budget
        None, v.prices, help="the judge's recfair_prices"
    )
    max_requests: int | None = _run(  # budget of one pytest run; None: no limit
        None, v.whole(0), help="refuse to start live requests beyond this many in one run"
    )
    max_cost: float | None = _run(  # USD, estimated from prices
        None, v.nonneg, help="refuse to start live requests beyond this estimated cost (USD)"
    )
    max_reply_chars: int = _s(
        100_000, v.whole(1), help="replies longer than this are cut, with a note (default 100000)"
    )
    # gate/floor.py: each gated margin is at least this many baseline standard errors
    baseline_floor: float = _s(1.645, v.number(0.0, 10.0))
    baseline_noise_limit: float = _s(0.05, v.unit)  # a floor above: too noisy to gate on
    # the key's tier (not a test's), split across xdist workers (issue 24)
    rpm: int | None = _run(None, v.whole(1), help=f"requests {_PACE}")
    tpm: int | None = _run(None, v.whole(1), help=f"tokens {_PACE}")
    plan: bool = _run(
        False,
        v.to_bool,
        help="print the plans and send nothing (true/false; --fairness-plan)",
        option="print each audit's plan (prompts, already recorded, to ask, tokens, cost, "
        "duration) and send nothing",
    )
    explore: bool = _run(  # a first look at a model: measure and report, gate nothing
        False,
        v.to_bool,
        help="measure and report without gating (true/false; --fairness-explore)",
        option="explore: measure and report, fail no test on limits, drift or missing baselines; "
        "writes baselines only with --fairness-update (ini: recfair_explore)",
    )
    # quality beside fairness (docs/metrics.md "Recommendation quality"): every group's at least
    min_quality: float | None = _s(None, v.unit)
    max_quality_gap: float | None = _s(None, v.unit)  # per attribute: best minus worst value
    quality_tolerance: float = _s(0.05, v.unit)  # a larger paired drop (at alpha) fails
    quality_field: str = _s("entity", v.text)  # the catalogue column naming an item's entity

    @property
    def metric(self) -> str:
        """The metrics as one label ("jaccard,serp"): the run's metadata shows this."""
        return ",".join(self.metrics)

    @property
    def parse_style(self) -> ParseStyle:
        """The ``parse`` setting, or the FaiRLLM notebook's for ``variant="fairllm"``."""
        if self.parse is not None:
            return self.parse
        return "fairllm" if self.variant == "fairllm" else "default"

    @property
    def personality(self) -> bool:
        return self.attr is not None and self.attr.strip().casefold() == "personality"

    def thresholds(self) -> dict[str, float]:
        """The absolute thresholds that are set, by name (max_snsr, min_pafs, ...)."""
        found = ((name, getattr(self, name)) for name in THRESHOLD_NAMES)
        return {name: float(value) for name, value in found if value is not None}


# setting key -> (field name, declaration), in field order
def _declared(name: str, setting: Setting) -> Setting:
    key = setting.key or name
    said = setting.help or f"default for @fairness({key}=...)"
    return replace(setting, key=key, dest=setting.dest or f"fairness_{key}", help=said)


SETTINGS: Final[dict[str, tuple[str, Setting]]] = {
    d.key: (f.name, d)
    for f in fields(AuditSettings)
    for d in [_declared(f.name, f.metadata["setting"])]
}

# setting key -> default value (the parsed form: ("jaccard",) for metric)
DEFAULTS: dict[str, Any] = {key: getattr(AuditSettings(), n) for key, (n, _) in SETTINGS.items()}

MARKER_KEYS: tuple[str, ...] = tuple(k for k, (_, d) in SETTINGS.items() if d.marker)

# command-line option (dest) -> settings key; dests are namespaced "fairness_*"
CLI_KEYS: dict[str, str] = v.CLI_KEYS
CLI_KEYS.update({d.dest: k for k, (_, d) in SETTINGS.items() if d.option is not None})

# ini key -> settings key (recfair_model is the default HTTP provider's model)
INI_KEYS: dict[str, str] = {f"recfair_{k}": k for k, (_, d) in SETTINGS.items() if d.ini}


def validate_marker(args: tuple[Any, ...], kwargs: Mapping[str, Any], where: str = "") -> None:
    """Check ``@fairness(...)`` arguments at collection, before any prompt is sent."""
    place = f" on {where}" if where else ""
    allowed = ", ".join(MARKER_KEYS)
    if args:
        raise ConfigError(
            f"@fairness{place} takes keyword arguments only, got positional {args!r}. "
            f"Allowed arguments: {allowed}."
        )
    unknown = sorted(set(kwargs) - set(MARKER_KEYS))
    if unknown:
        guesses = [(key, v.nearest(key, MARKER_KEYS)) for key in unknown]
        said = "; ".join(f"{k!r}: did you mean {g!r}?" if g else repr(k) for k, g in guesses)
        raise ConfigError(
            f"@fairness{place}: unknown argument(s) {said} (the {len(MARKER_KEYS)} marker "
            "arguments are listed in docs/configuration.md)."
        )
    for key, value in kwargs.items():
        try:
            SETTINGS[key][1].parse(value, key, "marker")
        except ConfigError as exc:
            raise ConfigError(f"@fairness{place}: {exc}") from None


def resolve(
    *,
    cli: Mapping[str, Any] | None = None,
    marker: Mapping[str, Any] | None = None,
    ini: Mapping[str, Any] | None = None,
) -> AuditSettings:
    """Merge and validate: ``cli`` keyed by dest or key (None: not given), ``ini`` by ini
    name or key ("": not given), ``marker`` by argument."""
    parsed: dict[str, Any] = {}  # the rest: AuditSettings' defaults
    for source, layer in (("ini", ini), ("marker", marker), ("command-line", cli)):
        for raw_key, value in (layer or {}).items():
            key = _key(raw_key, source)
            blank = source == "ini" and isinstance(value, str) and not value.strip()
            # store_true options arrive as False when absent: do not let them mask ini
            absent = value is None or (value is False and source == "command-line")
            if source != "marker" and (blank or absent):
                continue
            # parsed as given: a value a later layer overrides is still checked
            name, setting = SETTINGS[key]
            parsed[name] = setting.parse(value, key, source)
    return AuditSettings(**parsed)


def _key(raw_key: str, source: str) -> str:
    if raw_key in (MARKER_KEYS if source == "marker" else SETTINGS):
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
