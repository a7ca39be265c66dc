"""The closed vocabularies of pytest-recfair, in one place.

Every module that accepts or names one of these (settings, metrics, cassettes, gate,
reports, the plugin's help texts, the JSON schemas) takes the Literal type and its tuple
from here, so adding a value is one edit. Pure stdlib: the plugin imports this at every
pytest start-up, before numpy is loaded.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

#: The plugin's version, recorded in every result (``pytest_recfair.__version__``; the
#: same as pyproject.toml's, which tests/unit/test_layout.py checks).
PLUGIN_VERSION: Final = "0.1.0"

#: How list similarity is computed: ours, the FaiRLLM notebook's, LangFair 0.8.0's.
Variant = Literal["normalized", "fairllm", "langfair"]
VARIANTS: Final[tuple[Variant, ...]] = get_args(Variant)

#: How a Python pipeline's own HTTP calls are recorded when it cannot be handed
#: recfair_http_client: "none" (not intercepted) or "vcr" (vcrpy patches the HTTP
#: libraries).
INTERCEPTS: Final[tuple[str, ...]] = ("none", "vcr")

#: List-similarity metrics (each @K).
MetricName = Literal["jaccard", "serp", "prag"]
METRICS: Final[tuple[MetricName, ...]] = get_args(MetricName)

#: What a missing or empty reply contributes: similarity 0, or the entity left out.
MissingPolicy = Literal["zero", "skip"]
MISSING_POLICIES: Final[tuple[MissingPolicy, ...]] = get_args(MissingPolicy)

#: Spread statistics over an attribute's values (SNSR/SNSV lower is fairer, PAFS higher).
Statistic = Literal["snsr", "snsv", "pafs"]
STATISTICS: Final[tuple[Statistic, ...]] = get_args(Statistic)

#: What the drift test compares with a baseline: a spread statistic, or the share of
#: unusable replies (empty, refused, unparseable; higher is worse).
DriftQuantity = Literal["snsr", "snsv", "pafs", "unusable"]
DRIFT_QUANTITIES: Final[tuple[DriftQuantity, ...]] = get_args(DriftQuantity)

#: Everything the gate checks: the spread statistics, the entropy over repeats, the gap
#: in refusal rates between values and the share of unusable replies.
GatedQuantity = Literal["snsr", "snsv", "pafs", "entropy", "refusal_gap", "unusable"]

#: Quantities for which a LOWER value is worse (checked against a minimum); all others
#: are checked against a maximum.
HIGHER_IS_FAIRER: Final[frozenset[GatedQuantity]] = frozenset({"pafs"})

#: Why the gate failed: a crossed threshold; a threshold that could not be checked (not
#: measured: entropy without repeats; undefined: NaN); a significant drift over baseline;
#: a drift that could not be tested; a baseline that is incompatible, missing or unusable.
#: "test": the test body itself failed (an assertion on fairness_result), so the audit did.
#: A kind of audit's own limits and drifts carry a name of the kind's choosing instead
#: (the item side's "item_shift", the candidate position's "position"): any failure kind
#: not in FAILURE_KINDS is one, and the report words it from its fields and ``detail``.
FailureKind = Literal[
    "threshold",
    "unmeasured",
    "undefined",
    "drift",
    "incomparable",
    "incompatible",
    "baseline",
    "test",
]
FAILURE_KINDS: Final[tuple[FailureKind, ...]] = get_args(FailureKind)

#: Cassette record modes (see the policy table in ``cassettes``).
RecordMode = Literal["none", "once", "new_episodes", "all", "rewrite"]
RECORD_MODES: Final[tuple[RecordMode, ...]] = get_args(RecordMode)

#: Report formats, by file extension.
ReportFormat = Literal[".json", ".md", ".html"]
REPORT_FORMATS: Final[tuple[ReportFormat, ...]] = get_args(ReportFormat)

#: Reply parsing styles: ours, or the FaiRLLM notebook's cleaning steps.
ParseStyle = Literal["default", "fairllm"]
PARSE_STYLES: Final[tuple[ParseStyle, ...]] = get_args(ParseStyle)

#: HTTP provider wire formats.
ProviderKind = Literal["openai", "anthropic", "gemini", "ollama"]
PROVIDER_KINDS: Final[tuple[ProviderKind, ...]] = get_args(ProviderKind)

#: How an attribute value enters a prompt: as an adjective ("a Black fan"), a noun ("a
#: nurse"), a name, a relationship ("my brother and his boyfriend") or a place.
ValueForm = Literal["adjective", "noun", "name", "relationship", "place"]
VALUE_FORMS: Final[tuple[ValueForm, ...]] = get_args(ValueForm)

#: Grid files: articles chosen by the language ("auto"), or written into the values.
ArticleMode = Literal["auto", "included"]
ARTICLE_MODES: Final[tuple[ArticleMode, ...]] = get_args(ArticleMode)

#: Grammatical gender of a translated noun (masculine, feminine).
GrammaticalGender = Literal["m", "f"]
GRAMMATICAL_GENDERS: Final[tuple[GrammaticalGender, ...]] = get_args(GrammaticalGender)

#: The command-line flag that picks the cassette record mode.
RECORD_OPTION: Final = "--fairness-record"

#: Candidate-list prompts: pick one candidate, or rank them all (the first item counts).
CandidateStyle = Literal["pick", "rank"]
CANDIDATE_STYLES: Final[tuple[CandidateStyle, ...]] = get_args(CandidateStyle)

#: The command-line flag that accepts a run's numbers as the new baseline.
ACCEPT_OPTION: Final = "--fairness-update"


def accept_command(test_id: str | None = None) -> str:
    """The command that turns a run's numbers into the new baseline (one test, or all)."""
    target = f" '{test_id}'" if test_id else ""
    return f"pytest --fairness {ACCEPT_OPTION}{target}"


#: The command-line flags a cassette miss names: print the plans and send nothing; the
#: entity subsample size.
PLAN_OPTION: Final = "--fairness-plan"
ENTITIES_OPTION: Final = "--fairness-entities"
