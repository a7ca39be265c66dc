"""Every audit's inputs are checked before any test of the run sends anything (issue 34
point 5): a run of a good audit and a bad one, against a live loopback model with a
recording mode, sends no request and stops with one usage-error line naming the bad test,
its argument, what was expected and the nearest valid name. An entity count above the
seed set is said once per run.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from pytest_recfair.sim.server import SimServer
from tests.support.plugin import plugin_args

pytest_plugins = ["pytester"]

USAGE = 4

GOOD = """
from pytest_recfair import fairness


@fairness(attr="religion")
def test_a_good_audit(fairness_result):
    pass

"""


@dataclass(frozen=True)
class Bad:
    marker: str  # the bad test's @fairness arguments
    says: tuple[str, ...]  # parts of the one line
    files: dict[str, str] = field(default_factory=dict)


CATALOGUE = "title,price,cuisine\n" + "".join(f"Diner {i},$,diner\n" for i in range(5))

CASES = {
    "attr misspelt": Bad('attr="relgion"', ("attr='relgion'", "did you mean 'religion'?")),
    "crossed attr misspelt": Bad(
        'attr="race x gendr"', ("has no attribute 'gendr'", "did you mean 'gender'?")
    ),
    "attr of a grid file": Bad(
        'attr="relgion", grid="grid.yaml"',
        ("grid 'mine' has no attribute 'relgion'", "did you mean 'religion'?"),
        {"grid.yaml": "name: mine\nattributes:\n  - name: religion\n    values:\n"
                      "      - {label: Muslim, text: Muslim}\n"},
    ),
    "grid file missing": Bad('attr="religion", grid="grids/nothere.yaml"',
                             ("@fairness(grid='grids/nothere.yaml'): no such file",)),
    "seeds file missing": Bad('attr="religion", seeds="nothere.csv"',
                              ("@fairness(seeds='nothere.csv'): no such file",)),
    "item field misspelt": Bad(
        'attr="gender", item_field="prise", catalogue="catalogue.csv"',
        ("has no field 'prise'; its fields are price, cuisine", "did you mean 'price'?"),
        {"catalogue.csv": CATALOGUE},
    ),
    "catalogue missing": Bad('attr="gender", item_field="price", catalogue="nothere.csv"',
                             ("@fairness(catalogue='nothere.csv'): no such file",)),
    "candidates file missing": Bad('attr="gender", candidates="candidates.yaml"',
                                   ("@fairness(candidates='candidates.yaml'): no such file "
                                    "or fixture",)),
    "question set misspelt": Bad(
        'kind="roleplay", questions="smoek"',
        ("no such bundled role-play question set", "did you mean 'smoke'?"),
    ),
    "role-play attr misspelt": Bad(
        'kind="roleplay", questions="smoke", attr="relgion"',
        ("not a role-play attribute", "did you mean 'religion'?"),
    ),
}  # fmt: skip


def _answer(prompt: str, system: str | None = None) -> str:
    rng = random.Random(prompt)
    return "\n".join(f"{i + 1}. Film {rng.randrange(40)}" for i in range(5))


@pytest.fixture(scope="module")
def loopback() -> Iterator[SimServer]:
    with SimServer(_answer) as srv:
        yield srv


def _project(pytester: pytest.Pytester, srv: SimServer, tests: str, ini: str = "") -> None:
    pytester.makeini(
        "[pytest]\n"
        "recfair_provider = openai\n"
        "recfair_model = recfair-sim-1\n"
        f"recfair_base_url = {srv.base_url}\n"
        "recfair_k = 5\n"
        "recfair_n_resamples = 50\n" + ini
    )
    pytester.makepyfile(test_audit=tests)


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, list[str]]:
    """A fresh process (in-process runs share module state between runs)."""
    run = pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", *args)
    return run, (run.stdout.str() + "\n" + run.stderr.str()).splitlines()


def test_the_good_audit_alone_asks_the_model(
    pytester: pytest.Pytester, loopback: SimServer
) -> None:
    """The control: the projects below would send requests but for their bad test."""
    _project(pytester, loopback, GOOD, "recfair_entities = 2\n")
    before = loopback.stats.requests
    run, out = _run(pytester, "--fairness", "--fairness-record=once", "--fairness-update")
    assert run.ret == 0, out
    assert loopback.stats.requests > before


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_one_bad_audit_stops_the_run_before_any_request(
    pytester: pytest.Pytester, loopback: SimServer, case: Bad
) -> None:
    bad = f"@fairness({case.marker})\ndef test_z_bad_audit(fairness_result):\n    pass\n"
    _project(pytester, loopback, GOOD + bad, "recfair_entities = 2\n")
    for name, text in case.files.items():
        (pytester.path / name).write_text(text, encoding="utf-8")
    before = loopback.stats.requests
    run, out = _run(pytester, "--fairness", "--fairness-record=once")
    assert run.ret == USAGE, out
    assert loopback.stats.requests == before  # not one request, for any test of the run
    said = [line for line in out if all(part in line for part in case.says)]
    assert len(said) == 1, out
    assert "test_audit.py::test_z_bad_audit: " in said[0]
    assert not [line for line in out if line.startswith(("Traceback", "E   ", "    raise"))]


def test_under_xdist_a_bad_audit_stops_the_run_with_its_line_not_a_crash(
    pytester: pytest.Pytester, loopback: SimServer
) -> None:
    """An xdist worker cannot end a run with a usage error (the controller reads it as a
    crash: INTERNALERROR and a traceback): the run is interrupted (exit 2) with the line."""
    bad = '@fairness(attr="relgion")\ndef test_z_bad_audit(fairness_result):\n    pass\n'
    _project(pytester, loopback, GOOD + bad, "recfair_entities = 2\n")
    before = loopback.stats.requests
    run, out = _run(pytester, "--fairness", "--fairness-record=once", "-n", "2")
    assert run.ret == pytest.ExitCode.INTERRUPTED, out
    assert loopback.stats.requests == before
    said = [line for line in out if "did you mean 'religion'?" in line]
    assert len(said) == 1, out
    assert "test_audit.py::test_z_bad_audit: " in said[0]
    assert not [line for line in out if "INTERNALERROR" in line or "Traceback" in line], out


def test_a_bad_audit_deselected_does_not_stop_the_run(
    pytester: pytest.Pytester, loopback: SimServer
) -> None:
    bad = '@fairness(attr="relgion")\ndef test_z_bad_audit(fairness_result):\n    pass\n'
    _project(pytester, loopback, GOOD + bad, "recfair_entities = 2\n")
    run, out = _run(
        pytester, "--fairness", "--fairness-record=once", "--fairness-update", "-k", "good"
    )
    assert run.ret == 0, out


def test_a_conftest_grid_is_left_to_run_time(
    pytester: pytest.Pytester, loopback: SimServer
) -> None:
    """recfair_grid overridden in a conftest: its attributes are known only at run time,
    where the audit of an attribute it has is run."""
    pytester.makeconftest(
        "import pytest\nfrom pytest_recfair.prompts.grids import grid_from_dict\n\n\n"
        "@pytest.fixture\ndef recfair_grid():\n"
        "    return grid_from_dict({'name': 'own', 'attributes': [{'name': 'relgion', "
        "'values': [{'label': 'A', 'text': 'A'}, {'label': 'B', 'text': 'B'}]}]})\n"
    )
    tests = 'from pytest_recfair import fairness\n\n\n@fairness(attr="relgion")\n'
    tests += "def test_own_grid(fairness_result):\n    pass\n"
    _project(pytester, loopback, tests, "recfair_entities = 2\n")
    run, out = _run(pytester, "--fairness", "--fairness-record=once", "--fairness-update")
    assert run.ret == 0, out


@pytest.mark.parametrize(
    ("ini", "marker", "args", "asked"),
    [
        ("", "", ("--fairness-entities=100000",), "--fairness-entities=100000"),
        ("recfair_entities = 100000\n", "", (), "recfair_entities=100000"),
        ("", ", entities=100000", (), "@fairness(entities=100000)"),
    ],
    ids=["option", "ini", "marker"],
)
def test_entities_above_the_seed_count_are_said_once(
    pytester: pytest.Pytester,
    loopback: SimServer,
    ini: str,
    marker: str,
    args: tuple[str, ...],
    asked: str,
) -> None:
    tests = "from pytest_recfair import fairness\n\n"
    tests += f"pytestmark = fairness(attr='religion'{marker})\n\n\n"
    tests += "def test_one(fairness_result):\n    pass\n\n\n"
    tests += "def test_two(fairness_result):\n    pass\n"
    _project(pytester, loopback, tests, ini)
    before = loopback.stats.requests
    run, out = _run(pytester, "--fairness", "--fairness-plan", *args)
    assert run.ret == 0, out
    said = [line for line in out if "entities" in line and "asked for" in line]
    assert said == [
        f"recfair: {asked} asked for 100000 entities; the bundled seed set 'directors' "
        "has 490: all 490 are audited"
    ], out
    assert loopback.stats.requests == before  # the plan sends nothing
