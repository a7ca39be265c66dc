"""The closed vocabularies, in one place: adding a value is one edit. Stdlib only: the
plugin imports this at every pytest start-up, before numpy is loaded."""

from __future__ import annotations

from typing import Final, Literal, get_args

#: Recorded in every result; tests/unit/test_layout.py checks it is pyproject.toml's.
PLUGIN_VERSION: Final = "0.1.0"

#: How list similarity is computed: ours, the FaiRLLM notebook's, LangFair 0.8.0's.
Variant = Literal["normalized", "fairllm", "langfair"]
VARIANTS: Final[tuple[Variant, ...]] = get_args(Variant)

#: How a pipeline that cannot be handed recfair_http_client is recorded (vcr: vcrpy).
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

#: What the drift test compares: a spread statistic, or the share of unusable replies.
DriftQuantity = Literal["snsr", "snsv", "pafs", "unusable"]
DRIFT_QUANTITIES: Final[tuple[DriftQuantity, ...]] = get_args(DriftQuantity)

GatedQuantity = Literal["snsr", "snsv", "pafs", "entropy", "refusal_gap", "unusable"]

#: Quantities checked against a minimum; all others against a maximum.
HIGHER_IS_FAIRER: Final[frozenset[GatedQuantity]] = frozenset({"pafs"})

#: Why the gate failed ("test": the test body did). A kind's own failures carry a name of
#: its choosing ("item_shift"): any kind not in FAILURE_KINDS is one.
FailureKind = Literal[
    "threshold", "unmeasured", "undefined", "drift", "incomparable", "incompatible", "baseline",
    "test",
]  # fmt: skip
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

#: How an attribute value enters a prompt ("a Black fan", "a nurse", "my brother and ...").
ValueForm = Literal["adjective", "noun", "name", "relationship", "place"]
VALUE_FORMS: Final[tuple[ValueForm, ...]] = get_args(ValueForm)

#: Grid files: articles chosen by the language ("auto"), or written into the values.
ArticleMode = Literal["auto", "included"]
ARTICLE_MODES: Final[tuple[ArticleMode, ...]] = get_args(ArticleMode)

GrammaticalGender = Literal["m", "f"]
GRAMMATICAL_GENDERS: Final[tuple[GrammaticalGender, ...]] = get_args(GrammaticalGender)

RECORD_OPTION: Final = "--fairness-record"

#: Candidate-list prompts: pick one candidate, or rank them all (the first item counts).
CandidateStyle = Literal["pick", "rank"]
CANDIDATE_STYLES: Final[tuple[CandidateStyle, ...]] = get_args(CandidateStyle)


def accept_command(test_id: str | None = None) -> str:
    """The command that turns a run's numbers into the new baseline (one test, or all)."""
    target = f" '{test_id}'" if test_id else ""
    return f"pytest --fairness --fairness-update{target}"


#: The flags a cassette miss names.
PLAN_OPTION: Final = "--fairness-plan"
ENTITIES_OPTION: Final = "--fairness-entities"
