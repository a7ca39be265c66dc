"""pytest glue: options, ini keys, marker, fixtures and reporting hooks.

Each hook hands off to :mod:`pytest_recfair.settings` or :mod:`pytest_recfair.engine`
in a few lines. Workers of pytest-xdist ship each audit's result to the controller on the
call-phase report (an extra report attribute survives xdist's serialisation), so the
summary, the report file and the JUnit properties are produced once, on the controller.
"""

from __future__ import annotations

import dataclasses
import keyword
import shlex
import traceback
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_recfair import settings
from pytest_recfair.errors import ConfigError, RecfairError
from pytest_recfair.kinds import PROVIDER_KINDS, RECORD_MODES, REPORT_FORMATS

if TYPE_CHECKING:
    # audit pulls in numpy, httpx and jsonschema (~0.3 s): imported only when an audit
    # runs or a run has results to report, never at pytest start-up
    from pytest_recfair import engine as audit
    from pytest_recfair.engine import budget as plan
    from pytest_recfair.engine import sharding as shards

__all__ = ["marker"]


def marker() -> pytest.MarkDecorator:
    """``pytest.mark.fairness``, what ``from pytest_recfair import fairness`` returns.

    Looked up on use, not at import: under --strict-markers pytest checks a marker name
    against the configuration that is current when it is first looked up.
    """
    return pytest.mark.fairness


SKIP_REASON = "fairness audit: run with --fairness"
_PROVIDER_INI = {
    "recfair_provider": "provider API shape: " + ", ".join(PROVIDER_KINDS) + " (default openai)",
    "recfair_model": "model id sent to the provider (required unless recfair_recommender "
    "is overridden)",
    "recfair_base_url": "provider base URL (default: the provider's public endpoint)",
    "recfair_api_key_env": "name of the environment variable that holds the API key",
}
_INI_HELP = {
    "record_mode": "cassette record mode: " + ", ".join(RECORD_MODES) + " (default none)",
    "update": "write/refresh baselines instead of comparing (true/false)",
    "report": "write a fairness report to this path (" + ", ".join(REPORT_FORMATS) + ")",
    "cassette_dir": "cassette directory, relative to rootdir (default fixtures/cassettes)",
    "baseline_dir": "baseline directory, relative to rootdir (default baselines)",
    "vcr_cassettes": "cassettes recorded with vcrpy/pytest-recording to replay from "
    "(comma-separated files or folders, relative to rootdir; YAML or JSON)",
    "alpha": "significance level of the baseline comparison (default 0.05)",
    "n_resamples": "bootstrap resamples for confidence intervals (default 1000)",
    "batch": "record missing prompts through the provider's batch API (true/false)",
    "batch_poll": "seconds before the first batch status poll (default 10; then x1.5, max 60)",
    "shard_dir": "where --fairness-shard writes shard results (default fairness-shards)",
    "timeout": "seconds per request to the recommender (default 60)",
    "max_retries": "retries of a failed request (default 5)",
    "temperature": "sampling temperature sent to the provider (default: the provider's, 0)",
    "max_tokens": "reply length limit sent to the provider",
    "sampling_seed": "the model's seed parameter (OpenAI, Gemini)",
    "system": "system message replacing the templates' one",
    "extra_headers": "extra request headers as 'Name: ENV_VAR' pairs (values from the environment)",
    "prices": "USD per million input and output tokens, e.g. '0.15, 0.60'",
    "max_requests": "refuse to start live requests beyond this many in one run",
    "max_cost": "refuse to start live requests beyond this estimated cost (USD)",
    "max_reply_chars": "replies longer than this are cut, with a note (default 100000)",
    "plan": "print the plans and send nothing (true/false; --fairness-plan)",
}

