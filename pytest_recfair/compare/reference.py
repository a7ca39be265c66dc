"""``--fairness-compare=REF`` with ``--fairness-compare-fail=EXPR`` (like pytest-benchmark's
``--benchmark-compare-fail``): one audit gated against a stored run. Pure.

REF is a JSON report path or a ``--fairness-history`` entry (number, ``latest``, ``-N``,
commit prefix). EXPR is a comma list of rules ``NAME:[+|-]LIMIT[%]``: NAME picks figures
by the last part of their dotted key (``<attribute>.<metric>.<statistic>``, or a kind's
JUnit property name without ``recfair.``) and optionally others (``religion.snsr``);
LIMIT is the change allowed in the worse direction (a rise; a fall where higher is
fairer; ``+``/``-`` sets it), absolute or ``%`` of the reference value. Each figure worse
by more is a gate failure of kind ``compare``; a test the reference lacks is a note, one
audited with other settings fails (a change of yardstick is no comparison).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_recfair.errors import ConfigError, RecfairError
from pytest_recfair.gate import baselines, drift
from pytest_recfair.report.history import find_entry, load_run
from pytest_recfair.report.sections import extra_properties
from pytest_recfair.results import AuditResult, GateFailure, GateOutcome
from pytest_recfair.vocab import HIGHER_IS_FAIRER

COMPARE_KIND = "compare"  # the gate failure kind of a figure worse than the reference
_RULE = re.compile(
    r"^\s*([A-Za-z0-9_.\-]+)\s*:\s*([+-]?)\s*([0-9]*\.?[0-9]+(?:e-?\d+)?)\s*(%?)\s*$"
)
_GRAMMAR = (
    "rules NAME:[+|-]LIMIT[%] separated by commas, e.g. snsr:0.02,pafs:0.05 or "
    "religion.snsr:10% (docs/reports.md)"
)
_STATS = ("snsr", "snsv", "pafs", "refusal_gap", "entropy", "unusable")


@dataclass(frozen=True, slots=True)
class Rule:
    """One ``NAME:[+|-]LIMIT[%]`` rule."""

    parts: tuple[str, ...]  # the name's dotted parts, casefolded; the last is the figure
    limit: float
    relative: bool  # LIMIT% of the reference value
    sign: int  # +1: a rise is worse, -1: a fall is worse, 0: by the figure's name

    def picks(self, key: str) -> bool:
        have = key.casefold().split(".")
        return have[-1] == self.parts[-1] and set(self.parts[:-1]) <= set(have[:-1])

    def worse(self, key: str) -> int:
        """+1 when a rise of ``key`` is worse, -1 when a fall is."""
        if self.sign:
            return self.sign
        return -1 if key.rsplit(".", 1)[-1] in HIGHER_IS_FAIRER else 1

    def text(self) -> str:
        sign = {1: "+", -1: "-", 0: ""}[self.sign]
        return f"{'.'.join(self.parts)}:{sign}{self.limit:g}{'%' if self.relative else ''}"


def parse_rules(text: str) -> tuple[Rule, ...]:
    """The rules of ``--fairness-compare-fail``; a ConfigError names a bad one."""
    rules = []
    for part in text.split(","):
        m = _RULE.match(part)
        if m is None or not math.isfinite(float(m.group(3))):
            raise ConfigError(f"--fairness-compare-fail {part.strip()!r}: expected {_GRAMMAR}.")
        name, sign, limit, pct = m.groups()
        parts = tuple(name.casefold().split("."))
        rules.append(Rule(parts, float(limit), bool(pct), {"+": 1, "-": -1, "": 0}[sign]))
    return tuple(rules)


@dataclass(frozen=True)
class Reference:
    """The stored run a pytest run is gated against, and how the messages name it."""

    label: str
    results: Mapping[str, AuditResult]


def load_reference(ref: str, *, history_dir: Path | None, cwd: Path) -> Reference:
    """The run ``--fairness-compare=REF`` names: a file (relative to ``cwd``), else an
    entry of ``history_dir``. A ConfigError says what was expected."""
    path = cwd / ref
    try:
        if path.is_file():
            run = load_run(path)
            label = f"--fairness-compare {ref}"
        elif history_dir is not None:
            run = load_run(find_entry(history_dir, ref))
            label = f"history entry {run.path.name}"
        else:
            raise ConfigError(
                f"--fairness-compare {ref!r}: no such file; give a JSON run report, or "
                f"name an entry (number, latest, -N, commit prefix) of --fairness-history=DIR."
            )
    except ConfigError:
        raise
    except RecfairError as exc:
        raise ConfigError(f"--fairness-compare {ref!r}: {exc}") from None
    extra = [str(run.entry[k])[:n] for k, n in (("commit", 7), ("date", 10)) if run.entry.get(k)]
    if extra:
        label += f" ({', '.join(extra)})"
    return Reference(label, {r.meta.test_id: r for r in run.results})


def figures(result: AuditResult) -> dict[str, float]:
    """Every figure of ``result`` by dotted key (the names the rules pick from)."""
    out: dict[str, float] = {}
    for a in result.attributes:
        key = f"{a.attribute.casefold().replace(' ', '_')}.{a.metric}"
        values = (a.snsr.value, a.snsv.value, a.pafs.value, a.refusal_gap, a.entropy,
                  drift.unusable_share(a))  # fmt: skip
        out |= {
            f"{key}.{s}": float(v) for s, v in zip(_STATS, values, strict=True) if v is not None
        }
    for name, prop in extra_properties(result):
        if isinstance(prop, int | float) and not isinstance(prop, bool):
            out[name.removeprefix("recfair.")] = float(prop)
    return out


def _failure(key: str, before: float, now: float, rule: Rule, label: str) -> GateFailure | None:
    worse = rule.worse(key)
    change = (now - before) * worse  # > 0: worse by this much
    allowed = rule.limit * abs(before) / 100 if rule.relative else rule.limit
    if not (math.isfinite(change) and change > allowed + 1e-12):
        return None
    verb = "rose" if now > before else "fell"
    return GateFailure(
        COMPARE_KIND,
        attribute=key.split(".", 1)[0],
        value=now,
        limit=allowed,
        baseline=before,
        detail=(
            f"{key} {verb} by {abs(now - before):.3f} ({before:.3f} -> {now:.3f}) against "
            f"the reference {label}; --fairness-compare-fail {rule.text()} allows "
            f"{allowed:.3g}: fix the model, or compare with another reference"
        ),
    )


def _compared(
    result: AuditResult, ref: AuditResult, rules: Sequence[Rule], label: str
) -> tuple[list[GateFailure], list[str]]:
    why = baselines.result_incompatibility(ref, result)
    if why is not None:
        detail = f"not compared with the reference {label}: {why.split('. ')[0]}"
        return ([GateFailure(COMPARE_KIND, detail=detail)] if rules else []), [detail]
    before, now = figures(ref), figures(result)
    failures, changes = [], []
    for key in sorted(set(before) & set(now)):
        picked = [r for r in rules if r.picks(key)]
        for rule in picked:
            f = _failure(key, before[key], now[key], rule, label)
            if f is not None:
                failures.append(f)
                break
        if not rules and key.endswith(".snsr"):
            changes.append(f"{key} {before[key]:.3f} -> {now[key]:.3f}")
    notes = [f"against the reference {label}: " + "; ".join(changes)] if changes else []
    return failures, notes


def apply_reference(
    result: AuditResult, reference: Reference, rules: Sequence[Rule]
) -> AuditResult:
    """``result`` with the failures (and notes) of its comparison with ``reference``
    added to its gate outcome; without rules, the SNSR changes as a note only."""
    ref = reference.results.get(result.meta.test_id)
    gate = result.gate or GateOutcome(passed=True)
    if ref is None:
        notes = [f"not in the reference {reference.label}: not compared"]
        failures: list[GateFailure] = []
    else:
        failures, notes = _compared(result, ref, rules, reference.label)
        if failures:
            notes = [n for n in notes if not n.startswith("not compared")]
    outcome = GateOutcome.of((*gate.failures, *failures), (*gate.notes, *notes), gate.drift)
    return replace(result, gate=outcome)
