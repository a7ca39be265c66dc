"""The declaration of every setting: one field of :class:`AuditSettings` each, whose
metadata (:class:`Setting`) says how it is parsed, whether the marker takes it, its
command-line option and its help text. The package ``__init__`` derives the marker, ini
and option keys from these fields and resolves them.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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
    # budget sits in the engine, which loads numpy: imported when a price is given
    from pytest_recfair.settings.values import HeaderEnvs, Prices

__all__ = ["AuditSettings", "Option", "Setting"]


@dataclass(frozen=True, slots=True)
class Option:
    """The command-line option of a setting: ``--fairness-<flag>`` with this dest."""

    dest: str
    help: str
    metavar: str | None = None


@dataclass(frozen=True, slots=True)
class Setting:
    """How one setting is given: its key (marker argument, ``recfair_<key>`` ini key),
    parser, and where it may be written."""

    key: str
    parse: Parser
    help: str = ""  # the ini key's help; "" -> "default for @fairness(<key>=...)"
    marker: bool = True  # a @fairness argument (else command line / ini only)
    ini: bool = True
    option: Option | None = None


def _s(
    parse: Parser,
    *,
    key: str = "",
    help: str = "",
    marker: bool = True,
    ini: bool = True,
    option: Option | None = None,
) -> dict[str, Setting]:
    """A settings field's declaration, as its metadata (the key defaults to its name)."""
    return {"setting": Setting(key, parse, help, marker, ini, option)}


def _commas(text: str) -> list[str]:
    return text.split(",")


_FAIRNESS_UPDATE = "write or refresh fairness baselines from this run (ini: recfair_update)"
_FAIRNESS_EXPLORE = (
    "explore: measure and report, fail no test on limits, drift or missing baselines; "
    "writes baselines only with --fairness-update (ini: recfair_explore)"
)


