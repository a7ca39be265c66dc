"""The item-side audit (LMRec): does a group's prompt shift the properties of the items?

Prompts are the list-overlap audit's (any grid and template set, e.g. the implicit grid
with the ``lmrec`` conversational templates); each recommended title is matched to the
catalogue, and :mod:`.scoring` measures, per catalogue field, the share of
each category per group, the shift of each group from the neutral prompt (total variation
distance) with a family-wise permutation test over entities, and the LMRec association
score. Gated by ``max_shift`` (absolute) and against the baseline's per-entity counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_recfair.engine.base import AuditInputs, Scored
from pytest_recfair.engine.items import evidence
from pytest_recfair.engine.items import scoring as itemside
from pytest_recfair.engine.items.sections import KEY, ItemSections
from pytest_recfair.engine.overlap.kind import list_cases
from pytest_recfair.engine.overlap.scoring import parse_all
from pytest_recfair.engine.pooled import PooledKind, PooledScorer
from pytest_recfair.errors import ConfigError
from pytest_recfair.prompts.cases import PromptCase
from pytest_recfair.prompts.grids import Grid
from pytest_recfair.prompts.seeds import Entity
from pytest_recfair.replies.catalogue import Catalogue
from pytest_recfair.results import AuditResult, GateFailure
from pytest_recfair.settings import AuditSettings

if TYPE_CHECKING:
    pass

__all__ = ["ITEMS", "ItemAudit"]


class ItemAudit(PooledKind):
    """The LMRec item-side audit: item properties per group, scored over all entities."""

    name = KEY
    sections = ItemSections()

    def wants(self, settings: AuditSettings) -> bool:
        return settings.item_field is not None

    def build_cases(
        self,
        settings: AuditSettings,
        grid: Grid,
        entities: Sequence[Entity],
        attributes: list[str] | None,
        inputs: AuditInputs,
    ) -> list[PromptCase]:
        # every run path builds the first entity's cases before sending anything: a wrong
        # item_field, a missing catalogue or a continuous field stops the audit here
        itemside.check_fields(inputs.catalogue, _fields(settings), settings.item_field or "")
        return list_cases(settings, grid, entities, attributes)

    def scorer(
        self,
        settings: AuditSettings,
        entities: Sequence[str],
        first: Sequence[PromptCase],
        inputs: AuditInputs,
    ) -> PooledScorer:
        catalogue = inputs.catalogue
        if catalogue is None:
            raise ConfigError(
                f"@fairness(item_field={settings.item_field!r}) needs a catalogue: give "
                "catalogue= a CSV/JSON/YAML file (marker or ini recfair_catalogue), or "
                "override the recfair_catalogue fixture"
            )
        return PooledScorer(lambda cases, replies: _score(settings, catalogue, cases, replies))

    def failures(
        self, settings: AuditSettings, result: AuditResult, baseline: AuditResult | None
    ) -> tuple[GateFailure, ...]:
        """``max_shift`` crossed (and significant), or the largest shift rose vs baseline."""
        now = _results(result)
        before = {r.attribute: r for r in _results(baseline)} if baseline else {}
        out = []
        for res in now:
            fails = itemside.item_failures(
                res, before.get(res.attribute), max_shift=settings.max_shift,
                tolerance=settings.tolerance, alpha=settings.alpha, seed=settings.seed,
                n_resamples=settings.n_resamples,
            )  # fmt: skip
            out += [
                GateFailure(
                    "item_shift",
                    attribute=res.attribute,
                    value=f.value,
                    limit=f.limit,
                    baseline=f.baseline,
                    p_value=f.p_value,
                    alpha=settings.alpha,
                    detail=f.message(),
                    group=f.group,
                )
                for f in fails
            ]
        return tuple(out)


def _score(
    settings: AuditSettings,
    catalogue: Catalogue,
    cases: Sequence[PromptCase],
    completions: Mapping[str, Any],
) -> Scored:
    """Every attribute's item-side results from all the audit's replies."""
    fields = _fields(settings)
    replies = parse_all(cases, completions, settings.k, settings.parse_style)
    titles = [r.items for r in replies]
    attrs = list(dict.fromkeys(c.attribute for c in cases if c.attribute is not None))
    matched = itemside.match_replies(titles, catalogue)  # once for all attributes
    results = [
        itemside.score_items(
            cases, titles, catalogue, fields, attribute=attr,
            n_permutations=settings.n_resamples, n_resamples=settings.n_resamples,
            seed=settings.seed, matched=matched,
        )
        for attr in attrs
    ]  # fmt: skip
    shown = evidence.entries(cases, titles, matched[0], catalogue, completions, results)
    return Scored(
        (), 0, {KEY: itemside.ItemResults(catalogue.source, tuple(results))}, evidence=shown
    )


def _fields(settings: AuditSettings) -> list[str]:
    return [f.strip() for f in (settings.item_field or "").split(",") if f.strip()]


def _results(result: AuditResult | None) -> tuple[itemside.ItemSideResult, ...]:
    """Typed as this run scored them; read from JSON data only for a stored baseline."""
    data = result.extras.get(KEY) if result is not None else None
    return itemside.ItemResults.of(data).attributes


ITEMS = ItemAudit()