_SETTINGS = pytest.StashKey[settings.AuditSettings]()
_AUDIT = pytest.StashKey["tuple[settings.AuditSettings, audit.Comparison]"]()
_RECORD = pytest.StashKey["audit.TestRecord"]()
_REPORT_PATHS = pytest.StashKey[list[Path]]()
_FIXTURE_ERRORS = pytest.StashKey[set[int]]()
_AUDITED = pytest.StashKey[set[str]]()  # node ids of the @fairness tests collected
_SHARD: pytest.StashKey[shards.Shard] = pytest.StashKey()
_MERGE: pytest.StashKey[audit.MergeSource] = pytest.StashKey()
_PLANS: pytest.StashKey[list[plan.Plan]] = pytest.StashKey()  # the run's plans, in order
_PRUNER: pytest.StashKey[_Pruner] = pytest.StashKey()
_REWRITTEN = pytest.StashKey[set[Path]]()  # cassette files rewritten in this run
# a test run once per model of a parametrized recfair_recommender: its comparison group,
# the model's parameter id and index (docs/reports.md, "Comparing models")
_MODEL_SLOT = pytest.StashKey["tuple[str, str, int]"]()
_RECOMMENDER = "recfair_recommender"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("recfair", "fairness audits of LLM recommenders (pytest-recfair)")
    group.addoption(
        "--fairness",
        action="store_true",
        default=False,
        help="run the tests marked @pytest.mark.fairness (fairness audits)",
    )
    group.addoption(
        "--fairness-record",
        dest="fairness_record",
        metavar="MODE",
        choices=settings.RECORD_MODES,
        default=None,
        help="cassette record mode: " + ", ".join(RECORD_MODES) + " (default none: replay "
        "only; ini: recfair_record_mode)",
    )
    group.addoption(
        "--fairness-update",
        dest="fairness_update",
        action="store_true",
        default=False,
        help="write or refresh fairness baselines from this run (ini: recfair_update)",
    )
    group.addoption(
        "--fairness-update-force",
        dest="fairness_update_force",
        action="store_true",
        default=False,
        help="with --fairness-update: store the baseline even when too many replies were "
        "unusable (ini: recfair_update_force)",
    )
    group.addoption(
        "--fairness-report",
        dest="fairness_report",
        metavar="PATH",
        action="append",
        default=None,
        help="write a fairness report; format from the extension "
        + "/".join(REPORT_FORMATS)
        + "; repeat for several (ini: recfair_report, paths separated by spaces)",
    )
    group.addoption(
        "--fairness-history",
        dest="fairness_history",
        metavar="DIR",
        default=None,
        help="append this run's JSON report to DIR under a new numbered name",
    )
    for name, what in (
        ("entities", "audit a deterministic subsample of N seed entities"),
        ("repeats", "ask each prompt N times (entropy and noise floor when N > 1)"),
        ("concurrency", "at most N requests in flight (default 8)"),
        (
            "seed",
            "seed of the entity subsample and perturbations (default 0; the gate's "
            "resampling has its own: ini recfair_resample_seed)",
        ),
    ):
        group.addoption(
            f"--fairness-{name}",
            dest=f"fairness_{name}",
            metavar="N",
            type=int,
            default=None,
            help=f"{what} (ini: recfair_{name})",
        )
    group.addoption(
        "--fairness-alpha",
        dest="fairness_alpha",
        metavar="X",
        type=float,
        default=None,
        help="significance level of the rise-over-baseline test (default 0.05; ini: recfair_alpha)",
    )
    _add_scale_options(group)
    for ini_name, key in settings.INI_KEYS.items():
        parser.addini(ini_name, _INI_HELP.get(key, f"default for @fairness({key}=...)"))
    for ini_name, help_text in _PROVIDER_INI.items():
        parser.addini(ini_name, help_text)


# every option that only acts on audits: given without --fairness it would do nothing
_AUDIT_OPTIONS = (
    *settings.CLI_KEYS,
    "fairness_history",
    "fairness_report",
    "fairness_shard",
    "fairness_merge",
    "fairness_prune",
)


def _check_strictness(config: pytest.Config) -> None:
    """Usage errors for what would otherwise be silently ignored: a misspelt recfair_* ini
    key, and a --fairness-* option without --fairness (the audits would be skipped)."""
    from pytest_recfair.plugin import inikeys

    known = {*settings.INI_KEYS, *_PROVIDER_INI}
    try:
        if config.inipath is not None:
            keys = inikeys.ini_file_keys(config.inipath)
            inikeys.check_ini_keys(keys, known, str(config.inipath))
        overrides = config.getoption("override_ini", None) or []
        inikeys.check_ini_keys([o.split("=", 1)[0] for o in overrides], known, "-o")
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    if config.getoption("fairness"):
        return
    given = [d for d in _AUDIT_OPTIONS if config.getoption(d, None) not in (None, False)]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise pytest.UsageError(
            f"{flag} acts on fairness audits, which run only with --fairness; add it "
            f"(pytest --fairness {flag} ...) or drop {flag}."
        )


def _add_scale_options(group: pytest.OptionGroup) -> None:
    """The plan of a live run (docs/providers.md), batch recording and shards (docs/scale.md)."""
    group.addoption(
        "--fairness-plan",
        dest="fairness_plan",
        action="store_true",
        default=False,
        help="print each audit's plan (prompts, already recorded, to ask, tokens, cost, "
        "duration) and send nothing",
    )
    group.addoption(
        "--fairness-batch",
        dest="fairness_batch",
        action="store_true",
        default=False,
        help="record the prompts that have no recording through the provider's batch API "
        "(OpenAI Batch API, Anthropic Message Batches) at half price, then replay them "
        "(ini: recfair_batch)",
    )
    group.addoption(
        "--fairness-prune",
        dest="fairness_prune",
        action="store_true",
        default=False,
        help="list cassette interactions and baselines no test used; delete them only "
        "after a full run (no test deselected, failed or skipped; see docs/cassettes.md)",
    )
    group.addoption(
        "--fairness-shard",
        dest="fairness_shard",
        metavar="I/N",
        default=None,
        help="audit shard I of N of each test's entities and write its result to "
        "recfair_shard_dir, for --fairness-merge (one CI job per shard)",
    )
    group.addoption(
        "--fairness-merge",
        dest="fairness_merge",
        metavar="FILE_OR_DIR",
        action="append",
        default=None,
        help="gate and report the audits merged from these shard results (repeatable); "
        "nothing is sent or replayed",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "fairness(**kwargs): a fairness audit of the recommender (run with --fairness); "
        "arguments: " + ", ".join(settings.MARKER_KEYS) + ". See docs/configuration.md.",
    )
    if not hasattr(config, "workerinput"):  # xdist workers only ship results
        config.pluginmanager.register(_Controller(config), "recfair-controller")
    if config.getoption("fairness_prune", False):
        config.stash[_PRUNER] = _Pruner(config)
        config.pluginmanager.register(config.stash[_PRUNER], "recfair-prune")
    _check_strictness(config)
    _configure_shards(config)
    config.stash[_REPORT_PATHS] = _report_paths(config, _resolve(config, {}))
    _check_history(config)


