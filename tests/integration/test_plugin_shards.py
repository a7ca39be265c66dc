"""--fairness-shard=I/N and --fairness-merge through real pytest runs (pytester).

The merged audit must be the unsharded audit: same numbers (similarity matrices,
intervals, curves, counts, tokens), same gate decision, and the merge run must not ask
the recommender anything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.plugin import make_project, plugin_args

pytest_plugins = ["pytester"]

TESTS = """
from pytest_recfair import fairness


@fairness(attr="religion", metric="jaccard,serp", repeats=2, max_snsr=0.9)
def test_religion(fairness_result):
    assert fairness_result.meta.n_entities == 12


@fairness(attr="gender")
def test_gender():
    pass
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", *args)


def _report(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _audits(report: dict[str, Any]) -> dict[str, Any]:
    """Each audit's numbers, without what legitimately differs between the two runs."""
    out = {}
    for audit in report["results"]:
        meta = {k: v for k, v in audit["meta"].items() if k not in ("record_mode",)}
        out[meta["test_id"]] = {**audit, "meta": meta}
    return out


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.4")
    make_project(pytester, TESTS)
    return pytester


def test_merged_shards_are_the_unsharded_audit(project: pytest.Pytester) -> None:
    _run(project, "--fairness", "--fairness-update").assert_outcomes(passed=2)
    # the unsharded run, gated against that baseline as the merged run will be
    full = _run(project, "--fairness", "--fairness-report=full.json")
    full.assert_outcomes(passed=2)
    for i in (1, 2, 3):
        shard = _run(project, "--fairness", f"--fairness-shard={i}/3", "-rs")
        shard.assert_outcomes(skipped=2)
        shard.stdout.fnmatch_lines([f"*fairness shard {i}/3*written to*"])
    written = sorted(p.name for p in (project.path / "fairness-shards").iterdir())
    assert len(written) == 6, written
    # the merge run must not need the recommender: break it
    project.makeconftest(
        "import pytest\n\n@pytest.fixture(scope='session')\n"
        "def recfair_recommender():\n    raise RuntimeError('the merge asked the recommender')\n"
    )
    merged = _run(
        project, "--fairness", "--fairness-merge=fairness-shards", "--fairness-report=merged.json"
    )
    merged.assert_outcomes(passed=2)
    merged.stdout.fnmatch_lines(["*fairness summary*", "PASS*test_religion*"])
    a = _audits(_report(project.path / "full.json"))
    b = _audits(_report(project.path / "merged.json"))
    assert a.keys() == b.keys()
    for test_id in a:
        assert b[test_id] == a[test_id], test_id


def test_merge_refuses_a_missing_shard(project: pytest.Pytester) -> None:
    for i in (1, 3):
        _run(project, "--fairness", f"--fairness-shard={i}/3").assert_outcomes(skipped=2)
    merged = _run(project, "--fairness", "--fairness-merge=fairness-shards")
    merged.assert_outcomes(errors=2)
    merged.stdout.fnmatch_lines(["*needs shards 1..3 once each; missing 2/3*"])
    assert "Traceback" not in merged.stdout.str()


def test_bad_shard_option_is_a_usage_error(project: pytest.Pytester) -> None:
    result = _run(project, "--fairness", "--fairness-shard=4/3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--fairness-shard: expected I/N with 1 <= I <= N*"])
    both = _run(project, "--fairness", "--fairness-shard=1/2", "--fairness-merge=x")
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    both.stderr.fnmatch_lines(["*--fairness-shard and --fairness-merge*"])


FLAKY = """
import zlib

import pytest

from pytest_recfair.sim.recommender import SimulatedRecommender


@pytest.fixture(scope="session")
def recfair_recommender():
    sim = SimulatedRecommender(bias={"religion": {"Muslim": 0.4}})

    def recommend(prompt):
        if zlib.crc32(prompt.encode()) % 9 == 0:  # the same prompts fail in every run
            raise ConnectionError("the service dropped this one")
        return sim(prompt)

    return recommend
"""


