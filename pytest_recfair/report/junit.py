"""The JUnit XML channel: an audited test's figures as ``<property>`` elements.

``recfair.<attribute>.<statistic> = value`` for the list-overlap tables, each kind's own
numbers from its sections (``report.sections.extra_properties``), and ``recfair.gate``
(pass/fail) once the test is judged.
"""

from __future__ import annotations

import math

from pytest_recfair.report.sections import extra_properties
from pytest_recfair.results import AuditResult
from pytest_recfair.vocab import STATISTICS

__all__ = ["properties"]


def properties(result: AuditResult) -> list[tuple[str, float | int | str]]:
    """JUnit XML properties of one audited test."""
    props: list[tuple[str, float | int | str]] = [("recfair.model", result.meta.model)]
    for a in result.attributes:
        key = "recfair." + a.attribute.casefold().replace(" ", "_")
        for stat in STATISTICS:
            props.append((f"{key}.{stat}", _round(getattr(a, stat).value)))
        props.append((f"{key}.refusal_gap", _round(a.refusal_gap)))
        if a.entropy is not None:
            props.append((f"{key}.entropy", _round(a.entropy)))
    props += extra_properties(result)
    if result.gate is not None:
        props.append(("recfair.gate", "pass" if result.gate.passed else "fail"))
    return props


def _round(x: float) -> float:
    return x if math.isnan(x) else round(float(x), 6)