def _check_history(config: pytest.Config) -> None:
    """A --fairness-history that cannot take the run is a usage error now, not at the end."""
    history = config.getoption("fairness_history")
    if not history:
        return
    from pytest_recfair.report.history import check_history_dir

    try:
        check_history_dir(config.invocation_params.dir / history)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def _report_paths(config: pytest.Config, run_settings: settings.AuditSettings) -> list[Path]:
    """Every report of the run, checked now: a bad path is a usage error before any prompt
    is sent, not a lost report at the end. The command line replaces the ini list."""
    from pytest_recfair import report

    cli = config.getoption("fairness_report")
    if cli:
        paths = [config.invocation_params.dir / p for p in cli]
    else:
        ini = shlex.split(run_settings.report or "")
        paths = [config.rootpath / p for p in ini]
    unique = list(dict.fromkeys(paths))
    for path in unique:
        try:
            report.check_report_path(path)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
    return unique


def _configure_shards(config: pytest.Config) -> None:
    """--fairness-shard / --fairness-merge: checked up front, one or the other."""
    shard_text = config.getoption("fairness_shard", None)
    merge = config.getoption("fairness_merge", None)
    if shard_text and merge:
        raise pytest.UsageError(
            "--fairness-shard and --fairness-merge: give one; the shard jobs audit with "
            "--fairness-shard=I/N, then one job gates their results with --fairness-merge."
        )
    if shard_text:
        from pytest_recfair.engine import sharding as shards

        try:
            config.stash[_SHARD] = shards.parse_shard(shard_text)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
    if merge:
        from pytest_recfair import engine as audit

        base = config.invocation_params.dir
        config.stash[_MERGE] = audit.MergeSource(tuple(base / p for p in merge))


