"""The report sections a kind of audit supplies for its own results, in every format. The
report never names a kind: each ``extras`` key is looked up through what the kind registry
hands :func:`use`; a key no kind claims is an error."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from pytest_recfair.metrics.common import holm
from pytest_recfair.report.fmt import Table
from pytest_recfair.results import AuditResult, Stat
from pytest_recfair.vocab import STATISTICS


@dataclass(frozen=True)
class KindRow:
    """One number a kind compares between two stored runs (A, B) and its test."""

    attribute: str
    metric: str  # what it is about within the attribute: a field, a question type, ...
    statistic: str  # "position bias", "largest shift", ...
    a: float
    b: float
    p: float | None  # one-sided "B worse than A by > tolerance", family-wise; None: no test
    n_paired: int


@dataclass(frozen=True)
class KindComparison:
    """A kind's comparison of one test: its rows, the test it ran (or why none), notes."""

    rows: tuple[KindRow, ...]
    test: str
    notes: tuple[str, ...] = ()

    @classmethod
    def holm(cls, rows: list[KindRow], test: str, notes: list[str]) -> KindComparison:
        """Rows with p-values made family-wise over the test (Holm)."""
        tested = [i for i, r in enumerate(rows) if r.p is not None]
        for i, p in zip(tested, holm([rows[i].p or 0.0 for i in tested]), strict=True):
            rows[i] = replace(rows[i], p=p)
        return cls(tuple(rows), f"{test}, Holm" if tested else "no test", tuple(notes))


class KindSections(Protocol):
    """How one kind of audit shows its results (``data``: its entry of ``extras``)."""

    def measure(self, result: AuditResult) -> str:
        """What the audit measures, for the run line ("item side, top 10")."""

    def tables(self, data: Any) -> list[Table]:
        """Its results as tables, which every channel renders (terminal ``-v``, Markdown, HTML)."""

    def brief(self, data: Any) -> str:
        """The figure for a test's short summary line ("largest shift 0.112"); "" none."""

    def properties(self, data: Any) -> list[tuple[str, float | int | str]]:
        """JUnit XML properties ``recfair.<attribute>.<statistic>``."""


#: A kind's sections by the name its results are kept under (None: the default kind's).
_lookup: list[Callable[[str | None], KindSections]] = []


def use(lookup: Callable[[str | None], KindSections]) -> None:
    """Find the kinds' sections with ``lookup`` (called by the registry when loaded)."""
    _lookup[:] = [lookup]


def _sections(name: str | None) -> KindSections:
    if not _lookup:
        raise LookupError(
            "report: no kinds of audit are registered; import pytest_recfair.engine.registry "
            "before rendering results"
        )
    return _lookup[0](name)


def kind_sections(result: AuditResult) -> list[tuple[KindSections, Any]]:
    """The sections of each kind whose results ``result`` holds, with those results."""
    return [(_sections(name), data) for name, data in result.extras.items()]


def measure(result: AuditResult) -> str:
    """What the audit measures: its kind's words, or the list-overlap metric@k variant."""
    return _sections(next(iter(result.extras), None)).measure(result)


def kind_tables(result: AuditResult) -> list[Table]:
    """The tables of the kinds' own results."""
    return [t for sections, data in kind_sections(result) for t in sections.tables(data)]


def extra_properties(result: AuditResult) -> list[tuple[str, float | int | str]]:
    return [p for sections, data in kind_sections(result) for p in sections.properties(data)]


def run_parts(result: AuditResult) -> list[str] | None:
    """The kind's own run line description (optional ``run_parts``); None: the default."""
    for sections, data in kind_sections(result):
        if (own := getattr(sections, "run_parts", None)) is not None:
            parts: list[str] = own(result, data)
            return parts
    return None


def compare_kind(
    a: AuditResult, b: AuditResult, *, tolerance: float, n_resamples: int, seed: int
) -> KindComparison | None:
    """The comparison of two stored results by ``b``'s kind (optional ``compare``); None
    when either lacks that kind's results or the kind does not compare."""
    for name in b.extras:
        own = getattr(_sections(name), "compare", None)
        if own is not None and name in a.extras:
            found: KindComparison = own(
                a, b, tolerance=tolerance, n_resamples=n_resamples, seed=seed
            )
            return found
    return None


def series(result: AuditResult) -> list[tuple[str, Stat]]:
    """The test's headline numbers: SNSR per attribute, and a kind's own ``series``."""
    out = [(f"{a.attribute} · SNSR ({a.metric}@{a.k})", a.snsr) for a in result.attributes]
    for sections, data in kind_sections(result):
        if (own := getattr(sections, "series", None)) is not None:
            out += own(data)
    return out


def properties(result: AuditResult) -> list[tuple[str, float | int | str]]:
    """JUnit XML properties of one audited test."""
    props: list[tuple[str, float | int | str]] = [("recfair.model", result.meta.model)]
    for a in result.attributes:
        key = "recfair." + a.attribute.casefold().replace(" ", "_")
        figures = {s: getattr(a, s).value for s in STATISTICS} | {"refusal_gap": a.refusal_gap}
        figures |= {} if a.entropy is None else {"entropy": a.entropy}
        props += [
            (f"{key}.{s}", x if math.isnan(x) else round(float(x), 6)) for s, x in figures.items()
        ]
    props += extra_properties(result)
    if result.gate is not None:
        props.append(("recfair.gate", "pass" if result.gate.passed else "fail"))
    return props