@dataclass(frozen=True, slots=True)
class AuditSettings:
    """Everything one audit needs to know, after merging and validation.

    Each field declares its setting (see :func:`_s`): parser, marker or not, option, help.
    """

    # what to audit (marker arguments; ini keys recfair_<name> give project defaults)
    # None: every attribute of the grid
    attr: str | None = field(default=None, metadata=_s(v.optional(v.text)))
    metrics: tuple[MetricName, ...] = field(
        default=("jaccard",), metadata=_s(v.metrics, key="metric")
    )
    k: int = field(default=25, metadata=_s(v.whole(1)))
    variant: Variant = field(default="normalized", metadata=_s(v.choice(VARIANTS)))
    max_snsr: float | None = field(default=None, metadata=_s(v.optional(v.unit)))
    max_snsv: float | None = field(default=None, metadata=_s(v.optional(v.unit)))
    min_pafs: float | None = field(default=None, metadata=_s(v.optional(v.unit)))
    max_entropy: float | None = field(default=None, metadata=_s(v.optional(v.nonneg)))
    max_refusal_gap: float | None = field(default=None, metadata=_s(v.optional(v.unit)))
    # share of replies without a usable list; 1 = off
    max_unusable: float | None = field(default=0.2, metadata=_s(v.optional(v.unit)))
    # share of prompts allowed no valid response
    max_failed: float = field(default=0.0, metadata=_s(v.max_failed))
    tolerance: float = field(default=0.0, metadata=_s(v.tolerance))
    # statistics gated against the baseline; the others are reported
    gated: tuple[Statistic, ...] = field(default=("snsr",), metadata=_s(v.statistics, key="gate"))
    domain: str = field(default="movie", metadata=_s(v.text))
    # fixture, bundled set or file
    seeds: str | None = field(default=None, metadata=_s(v.optional(v.text)))
    entities: int | None = field(  # subsample size; None: every seed entity
        default=None,
        metadata=_s(
            v.optional(v.whole(1)),
            option=Option(
                "fairness_entities", "audit a deterministic subsample of N seed entities", "N"
            ),
        ),
    )
    repeats: int = field(
        default=1,
        metadata=_s(
            v.whole(1),
            option=Option(
                "fairness_repeats",
                "ask each prompt N times (entropy and noise floor when N > 1)",
                "N",
            ),
        ),
    )
    language: str = field(default="en", metadata=_s(v.text))
    perturbation: str | None = field(default=None, metadata=_s(v.optional(v.perturbation)))
    grid: str = field(default="faireval", metadata=_s(v.text))
    templates: str = field(default="natural", metadata=_s(v.text))
    missing: MissingPolicy = field(default="zero", metadata=_s(v.choice(MISSING_POLICIES)))
    # None: "fairllm" with variant="fairllm", else "default"
    parse: ParseStyle | None = field(default=None, metadata=_s(v.optional(v.choice(PARSE_STYLES))))
    # item-side audits: catalogue fields of the recommended items (docs/itemside.md)
    # one field, or several (commas)
    item_field: str | None = field(default=None, metadata=_s(v.optional(v.text)))
    # file; None: the fixture
    catalogue: str | None = field(default=None, metadata=_s(v.optional(v.text)))
    # TV distance from neutral
    max_shift: float | None = field(default=None, metadata=_s(v.optional(v.unit)))
    # exposure audits (kind="exposure", docs/itemside.md): the reference distribution of
    # the item groups, "catalogue" (its own shares) or a history file of interactions
    reference: str = field(default="catalogue", metadata=_s(v.text))
    # popularity groups of a numeric item_field: N quantile groups, or edges "10,100"
    bins: int | tuple[float, ...] | None = field(default=None, metadata=_s(v.optional(v.bins)))
    max_exposure_gap: float | None = field(default=None, metadata=_s(v.optional(v.unit)))
    min_long_tail_share: float | None = field(default=None, metadata=_s(v.optional(v.unit)))
    max_popularity_lift: float | None = field(default=None, metadata=_s(v.optional(v.unit)))
    # candidate-position audits (docs/itemside.md)
    # fixture name or file
    candidates: str | None = field(default=None, metadata=_s(v.optional(v.text)))
    # candidate orders per (entity, group)
    orders: int = field(default=5, metadata=_s(v.whole(2)))
    pick: CandidateStyle = field(default="pick", metadata=_s(v.choice(CANDIDATE_STYLES)))
    max_position_bias: float | None = field(default=None, metadata=_s(v.optional(v.unit)))
    max_missed_rate: float | None = field(default=None, metadata=_s(v.optional(v.unit)))
    # role-play audits (BiasLens, docs/roleplay.md)
    # the kind of audit by its registry name; None: the other settings choose it
    kind: str | None = field(default=None, metadata=_s(v.optional(v.text)))
    # role-play question set: a bundled name ("default") or a CSV/YAML/JSON file
    questions: str | None = field(default=None, metadata=_s(v.optional(v.text)))
    # how role-play answers are read: "parsed" or the paper's rules, "biaslens"
    oracle: str = field(default="parsed", metadata=_s(v.choice(("parsed", "biaslens"))))
    # limit on an attribute x type cell's biased-question rate
    max_biased: float | None = field(default=None, metadata=_s(v.optional(v.unit)))
    # ask with the role statement (system "You are a {role}"); false: without it
    with_role: bool = field(default=True, metadata=_s(v.to_bool))
    # also ask every question without its role and report the role effect
    role_effect: bool = field(default=False, metadata=_s(v.to_bool))
    # published runs: cases never answered (written by python -m pytest_recfair import)
    absent: str | None = field(default=None, metadata=_s(v.optional(v.text)))
    # the model id a callable recommender is reported under (marker only: the ini key
    # recfair_model is the default HTTP provider's model)
    model: str | None = field(default=None, metadata=_s(v.optional(v.text), ini=False))
    # a Python pipeline that builds its own HTTP client: its calls intercepted by vcrpy
    # ("vcr"), one prompt at a time; "none": hand it recfair_http_client instead
    intercept: str = field(
        default="none",
        metadata=_s(
            v.choice(INTERCEPTS),
            help="record a Python pipeline's own HTTP calls through vcrpy: vcr (default: "
            "none; hand it recfair_http_client instead)",
        ),
    )
    # how to run it (command line / ini only)
    record_mode: RecordMode = field(
        default="none",
        metadata=_s(
            v.choice(RECORD_MODES),
            help="cassette record mode: " + ", ".join(RECORD_MODES) + " (default none)",
            marker=False,
            option=Option(
                "fairness_record",
                "cassette record mode: " + ", ".join(RECORD_MODES) + " (default none: replay "
                "only; ini: recfair_record_mode)",
                "MODE",
            ),
        ),
    )
    update: bool = field(
        default=False,
        metadata=_s(
            v.to_bool,
            help="write/refresh baselines instead of comparing (true/false)",
            marker=False,
            option=Option("fairness_update", _FAIRNESS_UPDATE),
        ),
    )
    report: tuple[str, ...] | None = field(
        default=None,
        metadata=_s(
            v.optional(v.paths(shlex.split)),
            help="write a fairness report to this path (" + ", ".join(REPORT_FORMATS) + ")",
            marker=False,
        ),
    )
    concurrency: int = field(
        default=8,
        metadata=_s(
            v.whole(1),
            marker=False,
            option=Option("fairness_concurrency", "at most N requests in flight (default 8)", "N"),
        ),
    )
    # --fairness-update stores even a run of unusable replies
    update_force: bool = field(
        default=False,
        metadata=_s(
            v.to_bool,
            marker=False,
            option=Option(
                "fairness_update_force",
                "with --fairness-update: store the baseline even when too many replies were "
                "unusable (ini: recfair_update_force)",
            ),
        ),
    )
    seed: int = field(  # the entity subsample
        default=0,
        metadata=_s(
            v.whole(0),
            marker=False,
            option=Option(
                "fairness_seed",
                "seed of the entity subsample and perturbations (default 0; the gate's "
                "resampling has its own: ini recfair_resample_seed)",
                "N",
            ),
        ),
    )
    # the gate's sign flips and the intervals' bootstrap draws
    resample_seed: int = field(default=0, metadata=_s(v.whole(0), marker=False))
    alpha: float = field(
        default=0.05,
        metadata=_s(
            v.number(1e-9, 0.5),
            help="significance level of the baseline comparison (default 0.05)",
            marker=False,
            option=Option(
                "fairness_alpha",
                "significance level of the rise-over-baseline test (default 0.05; "
                "ini: recfair_alpha)",
                "X",
            ),
        ),
    )
    n_resamples: int = field(
        default=2000,
        metadata=_s(
            v.whole(10),
            help="bootstrap resamples for confidence intervals (default 2000)",
            marker=False,
        ),
    )
    cassette_dir: str = field(
        default="fixtures/cassettes",
        metadata=_s(
            v.text,
            help="cassette directory, relative to rootdir (default fixtures/cassettes)",
            marker=False,
        ),
    )
    baseline_dir: str = field(
        default="baselines",
        metadata=_s(
            v.text, help="baseline directory, relative to rootdir (default baselines)", marker=False
        ),
    )
    # the baseline's stable name (default: the test's name, not its file)
    baseline: str | None = field(default=None, metadata=_s(v.optional(v.text)))
    # cassettes recorded by vcrpy / pytest-recording, read through vcrpy (comma-separated)
    vcr_cassettes: tuple[str, ...] | None = field(
        default=None,
        metadata=_s(
            v.optional(v.paths(_commas)),
            help="cassettes recorded with vcrpy/pytest-recording to replay from "
            "(comma-separated files or folders, relative to rootdir; YAML or JSON)",
            marker=False,
        ),
    )
    batch: bool = field(  # record missing prompts through the provider's batch API
        default=False,
        metadata=_s(
            v.to_bool,
            help="record missing prompts through the provider's batch API (true/false)",
            marker=False,
            option=Option(
                "fairness_batch",
                "record the prompts that have no recording through the provider's batch API "
                "(OpenAI Batch API, Anthropic Message Batches) at half price, then replay them "
                "(ini: recfair_batch)",
            ),
        ),
    )
    batch_poll: float = field(
        default=10.0,
        metadata=_s(
            v.number(0.01, 3600.0),
            help="seconds before the first batch status poll (default 10; then x1.5, max 60)",
            marker=False,
        ),
    )
    shard_dir: str = field(
        default="fairness-shards",
        metadata=_s(
            v.text,
            help="where --fairness-shard writes shard results (default fairness-shards)",
            marker=False,
        ),
    )
    # live runs: what the provider is sent, budget and plan (docs/providers.md)
    timeout: float = field(
        default=60.0,
        metadata=_s(
            v.number(0.001, None), help="seconds per request to the recommender (default 60)"
        ),
    )
    max_retries: int = field(
        default=5, metadata=_s(v.whole(0), help="retries of a failed request (default 5)")
    )
    # the longest a server's Retry-After or rate-limit headers can hold a request
    max_retry_after: float = field(
        default=120.0,
        metadata=_s(
            v.number(0.0, 3600.0),
            help="seconds a Retry-After or rate-limit header may hold a request, at most "
            "(default 120)",
            marker=False,  # the run's, like the rate limits
        ),
    )
    temperature: float | None = field(  # None: the provider's own (0 for the HTTP ones)
        default=None,
        metadata=_s(
            v.optional(v.number(0.0, 2.0)),
            help="sampling temperature sent to the provider (default: the provider's, 0)",
        ),
    )
    max_tokens: int | None = field(
        default=None,
        metadata=_s(v.optional(v.whole(1)), help="reply length limit sent to the provider"),
    )
    sampling_seed: int | None = field(
        default=None,
        metadata=_s(v.optional(v.whole(0)), help="the model's seed parameter (OpenAI, Gemini)"),
    )
    system: str | None = field(
        default=None,
        metadata=_s(v.optional(v.text), help="system message replacing the templates' one"),
    )
    # a persona: "You are a {role}." opens the system message (docs/roleplay.md)
    role: str | None = field(default=None, metadata=_s(v.optional(v.text)))
    # (header, environment variable) pairs: the values are read from the environment
    extra_headers: HeaderEnvs | None = field(
        default=None,
        metadata=_s(
            v.optional(v.headers),
            help="extra request headers as 'Name: ENV_VAR' pairs (values from the environment)",
        ),
    )
    prices: Prices | None = field(  # USD per million input and output tokens
        default=None,
        metadata=_s(
            v.optional(v.prices), help="USD per million input and output tokens, e.g. '0.15, 0.60'"
        ),
    )
    judge_prices: Prices | None = field(  # the judge's (role-play Why answers): plan, budget
        default=None,
        metadata=_s(v.optional(v.prices), help="the judge's recfair_prices", marker=False),
    )
    max_requests: int | None = field(  # budget of one pytest run; None: no limit
        default=None,
        metadata=_s(
            v.optional(v.whole(0)),
            help="refuse to start live requests beyond this many in one run",
            marker=False,
        ),
    )
    max_cost: float | None = field(  # USD, estimated from prices
        default=None,
        metadata=_s(
            v.optional(v.nonneg),
            help="refuse to start live requests beyond this estimated cost (USD)",
            marker=False,
        ),
    )
    max_reply_chars: int = field(
        default=100_000,
        metadata=_s(
            v.whole(1), help="replies longer than this are cut, with a note (default 100000)"
        ),
    )
    # the per-baseline guarantee (gate/floor.py): each gated member's margin is at least
    # this many of the baseline's own standard errors (0 turns the floor off)
    baseline_floor: float = field(default=1.645, metadata=_s(v.number(0.0, 10.0)))
    # a floor above this is warned about: the baseline is too noisy to gate on
    baseline_noise_limit: float = field(default=0.05, metadata=_s(v.unit))
    # Rate limits to pace to (issue 24): requests / tokens per minute of the key's tier;
    # None: what the provider's rate-limit headers say. Split across xdist workers.
    rpm: int | None = field(
        default=None,
        metadata=_s(
            v.optional(v.whole(1)),
            help="requests per minute to pace live requests to (default: the provider's "
            "rate-limit headers)",
            marker=False,  # the key's tier, not a test's
        ),
    )
    tpm: int | None = field(
        default=None,
        metadata=_s(
            v.optional(v.whole(1)),
            help="tokens per minute to pace live requests to (default: the provider's "
            "rate-limit headers)",
            marker=False,  # the key's tier, not a test's
        ),
    )
    plan: bool = field(
        default=False,
        metadata=_s(
            v.to_bool,
            help="print the plans and send nothing (true/false; --fairness-plan)",
            marker=False,
            option=Option(
                "fairness_plan",
                "print each audit's plan (prompts, already recorded, to ask, tokens, cost, "
                "duration) and send nothing",
            ),
        ),
    )
    explore: bool = field(  # a first look at a model: measure and report, gate nothing
        default=False,
        metadata=_s(
            v.to_bool,
            help="measure and report without gating (true/false; --fairness-explore)",
            marker=False,
            option=Option("fairness_explore", _FAIRNESS_EXPLORE),
        ),
    )
    # quality beside fairness (list-overlap audits; docs/metrics.md "Recommendation quality")
    # every group's quality (catalogue-matched or valid share of the K slots) at least this
    min_quality: float | None = field(default=None, metadata=_s(v.optional(v.unit)))
    # per attribute, best minus worst value's quality at most this
    max_quality_gap: float | None = field(default=None, metadata=_s(v.optional(v.unit)))
    # a drop of quality against the baseline larger than this fails (paired, at alpha)
    quality_tolerance: float = field(default=0.05, metadata=_s(v.unit))
    # the catalogue column naming each item's entity (director, artist, city)
    quality_field: str = field(default="entity", metadata=_s(v.text))

    @property
    def metric(self) -> str:
        """The metrics as one label ("jaccard,serp"): the run's metadata shows this."""
        return ",".join(self.metrics)

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
        for name in THRESHOLD_NAMES:
            value = getattr(self, name)
            if value is not None:
                out[name] = float(value)
        return out