def _resolve(
    config: pytest.Config, marker: dict[str, Any], where: str = ""
) -> settings.AuditSettings:
    cli = {dest: config.getoption(dest) for dest in settings.CLI_KEYS}
    ini = {name: config.getini(name) for name in settings.INI_KEYS}
    try:
        return settings.resolve(cli=cli, marker=marker, ini=ini)
    except ConfigError as exc:
        raise pytest.UsageError(f"{where}{exc}" if where else str(exc)) from None


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    if not config.getoption("fairness"):
        return None
    s = _resolve(config, {})
    return [
        f"recfair: seed={s.seed} (--fairness-seed), record mode={s.record_mode}, "
        f"baselines={config.rootpath / s.baseline_dir}" + (" (updating)" if s.update else ""),
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    enabled = bool(config.getoption("fairness"))
    skip = pytest.mark.skip(reason=SKIP_REASON)
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
        item.stash[_SETTINGS] = _resolve(config, kwargs, f"{item.nodeid}: ")
        config.stash.setdefault(_AUDITED, set()).add(item.nodeid)
        if not enabled:
            item.add_marker(skip)
    _check_baseline_names(items)
    _model_slots(items)


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> Generator[None, Any, Any]:
    _depend_on_recommender(collector, name, obj)
    return (yield)


def _depend_on_recommender(collector: pytest.Module | pytest.Class, name: str, obj: Any) -> None:
    """A @fairness test depends statically on a PARAMETRIZED recfair_recommender, so pytest
    runs it once per model without the test naming the fixture. Only then: a plain
    fixture stays fetched on demand, where its errors are said once (_user_fixture)."""
    if not callable(obj) or not collector.istestfunction(obj, name):
        return
    marks = list(getattr(obj, "pytestmark", []))
    marked = any(m.name == "fairness" for m in marks)
    if not marked and collector.get_closest_marker("fairness") is None:
        return
    try:  # pytest has no public lookup of the fixture visible here (>= 8.1 signature)
        defs = collector.session._fixturemanager.getfixturedefs(_RECOMMENDER, collector)
    except (AttributeError, TypeError):  # a pytest without it: name the fixture instead
        defs = None
    by_mark = any(
        m.name == "parametrize" and m.args and _RECOMMENDER in _argnames(m.args[0]) for m in marks
    )
    if by_mark or (defs and defs[-1].params is not None):
        pytest.mark.usefixtures(_RECOMMENDER)(obj)


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
        if _SETTINGS not in item.stash or spec is None or _RECOMMENDER not in spec.indices:
            continue
        others = tuple(sorted((k, v) for k, v in spec.indices.items() if k != _RECOMMENDER))
        groups.setdefault((item.nodeid.split("[", 1)[0], others), []).append(item)
    for (base, _), members in groups.items():
        ids = [list(getattr(i.callspec, "_idlist", [i.callspec.id])) for i in members]  # type: ignore[attr-defined]
        same = len({len(x) for x in ids}) == 1
        differ = [p for p in range(len(ids[0])) if same and len({x[p] for x in ids}) > 1]
        rest = [e for p, e in enumerate(ids[0]) if p not in differ] if differ else []
        group = base + (f"[{'-'.join(rest)}]" if rest else "")
        for item, its in zip(members, ids, strict=True):
            label = "-".join(its[p] for p in differ) if differ else item.callspec.id  # type: ignore[attr-defined]
            item.stash[_MODEL_SLOT] = (group, label, item.callspec.indices[_RECOMMENDER])  # type: ignore[attr-defined]


def _check_baseline_names(items: list[pytest.Item]) -> None:
    """Two audited tests keyed to one baseline file would overwrite each other's."""
    from pytest_recfair.gate.baselines import stable_name

    owner: dict[str, str] = {}
    for item in items:
        found = item.stash.get(_SETTINGS, None)
        if found is None:
            continue
        name = stable_name(item.nodeid, found.baseline)
        first = owner.setdefault(name, item.nodeid)
        if first != item.nodeid:
            raise pytest.UsageError(
                f"{item.nodeid} and {first} share the baseline name {name!r} (baselines are "
                f"keyed by the test's name, not its file); give one of them its own with "
                f'@fairness(baseline="...").'
            )


# --- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def recfair_recommender(pytestconfig: pytest.Config) -> Any:
    """The recommender under audit; override in conftest.py (default: provider from ini)."""
    from pytest_recfair import providers

    model = str(pytestconfig.getini("recfair_model") or "").strip()
    if not model:
        raise ConfigError(
            "no recommender configured: set the ini key recfair_model (and recfair_provider, "
            "recfair_base_url, recfair_api_key_env), or override the recfair_recommender "
            "fixture in conftest.py. See docs/quickstart.md."
        )
    return providers.from_config(
        str(pytestconfig.getini("recfair_provider") or "openai").strip(),
        model=model,
        base_url=str(pytestconfig.getini("recfair_base_url") or "").strip() or None,
        api_key_env=str(pytestconfig.getini("recfair_api_key_env") or "").strip() or None,
    )


@pytest.fixture
def recfair_settings(request: pytest.FixtureRequest) -> settings.AuditSettings:
    """The merged, validated settings (CLI > marker > ini > defaults) of this audit."""
    found = request.node.stash.get(_SETTINGS, None)
    return found if found is not None else _resolve(request.config, {})


@pytest.fixture
def recfair_seeds(request: pytest.FixtureRequest, recfair_settings: settings.AuditSettings) -> Any:
    """The seed entities of this audit (marker seeds=: fixture name, bundled set or file)."""
    from pytest_recfair import prompts

    source = recfair_settings.seeds
    if source is None:
        return prompts.load_seeds(_default_seeds(recfair_settings.domain))
    path = _find_file(request, source)
    if path is not None:
        return prompts.load_seeds(path, domain=recfair_settings.domain)
    if source.isidentifier() and not keyword.iskeyword(source):
        try:
            value = request.getfixturevalue(source)
        except pytest.FixtureLookupError:
            pass
        else:
            return _entities_from(value, recfair_settings.domain, source)
    return prompts.load_seeds(source, domain=recfair_settings.domain)


@pytest.fixture
def recfair_grid(request: pytest.FixtureRequest, recfair_settings: settings.AuditSettings) -> Any:
    """The attribute grid of this audit (marker grid=: bundled name or YAML file)."""
    from pytest_recfair import prompts

    path = _find_file(request, recfair_settings.grid)
    return prompts.load_grid(path if path is not None else recfair_settings.grid)


@pytest.fixture
def recfair_catalogue(
    request: pytest.FixtureRequest, recfair_settings: settings.AuditSettings
) -> Any:
    """Item metadata for item-side audits (marker/ini catalogue=: a CSV, JSON or YAML file);
    override in conftest.py to return a Catalogue, a path or a list of item records."""
    source = recfair_settings.catalogue
    if source is None:
        return None
    path = _find_file(request, source)
    return path if path is not None else source


@pytest.fixture
def recfair_candidates(
    request: pytest.FixtureRequest, recfair_settings: settings.AuditSettings
) -> Any:
    """Candidate titles per entity for candidate-position audits (marker candidates=: a
    fixture name or a JSON/YAML file mapping entity -> titles)."""
    source = recfair_settings.candidates
    if source is None:
        return None
    path = _find_file(request, source)
    if path is not None:
        return path
    if source.isidentifier() and not keyword.iskeyword(source):
        return request.getfixturevalue(source)
    raise ConfigError(f"@fairness(candidates={source!r}): no such file or fixture")


def _inputs(request: pytest.FixtureRequest, s: settings.AuditSettings) -> Any:
    """What the kind of audit needs beyond seeds and grid (catalogue, candidates, absent)."""
    from pytest_recfair.engine import inputs as read
    from pytest_recfair.engine.base import AuditInputs

    catalogue = request.getfixturevalue("recfair_catalogue")
    candidates = request.getfixturevalue("recfair_candidates")
    absent: frozenset[tuple[str, str, str]] = frozenset()
    if s.absent is not None:
        path = _find_file(request, s.absent)
        if path is None:
            raise ConfigError(f"@fairness(absent={s.absent!r}): no such file")
        absent = read.read_absent(path)
    return AuditInputs(
        catalogue=None if catalogue is None else read.as_catalogue(catalogue, "recfair_catalogue"),
        candidates=None if candidates is None else read.read_candidates(candidates, "candidates"),
        absent=absent,
    )


@pytest.fixture
def recfair_cassettes(
    request: pytest.FixtureRequest, recfair_settings: settings.AuditSettings
) -> Any:
    """The cassette store of this run (ini recfair_cassette_dir, mode --fairness-record)."""
    from pytest_recfair.cassettes.store import CassetteStore

    base = request.config.rootpath
    imports = recfair_settings.vcr_cassettes or ""
    pruner = request.config.stash.get(_PRUNER, None)
    return CassetteStore(
        base / recfair_settings.cassette_dir,
        recfair_settings.record_mode,
        imports=[base / p.strip() for p in imports.split(",") if p.strip()],
        usage=None if pruner is None else pruner.use(recfair_settings),
        rewritten=request.config.stash.setdefault(_REWRITTEN, set()),
    )


@pytest.fixture
def fairness_result(
    request: pytest.FixtureRequest, recfair_settings: settings.AuditSettings
) -> Any:
    """The AuditResult of this @fairness test: similarities, SNSR/SNSV/PAFS with CIs."""
    from pytest_recfair import engine as audit

    node = request.node
    if node.get_closest_marker("fairness") is None:
        raise ConfigError(
            f"{node.nodeid} requests fairness_result but has no @fairness marker; "
            "mark it with @pytest.mark.fairness(...)."
        )
    s = recfair_settings
    state = audit.load_baseline(request.config.rootpath / s.baseline_dir, node.nodeid, s.baseline)
    pruner = request.config.stash.get(_PRUNER, None)
    if pruner is not None:
        pruner.baselines.update(p for p in (state.path, state.legacy) if p is not None)
    problem: RecfairError | None = None
    try:
        merge = request.config.stash.get(_MERGE, None)
        # merged: nothing is sent or replayed, the shard results hold the scores
        if merge is None:
            result = _measure(request, s)
        else:
            result = merge.result(s, node.nodeid, lambda: _kind_inputs(request, s))
    except RecfairError as exc:
        problem = exc
    if problem is not None:
        # a problem the user fixes (cassette miss, bad seeds file, ...): said once, outside
        # the except block, so no traceback and no "during handling ..." chain
        pytest.fail(f"{type(problem).__name__}: {problem}", pytrace=False)
    comparison = audit.compare(s, result, state)
    result = audit.gate_result(s, result, comparison.baseline, comparison.problem)
    node.stash[_AUDIT] = (s, comparison)
    # shipped even if the test body fails before the gate is judged
    node.stash[_RECORD] = audit.TestRecord(result, comparison.baseline)
    slot = node.stash.get(_MODEL_SLOT, None)
    if slot is not None:
        node.stash[_RECORD].model_slot = {
            "group": slot[0],
            "label": slot[1],
            "index": slot[2],
            "alpha": s.alpha,
            "n_resamples": s.n_resamples,
            "seed": s.resample_seed,
        }
    node.user_properties.extend(audit.property_items(result))
    return result


def _kind_inputs(request: pytest.FixtureRequest, s: settings.AuditSettings) -> Any:
    """Seeds, grid and inputs, for a merge that rebuilds a kind's prompts."""
    seeds = request.getfixturevalue("recfair_seeds")
    return seeds, request.getfixturevalue("recfair_grid"), _inputs(request, s)


def _user_fixture(request: pytest.FixtureRequest, name: str) -> Any:
    """The value of a fixture the user may override, or a failure that shows its error
    once: the fixture's own frames, not the plugin's; later tests get one line."""
    try:
        return request.getfixturevalue(name)
    except (pytest.FixtureLookupError, pytest.fail.Exception, pytest.skip.Exception):
        raise
    except Exception as exc:
        error = exc
    # failed outside the except block: no "during handling ..." chain in the report
    seen = request.config.stash.setdefault(_FIXTURE_ERRORS, set())
    what = f"{type(error).__name__}: {error}"
    if id(error) in seen:  # a session fixture re-raises the same error for every test
        pytest.fail(f"{name} failed earlier in this run ({what}); see the first error.", False)
    seen.add(id(error))
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not _internal(f.filename)]
    where = "".join(traceback.format_list(frames)).rstrip()
    pytest.fail(f"the {name} fixture raised {what}\n{where}", pytrace=False)


