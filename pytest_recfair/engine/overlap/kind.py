"""The list-overlap audit (FaiRLLM / FairEval): neutral vs attribute-conditioned lists.
Titles of one entity merge to one key in the default parse style only: the FaiRLLM notebook
compares exact titles."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_recfair.engine.base import (
    AuditInputs,
    Merged,
    PooledKind,
    Rebuild,
    Scored,
    Sent,
    ShardResult,
    attributes_of,
    merged_cost,
    merged_meta,
    mixed_error,
)
from pytest_recfair.engine.overlap import evidence as overlap_evidence
from pytest_recfair.engine.overlap import quality as qg
from pytest_recfair.engine.overlap.tally import Tally, TallyConfig, merge
from pytest_recfair.errors import DataError
from pytest_recfair.gate import unanswered
from pytest_recfair.prompts.cases import PromptCase, build_cases
from pytest_recfair.prompts.grids import Grid
from pytest_recfair.prompts.seeds import Entity
from pytest_recfair.replies import matching, parse
from pytest_recfair.replies.catalogue import Catalogue
from pytest_recfair.report.fmt import Table, fmt, fmt_pair
from pytest_recfair.results import AuditResult, GateFailure, ListMeta
from pytest_recfair.settings import AuditSettings

if TYPE_CHECKING:
    from pytest_recfair.providers.runstate import RunOutcome
    from pytest_recfair.vocab import ParseStyle


@dataclasses.dataclass
class OverlapScorer:
    """A list-overlap audit's tally, fed one chunk of entities' replies at a time."""

    settings: AuditSettings
    tally: Tally

    def add(self, cases: Sequence[PromptCase], outcome: RunOutcome) -> None:
        s = self.settings
        replies = parse_all(cases, outcome.completions, s.k, s.parse_style)
        if outcome.errors:
            replies = mark_failed(replies, outcome.errors)
        raw = replies
        if self.tally.quality is not None:  # titles as written, before merging to keys
            self.tally.quality.add(replies)
        if s.parse_style == "default":
            replies, merges = canonicalize(replies)
            self.tally.merges += merges
        self.tally.add(replies)
        self.tally.evidence.add(raw, replies, outcome.completions, self.tally)
        self.tally.prompt_tokens += outcome.usage.prompt_tokens
        self.tally.completion_tokens += outcome.usage.completion_tokens
        self.tally.models.update(c.model for c in outcome.completions.values() if c.model)

    def scored(self) -> Scored:
        s, q = self.settings, self.tally.quality
        self.tally.check_complete()
        boot = {"n_resamples": s.n_resamples, "seed": s.resample_seed}
        # quality first: it draws the resample weights the tables reuse (results forgets them)
        extras = {} if q is None else {"overlap": {"quality": qg.quality_results(q, **boot)}}
        attributes = self.tally.results(n_resamples=s.n_resamples, seed=s.resample_seed)
        evidence = overlap_evidence.entries(self.tally, attributes)
        return Scored(attributes, self.tally.merges, extras, evidence=evidence)

    def part(self) -> Tally:
        return self.tally

    def absorb(self, part: Tally) -> None:
        self.tally = merge([self.tally, part])  # fixed-point sums: as if added here

    def payload(self, sent: Sent) -> dict[str, Any]:
        counted = {"cases": sent.prompts, "failed": [dataclasses.asdict(f) for f in sent.failed]}
        return {"tally": self.tally, "failures": counted}


class OverlapSections:
    """List-overlap results are the core tables every format renders: no section of its own."""

    def measure(self, result: AuditResult) -> str:
        m = result.meta
        return f"{m.metric}@{m.k} {m.variant}" if isinstance(m, ListMeta) else "list overlap"

    def tables(self, data: Any) -> list[Table]:
        """Recommendation quality: every group's in rows, each attribute's extremes in notes."""
        q = (data or {}).get("quality")
        if not q:
            return []
        lead, *notes = qg.quality_lines(q)
        head = ["group", "quality [95% CI]", "valid", "length", "entities"]
        rows = [
            [str(g["group"]), fmt(g["quality"]) + fmt_pair(g["ci"]), fmt(g["valid"]),
             fmt(g["length"], 1), str(g["n"])]
            for g in q["groups"]
        ]  # fmt: skip
        rows += [[f"{a['attribute']} gap", fmt(a["gap"]) + fmt_pair(a["gap_ci"]), "", "", ""]
                 for a in q["attributes"]]  # fmt: skip
        if all(g["quality"] == 1.0 for g in q["groups"]):  # nothing to read in rows of 1.000
            rows, notes = [], [*notes, f"1.000 for every group ({len(q['groups'])} groups)"]
        return [Table("Recommendation quality", head, rows, lead, [n.strip() for n in notes])]

    def brief(self, data: Any) -> str:
        return ""  # the attribute tables carry it (report/terminal.py)

    def properties(self, data: Any) -> list[tuple[str, float | int | str]]:
        return qg.quality_properties((data or {}).get("quality"))


class OverlapAudit:
    """The FaiRLLM list-overlap audit, and the default kind."""

    name = "overlap"
    sections = OverlapSections()

    def build_cases(
        self, settings: AuditSettings, grid: Grid, entities: Sequence[Entity], inputs: AuditInputs
    ) -> list[PromptCase]:
        """The recommendation-list prompts (neutral and per attribute value)."""
        s = settings
        return build_cases(
            grid=grid, templates=s.templates, entities=list(entities), domain=s.domain,
            k=s.k, language=s.language, perturbation=s.perturbation, seed=s.seed,
            repeats=s.repeats, attributes=None if s.attr is None else [s.attr],
        )  # fmt: skip

    def scorer(
        self,
        settings: AuditSettings,
        entities: Sequence[str],
        first: Sequence[PromptCase],
        inputs: AuditInputs,
    ) -> OverlapScorer:
        s, asked = settings, [(c.attribute, c.value) for c in first if c.value is not None]
        layout = {
            a: list(dict.fromkeys(v for b, v in asked if b == a)) for a in attributes_of(first)
        }
        tally = Tally.start(
            entities, layout, TallyConfig(s.metrics, s.k, s.repeats, s.variant, s.missing)
        )
        tally.quality = qg.QualityTally.start(
            entities, layout, s.k, inputs.catalogue, s.quality_field
        )
        return OverlapScorer(settings, tally)

    def merge(
        self, settings: AuditSettings, parts: Sequence[ShardResult], rebuild: Rebuild
    ) -> Merged:
        """The shards' tallies united (the prompts are never rebuilt), each shard once."""
        meta = merged_meta(parts)
        tallies = [r.tally for r in parts if r.tally is not None]
        if len(tallies) != len(parts):
            raise DataError(mixed_error(parts))
        tally = merge(tallies)
        models = {str(r.meta.get("model")) for r in parts}
        meta["model"] = models.pop() if len(models) == 1 else ",".join(sorted(tally.models))
        counted = [p.failures for p in parts if p.failures is not None]
        sent = Sent(
            sum(int(c["cases"]) for c in counted),
            [unanswered.FailedPrompt(**f) for c in counted for f in c["failed"]],
            tally.prompt_tokens, tally.completion_tokens, merged_cost(parts), set(tally.models),
        )  # fmt: skip
        return Merged(meta, OverlapScorer(settings, tally), sent)

    def failures(
        self, settings: AuditSettings, result: AuditResult, baseline: AuditResult | None
    ) -> tuple[GateFailure, ...]:
        # the list-overlap gate (pytest_recfair.gate.thresholds) judges the similarities;
        # the kind judges its recommendation quality (engine/overlap/quality.py)
        return qg.quality_failures(settings, _quality(result), _quality(baseline))


