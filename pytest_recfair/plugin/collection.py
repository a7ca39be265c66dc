"""Collection: each @fairness test's settings, the skip without --fairness, the baseline
names, and the models of a parametrized ``recfair_recommender``. The inputs the settings
name (grid, attributes, seeds, catalogue, candidates, question sets) are checked once the
selection is final, by :mod:`.precheck`."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_recfair import settings
from pytest_recfair.errors import ConfigError
from pytest_recfair.plugin import options
from pytest_recfair.plugin.session import AUDIT, AuditState, audit_state, run_state

__all__ = ["RECOMMENDER", "SKIP_REASON", "depend_on_recommender", "modify_items"]

SKIP_REASON = "fairness audit: run with --fairness"
RECOMMENDER = "recfair_recommender"


def modify_items(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Resolve each @fairness test's settings (marker errors are usage errors), skip the
    audits without --fairness, and check baseline names and model slots."""
    enabled = bool(config.getoption("fairness"))
    skip = pytest.mark.skip(reason=SKIP_REASON)
    state = run_state(config)
    for item in items:
        marks = list(item.iter_markers("fairness"))
        if not marks:
            continue
        kwargs: dict[str, Any] = {}
        for mark in reversed(marks):  # module, then class, then function: closest wins
            try:
                settings.validate_marker(mark.args, mark.kwargs, where=item.nodeid)
            except ConfigError as exc:
                raise pytest.UsageError(str(exc)) from None
            kwargs.update(mark.kwargs)
        item.stash[AUDIT] = AuditState(options.resolve(config, kwargs, f"{item.nodeid}: "))
        state.audited = state.audited if state.audited is not None else set()
        state.audited.add(item.nodeid)
        if not enabled:
            item.add_marker(skip)
    if enabled:  # skipped audits share nothing; plain pytest never imports the gate
        _check_baseline_names(items)
    _model_slots(items)


def depend_on_recommender(collector: pytest.Module | pytest.Class, name: str, obj: Any) -> None:
    """A @fairness test depends statically on a PARAMETRIZED recfair_recommender, so pytest
    runs it once per model without the test naming the fixture. Only then: a plain
    fixture stays fetched on demand, where its errors are said once (user_fixture)."""
    if not callable(obj) or not collector.istestfunction(obj, name):
        return
    marks = list(getattr(obj, "pytestmark", []))
    marked = any(m.name == "fairness" for m in marks)
    if not marked and collector.get_closest_marker("fairness") is None:
        return
    try:  # pytest has no public lookup of the fixture visible here (>= 8.1 signature)
        defs = collector.session._fixturemanager.getfixturedefs(RECOMMENDER, collector)
    except (AttributeError, TypeError):  # a pytest without it: name the fixture instead
        defs = None
    by_mark = any(
        m.name == "parametrize" and m.args and RECOMMENDER in _argnames(m.args[0]) for m in marks
    )
    if by_mark or (defs and defs[-1].params is not None):
        pytest.mark.usefixtures(RECOMMENDER)(obj)


def _argnames(spec: Any) -> list[str]:
    if isinstance(spec, str):
        return [n.strip() for n in spec.split(",")]
    return [str(n) for n in spec] if isinstance(spec, list | tuple) else []


def _model_slots(items: list[pytest.Item]) -> None:
    """Group the audited runs of one test over a parametrized recfair_recommender: same
    function, same other parameters. The model's label is the one parameter id that
    differs within the group (its id in the test's name)."""
    groups: dict[tuple[str, tuple[Any, ...]], list[pytest.Item]] = {}
    for item in items:
        spec = getattr(item, "callspec", None)
        if audit_state(item) is None or spec is None or RECOMMENDER not in spec.indices:
            continue
        others = tuple(sorted((k, v) for k, v in spec.indices.items() if k != RECOMMENDER))
        groups.setdefault((item.nodeid.split("[", 1)[0], others), []).append(item)
    for (base, _), members in groups.items():
        ids = [list(getattr(i.callspec, "_idlist", [i.callspec.id])) for i in members]  # type: ignore[attr-defined]
        same = len({len(x) for x in ids}) == 1
        differ = [p for p in range(len(ids[0])) if same and len({x[p] for x in ids}) > 1]
        rest = [e for p, e in enumerate(ids[0]) if p not in differ] if differ else []
        group = base + (f"[{'-'.join(rest)}]" if rest else "")
        for item, its in zip(members, ids, strict=True):
            label = "-".join(its[p] for p in differ) if differ else item.callspec.id  # type: ignore[attr-defined]
            item.stash[AUDIT].slot = (group, label, item.callspec.indices[RECOMMENDER])  # type: ignore[attr-defined]


def _check_baseline_names(items: list[pytest.Item]) -> None:
    """Two audited tests keyed to one baseline file would overwrite each other's."""
    from pytest_recfair.gate.baselines import stable_name

    owner: dict[str, str] = {}
    for item in items:
        found = audit_state(item)
        if found is None:
            continue
        name = stable_name(item.nodeid, found.settings.baseline)
        first = owner.setdefault(name, item.nodeid)
        if first != item.nodeid:
            raise pytest.UsageError(
                f"{item.nodeid} and {first} share the baseline name {name!r} (baselines are "
                f"keyed by the test's name, not its file); give one of them its own with "
                f'@fairness(baseline="...").'
            )
