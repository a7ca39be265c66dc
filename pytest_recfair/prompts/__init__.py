"""Prompts: seed entities, attribute grids, templates, languages, typos and build_cases.

Pure: stdlib, yaml and jsonschema only, so it can be used from a notebook or by the
simulated recommender without pytest or httpx.
"""

from __future__ import annotations

from pytest_recfair.prompts.cases import PromptCase, build_cases, case_id
from pytest_recfair.prompts.grids import (
    BUNDLED_GRIDS,
    Attribute,
    AttributeValue,
    Grid,
    GridError,
    load_grid,
)
from pytest_recfair.prompts.languages import LANGUAGES, render_value
from pytest_recfair.prompts.match import PromptMatch, match_prompt
from pytest_recfair.prompts.perturb import Typo, parse_perturbation
from pytest_recfair.prompts.seeds import (
    BUNDLED_SEEDS,
    Entity,
    load_seeds,
    seeds_digest,
    slugify,
    subsample,
)
from pytest_recfair.prompts.templates import (
    BUNDLED_TEMPLATES,
    TemplateSet,
    load_templates,
    templates_digest,
)

__all__ = [
    "BUNDLED_GRIDS",
    "BUNDLED_SEEDS",
    "BUNDLED_TEMPLATES",
    "LANGUAGES",
    "Attribute",
    "AttributeValue",
    "Entity",
    "Grid",
    "GridError",
    "PromptCase",
    "PromptMatch",
    "TemplateSet",
    "Typo",
    "build_cases",
    "case_id",
    "load_grid",
    "load_seeds",
    "load_templates",
    "match_prompt",
    "parse_perturbation",
    "render_value",
    "seeds_digest",
    "slugify",
    "subsample",
    "templates_digest",
]