def _internal(filename: str) -> bool:
    parts = Path(filename).parts
    return any(p in ("_pytest", "pluggy", "pytest_recfair") for p in parts)


def _measure(request: pytest.FixtureRequest, s: settings.AuditSettings) -> Any:
    """Run this test's audit (after a batch recording with --fairness-batch); a shard run
    writes its share's result and skips instead."""
    from pytest_recfair import engine as audit

    config, node = request.config, request.node
    recommender = _named(_configured(_user_fixture(request, "recfair_recommender"), s), s)
    seeds = request.getfixturevalue("recfair_seeds")
    grid = request.getfixturevalue("recfair_grid")
    shard = config.stash.get(_SHARD, None)
    inputs = _inputs(request, s)
    # before anything is sent: print the plan, refuse beyond the budget (--fairness-plan: skip)
    planned = _plan(request, s, recommender, seeds, grid, inputs, shard)
    job = audit.AuditRequest(s, recommender, seeds, grid, node.nodeid, inputs=inputs, shard=shard)
    failed = {}
    if s.batch:
        failed = audit.record_batch(job, config.rootpath / s.cassette_dir, _terminal_line(config))
    # the runner flushes recorded cassettes itself, also when the run fails half-way
    cassettes = request.getfixturevalue("recfair_cassettes")
    job = dataclasses.replace(job, cassettes=cassettes, failed=failed)
    if shard is None:
        live = _live_line(config, planned)
        try:
            return audit.measure(dataclasses.replace(job, live=live, progress=False))
        finally:
            if live is not None:
                live.close()
    out = audit.run_shard(job, config.rootpath / s.shard_dir)
    pytest.skip(
        f"fairness shard {shard}: {out.scored} of {out.total} entities scored, written to "
        f"{out.path}; gate the merged audit with --fairness-merge"
    )


