"""Transport failure is not model output (issue 10 point 1), end to end over loopback HTTP.

Prompts that get no valid response after their retries (HTTP 500 to the end, a 200 whose
body is not JSON, a 401) are never scored and never written to a cassette. The test fails
listing them per attribute value, unless ``max_failed`` allows their share: then they
leave their value's mean (never scored 0) and are counted in the summary and reports.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpcore  # noqa: F401  (kept across pytester's in-process runs: see below)
import pytest

from pytest_recfair.sim.server import SimServer
from tests.integration import llm_stubs
from tests.support.plugin import plugin_args

pytest_plugins = ["pytester"]

# pytester drops the modules an in-process run imported. httpx maps httpcore's exceptions
# to its own by class; a second run would import httpcore anew, and a dropped connection
# (httpcore.ReadError of the new module) would no longer be recognised and retried.

_TEST = """
from pytest_recfair import fairness

@fairness(attr="religion"{marker})
def test_religion(fairness_result):
    failed = fairness_result.failed
    n = fairness_result.meta.n_entities
    values = {{v.value: v for v in fairness_result.attributes[0].values}}
    for group in failed:
        if group != "neutral":  # a failed prompt leaves its value's mean: fewer entities
            assert values[group.split("=", 1)[1]].n < n, (group, values)
    print("FAILED-GROUPS", sorted(failed), fairness_result.prompts)
"""


def _statuses(root: Path) -> list[int]:
    """The HTTP status of every interaction in every cassette under ``root``."""
    out = []
    for path in sorted(root.rglob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        out += [int(i["response"]["status"]["code"]) for i in data["interactions"]]
    return out


def _project(pytester: pytest.Pytester, base_url: str, marker: str = "", **ini: str) -> None:
    lines = [
        "[pytest]",
        "recfair_entities = 6",
        "recfair_n_resamples = 100",
        "recfair_concurrency = 64",
        # the demo profile plants refusals; with 6 entities their share is noisy
        "recfair_max_unusable = 0.6",
        "recfair_provider = openai",
        "recfair_model = recfair-sim",
        f"recfair_base_url = {base_url}",
        *(f"{k} = {v}" for k, v in ini.items()),
    ]
    pytester.makeini("\n".join(lines) + "\n")
    pytester.makepyfile(test_audit=_TEST.format(marker=marker))


@pytest.fixture
def garbage_stub() -> Iterator[str]:
    """Every 5th prompt always gets a 200 whose body is an HTML page, never JSON."""
    server = llm_stubs.serve(0, dead_every=5, garbage=True)
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_persistent_500s_fail_the_test_and_are_never_recorded(pytester: pytest.Pytester) -> None:
    # 60% of attempts answer HTTP 500, with no cap per request: some prompts fail all
    # six tries; the rest get through after a few retries.
    with SimServer(faults="500=0.6,max_per_request=none", seed=3) as srv:
        _project(pytester, srv.base_url)
        run = pytester.runpytest(
            *plugin_args(), "--fairness", "--fairness-record=once", "--fairness-update"
        )
    run.assert_outcomes(errors=1)
    out = run.stdout.str()
    assert "got no valid response after their retries (no failure is allowed)" in out
    assert "Failed per value:" in out
    assert "HTTP 500" in out
    assert "max_failed" in out  # what to do next
    assert not list((pytester.path / "baselines").rglob("*.json"))  # no wrong baseline
    statuses = _statuses(pytester.path / "fixtures" / "cassettes")
    assert statuses
    assert set(statuses) == {200}


def test_garbage_bodies_fail_unless_max_failed_allows_their_share(
    pytester: pytest.Pytester, garbage_stub: str
) -> None:
    _project(pytester, garbage_stub)
    run = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-record=once")
    run.assert_outcomes(errors=1)
    run.stdout.fnmatch_lines(["*6 of 30 prompts (20.0%) got no valid response*not JSON*"])
    statuses = _statuses(pytester.path / "fixtures" / "cassettes")
    assert len(statuses) == 24
    assert set(statuses) == {200}
    for path in (pytester.path / "fixtures" / "cassettes").rglob("*.json"):
        assert "proxy error" not in path.read_text(encoding="utf-8")

    # a marker allowing less than 20% still fails; one allowing 25% passes and reports.
    # (new_episodes: the failed prompts have no recording, so they are asked again)
    _project(pytester, garbage_stub, marker=", max_failed=0.1")
    again = ("--fairness", "--fairness-record=new_episodes")
    pytester.runpytest(*plugin_args(), *again).assert_outcomes(errors=1)
    _project(pytester, garbage_stub, marker=", max_failed=0.25")
    report = pytester.path / "r"
    run = pytester.runpytest(
        *plugin_args(),
        *again,
        "--fairness-update",
        "-s",
        *(f"--fairness-report={report}.{ext}" for ext in ("json", "md", "html")),
    )
    run.assert_outcomes(passed=1)
    run.stdout.fnmatch_lines(
        ["*FAILED-GROUPS * 30", "*6 of 30 prompts got no valid response, left out (*"]
    )
    data = json.loads(Path(f"{report}.json").read_text(encoding="utf-8"))
    result = data["results"][0]
    assert sum(result["failed"].values()) == 6
    assert result["prompts"] == 30
    assert "6 of 30 prompts got no valid response" in Path(f"{report}.md").read_text("utf-8")
    assert "6 of 30 prompts got no valid response" in Path(f"{report}.html").read_text("utf-8")


def test_max_failed_from_ini(pytester: pytest.Pytester, garbage_stub: str) -> None:
    _project(pytester, garbage_stub, recfair_max_failed="25%")
    run = pytester.runpytest(
        *plugin_args(), "--fairness", "--fairness-record=once", "--fairness-update"
    )
    run.assert_outcomes(passed=1)


def test_a_401_is_never_recorded_so_a_good_key_then_records(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SimServer(api_key="good-key") as srv:
        _project(pytester, srv.base_url, recfair_api_key_env="RECFAIR_TEST_KEY")
        monkeypatch.setenv("RECFAIR_TEST_KEY", "bad-key")
        run = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-record=once")
        assert run.ret != 0
        run.stdout.fnmatch_lines(["*401 Unauthorized*RECFAIR_TEST_KEY*"])
        assert 401 not in _statuses(pytester.path / "fixtures" / "cassettes")
        monkeypatch.setenv("RECFAIR_TEST_KEY", "good-key")
        run = pytester.runpytest(
            *plugin_args(), "--fairness", "--fairness-record=once", "--fairness-update"
        )
    run.assert_outcomes(passed=1)
    assert set(_statuses(pytester.path / "fixtures" / "cassettes")) == {200}
