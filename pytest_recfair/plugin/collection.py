"""Collection: each @fairness test's settings, skip, baseline name and model slot; then
(:func:`check_run`, after -k/-m) every selected audit's inputs: one bad test is a usage
error (exit 4) before anything is sent (issue 34)."""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_recfair import settings
from pytest_recfair.errors import ConfigError, RecfairError
from pytest_recfair.plugin import fixtures, options
from pytest_recfair.plugin.session import AUDIT, AuditState, audit_state, run_state, terminal_line
from pytest_recfair.settings import AuditSettings
from pytest_recfair.settings.values import nearest

if TYPE_CHECKING:
    from pytest_recfair.prompts.grids import Grid

SKIP_REASON = "fairness audit: run with --fairness"
RECOMMENDER = "recfair_recommender"


def modify_items(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each @fairness test's settings; audits skipped without --fairness."""
    enabled = bool(config.getoption("fairness"))
    skip = pytest.mark.skip(reason=SKIP_REASON)
    state = run_state(config)
    for item in items:
        marks = list(item.iter_markers("fairness"))
        if not marks:
            continue
        kwargs: dict[str, Any] = {}
        try:
            for mark in reversed(marks):  # module, then class, then function: closest wins
                settings.validate_marker(mark.args, mark.kwargs, where=item.nodeid)
                kwargs.update(mark.kwargs)
            # the command line and ini were checked at configure time
            item.stash[AUDIT] = AuditState(options.resolve(config, kwargs))
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
        state.audited = state.audited if state.audited is not None else set()
        state.audited.add(item.nodeid)
        if not enabled:
            item.add_marker(skip)
    if enabled:  # skipped audits share nothing; plain pytest never imports the gate
        _check_baseline_names(items)
    _model_slots(items)


def depend_on_recommender(collector: pytest.Module | pytest.Class, name: str, obj: Any) -> None:
    """A @fairness test depends on a PARAMETRIZED recfair_recommender (run once per model);
    a plain one stays fetched on demand, where its errors are said once (user_fixture)."""
    if not callable(obj) or not collector.istestfunction(obj, name):
        return
    marks = list(getattr(obj, "pytestmark", []))
    marked = any(m.name == "fairness" for m in marks)
    if not marked and collector.get_closest_marker("fairness") is None:
        return
    defs = _fixture_defs(collector, RECOMMENDER)
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
    """Group one test's runs over a parametrized recfair_recommender; the model's label
    is the one parameter id that differs within the group."""
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


def check_run(session: pytest.Session) -> None:
    """The first bad input of a selected audit is a usage error (an xdist worker stops the
    run with the same line: a UsageError there would be an INTERNALERROR)."""
    config = session.config
    if not config.getoption("fairness"):
        return
    files = _Files()
    notes: dict[str, None] = {}  # ordered, each once
    for item in session.items:
        found = audit_state(item)
        if found is None:
            continue
        try:
            note = _check(item, found.settings, files)
        except RecfairError as exc:
            if not hasattr(config, "workerinput"):
                raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
            session.shouldstop = f"{item.nodeid}: {exc}"
            session.items.clear()
            return
        if note is not None:
            notes.setdefault(note)
    write = terminal_line(config)
    for note in notes:
        write(note)


class _Files(dict[str, Any]):
    """What the check read, once per source (many tests share a grid or a seed set)."""

    def once(self, key: str, load: Callable[[], Any]) -> Any:
        if key not in self:
            self[key] = load()
        return self[key]


def _check(item: pytest.Item, s: AuditSettings, files: _Files) -> str | None:
    """This test's inputs; the entity note when ``entities`` is above the seed count."""
    from pytest_recfair.engine import registry

    kind = registry.kind_for(s)  # an unknown kind= is a ConfigError here
    check = getattr(kind, "check", None)
    if check is not None:
        check(s, (item.path.parent, item.config.rootpath))
    fixtures.input_file(item, "absent", s.absent)
    if getattr(kind, "entities", None) is not None:  # its own entities, not the grid's
        return None
    grid = _grid(item, s, files)
    if grid is not None and s.attr is not None:
        _check_attr(grid, s.attr, s)
    checks = {"catalogue": _check_catalogue, "candidates": _check_candidates}
    for name in getattr(kind, "named_inputs", ()):  # the kind's own input files
        checks[name](item, s, files)
    return _seeds_note(item, s, files)


def _overridden(item: pytest.Item, name: str) -> bool:
    """Whether fixture ``name`` comes from elsewhere than the plugin: only run time knows it."""
    spec = getattr(item, "callspec", None)
    if spec is not None and name in spec.params:
        return True
    return _fixture_of(item, name) not in (None, "pytest_recfair.plugin")


def _fixture_defs(node: pytest.Item | pytest.Collector, name: str) -> Any:
    """The definitions of fixture ``name`` visible at ``node``; False for a pytest without
    the (private, >= 8.1 signature) lookup: pytest has no public one."""
    try:
        return node.session._fixturemanager.getfixturedefs(name, node)
    except (AttributeError, TypeError):
        return False


def _fixture_of(item: pytest.Item, name: str) -> str | None:
    """The module of the fixture ``name`` this test sees, None when there is none."""
    defs = _fixture_defs(item, name)
    if defs is False:  # another pytest: assume a user's fixture
        return "?"
    return str(getattr(defs[-1].func, "__module__", "?")) if defs else None


def _grid(item: pytest.Item, s: AuditSettings, files: _Files) -> Grid | None:
    """The grid as the recfair_grid fixture loads it; None when a fixture overrides it."""
    from pytest_recfair.prompts.grids import load_grid

    if _overridden(item, "recfair_grid"):
        return None  # a conftest's grid: its attributes are known at run time only
    source = fixtures.locate(item, "grid", s.grid)
    grid: Grid = files.once(f"grid:{source}", lambda: load_grid(source))
    return grid


def _check_attr(grid: Grid, attr: str, s: AuditSettings) -> None:
    """``attr`` as the audit reads it (engine/stream.py ``attributes_of``): an attribute of
    the grid, two or more of them crossed, or "personality" (its own bundled grid)."""
    try:
        grid.attribute(attr)
    except RecfairError as exc:
        if s.personality:
            return
        names = grid.attribute_names
        known = {n.casefold() for n in names}
        parts = [p.strip() for p in re.split(r"\s+[xX×]\s+", attr.strip())]
        bad = next((p for p in parts if p.casefold() not in known), None)
        if bad is None:  # the names are right; the crossing is not (a value's form)
            raise ConfigError(f"@fairness(attr={attr!r}): {exc}") from None
        near = nearest(bad.casefold(), [n.casefold() for n in names] + ["personality"])
        guess = next((n for n in [*names, "personality"] if n.casefold() == near), None)
        hint = f"; did you mean {guess!r}?" if guess is not None else ""
        raise ConfigError(
            f"@fairness(attr={attr!r}): grid {grid.name!r} has no attribute {bad!r}; expected "
            f"one of {', '.join(names)}, two crossed ('race x gender') or 'personality'{hint}"
        ) from None


def _seeds_note(item: pytest.Item, s: AuditSettings, files: _Files) -> str | None:
    """The seeds loaded as recfair_seeds does (a seeds fixture: at run time only); the note
    when ``entities`` asks for more of them."""
    from pytest_recfair.api import bundled_seeds
    from pytest_recfair.prompts.seeds import load_seeds

    if _overridden(item, "recfair_seeds"):
        return None
    source = s.seeds
    if source is None:
        name = bundled_seeds(s.domain, "@fairness")  # a domain without one: a ConfigError
        label, load = f"bundled seed set {name!r}", (lambda: len(load_seeds(name)))
    else:
        where = fixtures.locate(item, "seeds", source)
        if isinstance(where, str) and _is_fixture_name(item, source):
            return None  # a seeds fixture: its entities are known at run time only
        label = f"seed set {source!r}" if isinstance(where, str) else f"seeds file {str(where)!r}"

        def load() -> int:
            return len(load_seeds(where, domain=s.domain))

    count = files.once(f"seeds:{s.domain}:{label}", load)
    if s.entities is None or s.entities <= count:
        return None
    # where ``entities`` came from, as the user wrote it (command line > marker > ini)
    marked = any("entities" in m.kwargs for m in item.iter_markers("fairness"))
    asked = f"@fairness(entities={s.entities})" if marked else f"recfair_entities={s.entities}"
    if item.config.getoption("fairness_entities", None) is not None:
        asked = f"--fairness-entities={s.entities}"
    return (
        f"recfair: {asked} asked for {s.entities} entities; the {label} has {count}: "
        f"all {count} are audited"
    )


def _is_fixture_name(item: pytest.Item, source: str) -> bool:
    if not source.isidentifier() or keyword.iskeyword(source):
        return False
    return _fixture_of(item, source) is not None


def _check_catalogue(item: pytest.Item, s: AuditSettings, files: _Files) -> None:
    """The catalogue loads and has every ``item_field``; the kind's ``check_catalogue`` the rest."""
    from pytest_recfair.engine import registry
    from pytest_recfair.replies.catalogue import load_catalogue

    if _overridden(item, "recfair_catalogue"):
        return  # a conftest's catalogue: its columns are known at run time only
    check = registry.kind_for(s).check_catalogue  # type: ignore[attr-defined]
    where = (item.path.parent, item.config.rootpath)
    path = fixtures.input_file(item, "catalogue", s.catalogue)
    if path is None:
        check(s, None, where)  # says "needs a catalogue"
        return
    fields = [f.strip() for f in (s.item_field or "").split(",") if f.strip()]
    catalogue = files.once(f"catalogue:{path}", lambda: load_catalogue(path))
    for name in fields:
        if name not in catalogue.fields:
            near = nearest(name, list(catalogue.fields))
            hint = f"; did you mean {near!r}?" if near is not None else ""
            raise ConfigError(
                f"@fairness(item_field={s.item_field!r}): catalogue file {str(path)!r} has no "
                f"field {name!r}; its fields are {', '.join(catalogue.fields) or '(none)'}"
                f"{hint}"
            )
    check(s, catalogue, where)


def _check_candidates(item: pytest.Item, s: AuditSettings, files: _Files) -> None:
    """The candidates file loads (a fixture's candidates: at run time only)."""
    from pytest_recfair.replies.catalogue import read_candidates

    source = s.candidates
    if source is None or _overridden(item, "recfair_candidates"):
        return
    path = fixtures.find_file(item, source)
    if path is None:
        if _is_fixture_name(item, source):
            return  # a fixture's candidates: known at run time only
        raise fixtures.not_found(item, "candidates", source, "or fixture")
    files.once(f"candidates:{path}", lambda: read_candidates(path, "candidates"))