def _plan(
    request: pytest.FixtureRequest,
    s: settings.AuditSettings,
    recommender: Any,
    seeds: Any,
    grid: Any,
    inputs: Any,
    shard: Any,
) -> Any:
    """This audit's plan, printed when it will send requests (or with --fairness-plan,
    which then skips the test); a plan past the run's budget fails the test unsent."""
    from pytest_recfair.engine import budget as plan
    from pytest_recfair.engine import planning

    if not (s.plan or planning.is_live(s, recommender)):
        return None
    config = request.config
    planned = planning.audit_plan(
        s,
        recommender,
        seeds=seeds,
        grid=grid,
        test_id=request.node.nodeid,
        cassette_root=config.rootpath / s.cassette_dir,
        inputs=inputs,
        shard=shard,
    )
    plans = config.stash.setdefault(_PLANS, [])
    if s.plan or planned.to_ask:
        _terminal_line(config)(f"recfair plan: {planned.line()}")
    if s.plan:
        plans.append(planned)
        pytest.skip("fairness plan only (--fairness-plan): nothing was sent")
    plan.check_budget(planning.budget_of(s), plans, planned)
    plans.append(planned)
    return planned


def _live_line(config: pytest.Config, planned: Any) -> Any:
    """The progress line of a run that sends requests, drawn through pytest's terminal
    (shown without -s): redrawn in place on a terminal, a line per tenth elsewhere."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if planned is None or not planned.to_ask or reporter is None:
        return None
    from pytest_recfair.providers.liveline import LiveLine

    capture = config.pluginmanager.get_plugin("capturemanager")
    fresh = [True]

    def shown(draw: Any) -> None:
        if capture is None:
            draw()
            return
        with capture.global_and_fixture_disabled():
            draw()

    def rewrite(text: str) -> None:
        def draw() -> None:
            if fresh[0]:  # off the "test_file.py " line pytest is writing
                reporter.ensure_newline()
                fresh[0] = False
            reporter.rewrite(text, erase=True)

        shown(draw)

    return LiveLine(
        planned.to_ask,
        tty=bool(reporter.isatty()),
        rewrite=rewrite,
        write_line=lambda text: shown(lambda: reporter.write_line(text)),
        cost_known=planned.cost is not None,
    )


def _configured(recommender: Any, s: settings.AuditSettings) -> Any:
    """The recommender with this test's provider settings (ini and marker) applied."""
    from pytest_recfair import providers
    from pytest_recfair.providers.envheaders import parse_header_envs

    return providers.configure(
        recommender,
        temperature=s.temperature,
        max_tokens=s.max_tokens,
        seed=s.sampling_seed,
        header_envs=parse_header_envs(s.extra_headers) if s.extra_headers else None,
    )


def _named(recommender: Any, s: settings.AuditSettings) -> Any:
    """A plain callable reported under a readable model id: the marker's ``model=``, else
    its own ``model`` attribute, else its name, else (a lambda or a closure, whose name
    says nothing) the fixture's name."""
    from pytest_recfair import providers

    if isinstance(recommender, providers.CallableProvider) or callable(
        getattr(recommender, "build_request", None)
    ):
        return recommender
    own = getattr(recommender, "model", None)
    if s.model is None and isinstance(own, str) and own:
        return recommender
    label = s.model or providers.callable_label(recommender)
    if "<" in label:  # <lambda>, <locals>: the fixture's name says more
        label = "recfair_recommender"
    return providers.CallableProvider(recommender, model=label)


def _terminal_line(config: pytest.Config) -> Any:
    """A writer of progress lines that shows through pytest's output capture."""
    from pytest_recfair.secrets import scrub

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")

    def write(line: str) -> None:
        if reporter is None:
            return
        line = scrub(line)
        if capture is None:
            _own_line(reporter, line)
            return
        with capture.global_and_fixture_disabled():
            _own_line(reporter, line)

    return write


def _own_line(reporter: Any, line: str) -> None:
    """``line`` on a line of its own: under ``-q`` pytest's progress letters ("s", ".")
    leave the cursor mid-line, and ``write_line`` only breaks lines after a file path."""
    if getattr(getattr(reporter, "_tw", None), "width_of_current_line", 0):
        reporter.write("\n")
    reporter.write_line(line)