OVERLAP = OverlapAudit()


class ListKind(PooledKind):
    """A pooled kind reading catalogue items off list-overlap replies (item side, exposure)."""

    # the input files the plugin checks before any test runs (plugin/collection.py)
    named_inputs = ("catalogue",)

    # each kind's own, at collection and before sending: a bad setting stops here
    check_catalogue: Callable[[AuditSettings, Catalogue | None, Sequence[Path]], object]

    def build_cases(
        self, settings: AuditSettings, grid: Grid, entities: Sequence[Entity], inputs: AuditInputs
    ) -> list[PromptCase]:
        # every run path builds the first entity's cases before sending anything: a wrong
        # item_field, a missing catalogue or a bad bins/reference stops the audit here
        self.check_catalogue(settings, inputs.catalogue, inputs.where)
        return OVERLAP.build_cases(settings, grid, entities, inputs)


def _quality(result: AuditResult | None) -> Any:
    """The quality results of a list-overlap result (None for a result without them)."""
    return None if result is None else (result.extras.get("overlap") or {}).get("quality")


class Reply(NamedTuple):
    """One parsed reply to one prompt (what the tally scores); a named tuple: 62,000 a
    paper-scale run, built at C speed."""

    case: PromptCase
    items: list[str] | None  # None: no completion at all (provider error)
    status: str


def parse_all(
    cases: Sequence[PromptCase], completions: Mapping[str, Any], k: int, style: ParseStyle
) -> list[Reply]:
    """Parse every reply; identical texts (fair values repeat the neutral list) parse once
    and share one list, which nothing downstream changes."""
    seen: dict[str, tuple[list[str], str]] = {}
    out = []
    for case in cases:
        completion = completions.get(case.id)
        if completion is None:  # no reply at all: counted as missing, status "empty"
            out.append(Reply(case, None, str(parse.reply(None, k, style=style).status.value)))
            continue
        hit = seen.get(completion.text)
        if hit is None:
            parsed = parse.reply(completion.text, k, style=style)
            hit = seen[completion.text] = (parsed.items, str(parsed.status.value))
        out.append(Reply(case, *hit))
    return out


def mark_failed(replies: list[Reply], errors: Mapping[str, str]) -> list[Reply]:
    """Replies of failed prompts, or compared with a failed neutral prompt, get status
    "failed" and no list: the tally leaves them out of the value's mean, never scores them."""
    dead = {
        (r.case.entity_id, r.case.repeat)
        for r in replies
        if r.case.attribute is None and r.case.id in errors
    }
    return [
        r._replace(items=None, status=qg.FAILED)
        if r.case.id in errors or (r.case.entity_id, r.case.repeat) in dead
        else r
        for r in replies
    ]


def canonicalize(replies: list[Reply]) -> tuple[list[Reply], int]:
    """Map every title of one entity (all its lists) to one canonical key; replies with
    equal lists share one list of keys (``lists.encode`` interns such a list once)."""
    by_entity: dict[str, list[int]] = {}
    for i, r in enumerate(replies):
        if r.items is not None:
            by_entity.setdefault(r.case.entity_id, []).append(i)
    out = list(replies)
    merges = 0
    for entity_id, idx in by_entity.items():
        lists = [replies[i].items or [] for i in idx]
        canon, merged = matching.canonicalize(lists, entity=entity_id)
        merges += len(merged)
        for i, keys in zip(idx, canon, strict=True):
            out[i] = Reply(replies[i].case, keys, replies[i].status)
    return out, merges