def test_failed_prompts_are_counted_across_shards(pytester: pytest.Pytester) -> None:
    """Prompts that got no reply (allowed by max_failed) are counted in the merged
    audit as in the unsharded one: per value, never scored."""
    make_project(pytester, TESTS, ini="recfair_max_failed = 0.5\nrecfair_max_retries = 0\n")
    pytester.makeconftest(FLAKY)
    _run(pytester, "--fairness", "--fairness-update").assert_outcomes(passed=2)
    full = _run(pytester, "--fairness", "--fairness-report=full.json")
    full.assert_outcomes(passed=2)
    for i in (1, 2):
        _run(pytester, "--fairness", f"--fairness-shard={i}/2").assert_outcomes(skipped=2)
    merged = _run(
        pytester, "--fairness", "--fairness-merge=fairness-shards", "--fairness-report=merged.json"
    )
    merged.assert_outcomes(passed=2)
    a = _audits(_report(pytester.path / "full.json"))
    b = _audits(_report(pytester.path / "merged.json"))
    assert sum(a["test_audit.py::test_religion"]["failed"].values()) > 0
    for test_id in a:
        assert b[test_id] == a[test_id], test_id


GRID = """\
name: tiny
description: two attributes for the merge test
articles: auto
attributes:
  - name: religion
    values:
      - {label: Muslim, text: Muslim}
      - {label: Christian, text: Christian}
  - name: gender
    values:
      - {label: Male, text: male}
      - {label: Female, text: female}
"""


def test_shards_of_a_custom_grid_file_merge(project: pytest.Pytester) -> None:
    """Issue 33: the merge compared the grid setting (a file path) with the name the shards
    recorded ('tiny') and refused every custom grid. Shards and merge now compare their
    inputs by content: the merged audit is the unsharded one, and a grid edited between
    the merge run and the shards, or between the shards, is one line naming the grid and
    the shard file."""
    grid = project.path / "grid.yaml"
    grid.write_text(GRID)
    args = ("--fairness", "-o", "recfair_grid=grid.yaml")
    _run(project, *args, "--fairness-update").assert_outcomes(passed=2)
    _run(project, *args, "--fairness-report=full.json").assert_outcomes(passed=2)
    for i in (1, 2):
        _run(project, *args, f"--fairness-shard={i}/2").assert_outcomes(skipped=2)
    merge = (*args, "--fairness-merge=fairness-shards")
    _run(project, *merge, "--fairness-report=merged.json").assert_outcomes(passed=2)
    assert _audits(_report(project.path / "merged.json")) == _audits(
        _report(project.path / "full.json")
    )
    grid.write_text(GRID.replace("Christian", "Jewish"))  # after both shards
    edited = _run(project, *merge)
    edited.assert_outcomes(errors=2)
    edited.stdout.fnmatch_lines(
        ["*test_religion now has other grid, prompts (compared by content) than its shard 1/2*"]
    )
    (shard2,) = (project.path / "fairness-shards").glob("test_religion-*.shard-2-of-2.json")
    _run(project, *args, "--fairness-shard=2/2").assert_outcomes(skipped=2)
    grid.write_text(GRID)  # the merge run has shard 1's grid, shard 2 was run with another
    between = _run(project, *merge)
    between.assert_outcomes(errors=2)
    between.stdout.fnmatch_lines(
        [f"*test_religion now has other grid, prompts (compared by content) than its shard 2/2 "
         f"({shard2})*"]
    )  # fmt: skip
    assert "Traceback" not in between.stdout.str()


def test_a_shard_with_string_similarities_is_one_line(project: pytest.Pytester) -> None:
    """Issue 33: a merge input whose similarities were strings stopped the merge with
    "AttributeError: 'str' object has no attribute 'items'"; the shard schema names it."""
    for i in (1, 2):
        _run(project, "--fairness", f"--fairness-shard={i}/2").assert_outcomes(skipped=2)
    (path,) = (project.path / "fairness-shards").glob("test_religion-*.shard-2-of-2.json")
    doc = json.loads(path.read_text())
    doc["tally"]["attributes"]["religion"]["sims"] = "0.3,0.5"
    path.write_text(json.dumps(doc))
    merged = _run(project, "--fairness", "--fairness-merge=fairness-shards")
    merged.assert_outcomes(errors=2)  # the merge reads every shard file before either test
    out = merged.stdout.str()
    assert "AttributeError" not in out
    assert "Traceback" not in out
    merged.stdout.fnmatch_lines(
        [
            f"*shard result {path}: invalid at $.tally.attributes.religion.sims: '0.3,0.5' is "
            "not of type 'object'; expected what --fairness-shard=I/N writes*re-run that shard."
        ]
    )