@pytest.fixture(autouse=True)
def _recfair_autorun(request: pytest.FixtureRequest) -> None:
    """Runs the audit of a @fairness test that did not ask for fairness_result itself."""
    if request.node.get_closest_marker("fairness") is not None and request.config.getoption(
        "fairness"
    ):
        request.getfixturevalue("fairness_result")


def _default_seeds(domain: str) -> str:
    """The bundled seed set of ``domain`` (directors for movie, artists for music)."""
    from pytest_recfair.prompts.seeds import BUNDLED_SEEDS

    for name, its_domain in BUNDLED_SEEDS.items():
        if its_domain == domain.casefold():
            return name
    raise ConfigError(
        f"@fairness(domain={domain!r}) has no bundled seed set (bundled: "
        f"{', '.join(f'{n} ({d})' for n, d in BUNDLED_SEEDS.items())}); pass "
        "seeds= a file or a fixture name."
    )


def _find_file(request: pytest.FixtureRequest, source: str) -> Path | None:
    """A seeds/grid file, relative to the test file first, then to rootdir."""
    candidates = [Path(source)]
    if not Path(source).is_absolute():
        candidates = [request.path.parent / source, request.config.rootpath / source]
    for c in candidates:
        if c.is_file():
            return c
    return None


def _entities_from(value: Any, domain: str, name: str) -> Any:
    from pytest_recfair.prompts.seeds import Entity, as_entity, load_seeds

    if isinstance(value, str | Path):
        return load_seeds(value, domain=domain)
    items = list(value) if isinstance(value, list | tuple) else None
    if items is not None and all(isinstance(x, Entity | str) for x in items):
        return [as_entity(x, domain) for x in items]
    raise ConfigError(
        f"seeds fixture {name!r} returned {type(value).__name__}; expected a list of "
        "prompts.Entity, a list of names, or a seeds file path."
    )


# --- call phase: the gate ---------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    try:
        outcome = yield
    except (pytest.skip.Exception, KeyboardInterrupt, pytest.exit.Exception):
        raise  # a skipped or interrupted test is not judged
    except BaseException as exc:
        # the test's own code failed: the report says FAIL with this, not the gate's PASS
        _judge(item, f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300])
        raise
    verdict = _judge(item, None)
    if verdict is not None and not verdict.passed:
        pytest.fail(verdict.message, pytrace=False)
    return outcome


def _judge(item: pytest.Item, body_error: str | None) -> Any:
    """Judge an audited test (None if it has no audit); record the outcome for reports."""
    judged = item.stash.get(_AUDIT, None)
    record = item.stash.get(_RECORD, None)
    if judged is None or record is None:
        return None
    from pytest_recfair import engine as audit

    s, comparison = judged
    verdict = audit.judge(s, record.result, comparison, item.nodeid)
    if body_error is not None:
        verdict = audit.body_failed(verdict, body_error)
        if s.update:
            record.not_written = f"the test failed ({body_error})"
    record.result = verdict.result
    unwritable = None
    try:
        record.wrote = audit.write_baseline(verdict)
    except RecfairError as exc:
        unwritable = str(exc)
    if unwritable is not None:  # outside the except: no "during handling" chain printed
        pytest.fail(unwritable, pytrace=False)
    if record.wrote is not None:
        record.changes = audit.baseline_changes(comparison.state.result, verdict.result)
    props = [p for p in item.user_properties if p[0] != "recfair.gate"]
    props.append(("recfair.gate", "pass" if verdict.passed else "fail"))
    item.user_properties[:] = props
    return verdict


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when == "call":
        record = item.stash.get(_RECORD, None)
        controller = item.config.pluginmanager.get_plugin("recfair-controller")
        if record is not None and controller is not None:  # one process: no dict round trip
            controller.take(record)
        elif record is not None:  # an xdist worker: the payload survives serialisation
            report.recfair = record.payload()  # type: ignore[attr-defined]
    _scrub_report(report)
    return report


def _scrub_report(report: pytest.TestReport) -> None:
    """No API key in what pytest prints or writes to JUnit XML: a traceback or captured
    output quoting a URL or an error body, a property with the reply's model name."""
    from pytest_recfair import secrets

    if not secrets.registered():
        return
    if report.longrepr is not None:
        text = str(report.longrepr)
        clean = secrets.scrub(text)
        if clean != text:
            report.longrepr = clean
    report.sections = [(k, secrets.scrub(v)) for k, v in report.sections]
    report.user_properties = [
        (k, secrets.scrub(v) if isinstance(v, str) else v) for k, v in report.user_properties
    ]


def _unused_notes(config: pytest.Config) -> list[str]:
    """Under --fairness-update, the stored baselines no collected test owns. Not after -k
    or -m (their tests were only deselected), nor under xdist (workers collect)."""
    audited = config.stash.get(_AUDITED, None)
    narrowed = config.getoption("keyword", "") or config.getoption("markexpr", "")
    narrowed = narrowed or any("::" in arg for arg in config.args)
    s = _resolve(config, {})
    if not s.update or audited is None or narrowed:
        return []
    from pytest_recfair import engine as audit

    root = config.rootpath / s.baseline_dir
    unused = audit.unused_baselines(root, config.rootpath, audited)
    return [
        f"fairness baseline not used by any test of this run: {path} ({test_id}); delete it "
        f"if that test is gone"
        for path, test_id in unused
    ]


def _add_to_history(config: pytest.Config, collector: audit.RunCollector) -> list[Any]:
    """--fairness-history: add this run to DIR; then, for an HTML report, read DIR back
    (the runs to plot, this one last). A failure is a note, never a lost report."""
    history = config.getoption("fairness_history")
    if not history:
        return []
    directory = config.invocation_params.dir / history
    try:
        entry = collector.append_history(directory)
    except (OSError, RecfairError) as exc:
        collector.notes.append(f"could not add the run to {history}: {exc}")
        return []
    collector.notes.append(f"fairness history entry written: {entry}")
    if not any(Path(p).suffix.lower() == ".html" for p in config.stash.get(_REPORT_PATHS, [])):
        return []
    from pytest_recfair.report.history import load_history

    try:
        return list(load_history(directory))
    except (OSError, RecfairError) as exc:
        collector.notes.append(f"the HTML report plots no history: {exc}")
        return []


class _Controller:
    """Per-run reporting on the controller (or the only process): summary and report file."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        # created with the first audit result: a run without audits never imports audit
        self.collector: audit.RunCollector | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, "recfair", None)
        if payload is not None and report.when == "call":
            if self.collector is None:
                from pytest_recfair import engine as audit

                self.collector = audit.RunCollector()
            self.collector.add(payload)

    def take(self, record: audit.TestRecord) -> None:
        """A test judged in this process (no xdist): its result objects as they are."""
        if self.collector is None:
            from pytest_recfair import engine as audit

            self.collector = audit.RunCollector()
        self.collector.add_record(record)

    def pytest_sessionfinish(self) -> None:
        collector = self.collector
        if collector is None or not collector.results:
            return
        collector.notes.extend(_unused_notes(self.config))
        plotted = _add_to_history(self.config, collector)  # first: the plot shows this run
        for path in self.config.stash.get(_REPORT_PATHS, []):
            try:
                collector.write_report(path, plotted)
            except (OSError, RecfairError) as exc:
                collector.notes.append(f"could not write fairness report {path}: {exc}")
            else:
                collector.notes.append(f"fairness report written: {path}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        plans = self.config.stash.get(_PLANS, [])
        if plans:
            from pytest_recfair.engine import budget as plan

            terminalreporter.write_sep("=", "fairness plan")
            terminalreporter.write_line(plan.total_line(plans))
        collector = self.collector
        if collector is None or not (collector.results or collector.notes):
            return
        terminalreporter.write_sep("=", "fairness summary")
        # the terminal's width (COLUMNS, or 80 when not a terminal), as pytest's own lines
        width = self.config.get_terminal_writer().fullwidth
        from pytest_recfair import secrets

        for line in collector.summary_lines(width):
            terminalreporter.write_line(secrets.scrub(line))


class _Pruner:
    """--fairness-prune: what the run used; at the end, what it did not (docs/cassettes.md)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.usage: set[Any] = set()
        self.baselines: set[Path] = set()
        self.roots: set[tuple[str, str]] = set()
        self.deselected = 0
        self.lines: list[str] = []

    def use(self, s: settings.AuditSettings) -> set[Any]:
        self.roots.add((s.cassette_dir, s.baseline_dir))
        return self.usage

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    def _partial(self, session: pytest.Session) -> str | None:
        """Why this run may not have used everything that is still needed, or None."""
        config = self.config
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        stats = getattr(reporter, "stats", {}) if reporter is not None else {}
        reasons = [
            (config.getoption("numprocesses", None) not in (None, 0), "run with xdist (-n)"),
            (config.getoption("fairness_shard", None) is not None, "a shard"),
            (config.getoption("fairness_merge", None) is not None, "a merge"),
            (bool(config.getoption("keyword") or config.getoption("markexpr")), "-k/-m given"),
            (config.args_source == pytest.Config.ArgsSource.ARGS, "test paths given"),
            (self.deselected > 0, f"{self.deselected} test(s) deselected"),
            (session.testsfailed > 0, f"{session.testsfailed} test(s) failed"),
            (bool(stats.get("skipped")), "test(s) skipped"),
            (bool(stats.get("error")), "errors"),
        ]
        found = [why for cond, why in reasons if cond]
        return ", ".join(found) if found else None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from pytest_recfair.cassettes import prune

        if not self.roots:  # no audit asked for its cassettes
            self.roots.add((settings.DEFAULTS["cassette_dir"], settings.DEFAULTS["baseline_dir"]))
        partial = self._partial(session)
        root = self.config.rootpath
        for cassette_dir, baseline_dir in sorted(self.roots):
            found = prune.plan(
                root / cassette_dir,
                self.usage,
                root / baseline_dir,
                self.baselines,
                migrate=partial is None,
            )
            self.lines.extend(found.lines(root))
            if partial is None and not found.empty:
                prune.apply(found)
        if not self.lines:
            self.lines.append("nothing unused: every cassette interaction and baseline was used")
        elif partial is not None:
            self.lines.append(
                f"listed only, nothing deleted: not a full run ({partial}); run the whole "
                "suite with --fairness --fairness-prune to delete them"
            )
        else:
            self.lines.append("deleted (a full run used none of them)")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_sep("=", "fairness prune")
        for line in self.lines:
            terminalreporter.write_line(line)
