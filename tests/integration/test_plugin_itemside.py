"""Item-side audits through pytest: catalogue by marker, gate on max_shift and baseline."""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Iterator
from statistics import NormalDist

import pytest

from pytest_recfair.sim.server import SimServer
from tests.support.plugin import (
    assert_fields_absent,
    assert_shards_merge_to_the_full_audit,
    plugin_args,
)

pytest_plugins = ["pytester"]

CONFTEST = """
import random

import pytest

from pytest_recfair.prompts.grids import load_grid

BLACK_FEMALE = [
    v.text for v in load_grid("implicit").attribute("first name").values
    if v.group == "Black female"
]
CHEAP = [f"Diner {i}" for i in range(30)]
DEAR = [f"Bistro {i}" for i in range(30)]
PLANTED = PLANTED_SHARE


@pytest.fixture(scope="session")
def recfair_recommender():
    def recommend(prompt):
        rng = random.Random(prompt)
        city = prompt.split(" in ")[-1].split("?")[0]
        share = random.Random(city).uniform(0.3, 0.7)
        if any(f"for {n} in" in prompt for n in BLACK_FEMALE):
            share += PLANTED
        names = [rng.choice(CHEAP) if rng.random() < share else rng.choice(DEAR) for _ in range(8)]
        return "\\n".join(f"{i + 1}. {n}" for i, n in enumerate(names))

    return recommend


@pytest.fixture
def cities():
    return [f"City {i}" for i in range(80)]
"""

AUDIT = """
from pytest_recfair import fairness


@fairness(attr="first name", grid="implicit", templates="lmrec", domain="restaurant",
          seeds="cities", k=8, item_field="price", catalogue="restaurants.csv", max_shift=0.1)
def test_restaurants(fairness_result):
    items = fairness_result.extras["items"]["attributes"][0]
    assert items["attribute"] == "first name"
"""


def _setup(pytester: pytest.Pytester, planted: float) -> None:
    rows = ["title,price"] + [f"Diner {i},$" for i in range(30)]
    rows += [f"Bistro {i},$$$" for i in range(30)]
    (pytester.path / "restaurants.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    pytester.makeconftest(CONFTEST.replace("PLANTED_SHARE", repr(planted)))
    pytester.makeini("[pytest]\nrecfair_n_resamples = 200\n")
    pytester.makepyfile(test_audit=AUDIT)


def test_planted_price_shift_fails_max_shift(pytester: pytest.Pytester) -> None:
    _setup(pytester, 0.3)
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update", "-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Black female shifts 0.* from neutral*> max_shift 0.1*"])
    # the failure table's most / least column names the group (issue 21, point 4)
    result.stdout.fnmatch_lines(["*first name*item_shift*max 0.1*Black female*"])
    flat = " ".join(result.stdout.str().split())  # the summary's lines, unwrapped
    assert "most / least shifted from neutral: Black female / " in flat
    # each group against the others (family-wise): a column of the field's table
    assert re.search(r"White female: .*?, vs others 0\.\d{3}, p \(vs others\) ", flat)


def test_fair_run_passes_and_a_later_shift_fails_against_the_baseline(
    pytester: pytest.Pytester,
) -> None:
    _setup(pytester, 0.0)
    report = pytester.path / "r.json"
    result = pytester.runpytest(
        *plugin_args(), "--fairness", "--fairness-update", f"--fairness-report={report}"
    )
    result.assert_outcomes(passed=1)
    data = json.loads(report.read_text(encoding="utf-8"))
    # the list prompts' settings, no similarity metric, variant, missing policy or table
    absent = frozenset({"metric", "variant", "missing", "attributes", "merges", "extras"})
    assert_fields_absent(data["results"][0], absent, "item-side result")
    assert {"grid", "templates", "k", "item_field"} <= set(data["results"][0]["meta"])
    price = data["results"][0]["items"]["attributes"][0]["fields"][0]
    assert price["groups"][0] == "(neutral)"
    assert "Black female" in price["groups"]
    # a new model version shifts prices for one group, below max_shift: the baseline catches it
    pytester.makeconftest(CONFTEST.replace("PLANTED_SHARE", "0.12"))
    pytester.makepyfile(test_audit=AUDIT.replace("max_shift=0.1", "max_shift=0.5"))
    again = pytester.runpytest(*plugin_args(), "--fairness")
    again.assert_outcomes(failed=1)
    # the headline: the kind's statistic, baseline -> now, tolerance, p and the group
    again.stdout.fnmatch_lines(
        ["*first name item_shift 0.* → 0.* (+0.*, tolerance *, p *): Black female"]
    )


def test_the_plan_says_what_an_item_side_run_can_detect(pytester: pytest.Pytester) -> None:
    """After a baseline, --fairness-plan sizes each field's largest-shift drift test from
    the SE of the baseline's stored interval (width / 2 z_0.975) at its 80 cities."""
    _setup(pytester, 0.1)
    pytester.makepyfile(test_audit=AUDIT.replace("max_shift=0.1", "max_shift=0.5, tolerance=0.05"))
    pytester.runpytest(*plugin_args(), "--fairness", "--fairness-update").assert_outcomes(passed=1)
    (path,) = (pytester.path / "baselines").rglob("*.json")
    lo, hi = json.loads(path.read_text())["items"]["attributes"][0]["fields"][0]["max_shift_ci"]
    z = NormalDist().inv_cdf
    noise = (z(0.95) + z(0.9)) * math.sqrt(2) * (hi - lo) / (2 * z(0.975))
    result = pytester.runpytest(*plugin_args(), "--fairness", "--fairness-plan")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            f"recfair plan: first name · price · largest shift: tolerance 0.05 (the margin, "
            f"never raised) needs ~{80 * (noise / 0.05) ** 2:,.0f} entities for a rise of 2 x "
            f"tolerance to be caught 9 times in 10 (SE * at 80); at 80 entities a run cannot "
            f"reliably detect a largest shift rise below ~{0.05 + noise:.3g} (one comparison)"
        ]
    )


def test_shards_merge_to_the_unsharded_item_side_audit(pytester: pytest.Pytester) -> None:
    """Item-side scores need every entity's replies: the shards write theirs and the
    merge run scores them together, to the numbers of the unsharded run."""
    _setup(pytester, 0.05)
    assert_shards_merge_to_the_full_audit(pytester)


LOOPBACK_AUDIT = """
from pytest_recfair import fairness


@fairness(attr="gender", grid="fairllm", domain="restaurant", k=5, item_field=FIELD,
          catalogue="catalogue.csv", seeds="cities")
def test_restaurants(fairness_result):
    pass
"""


def _restaurants(prompt: str, system: str | None = None) -> str:
    rng = random.Random(prompt)
    names = [f"Diner {rng.randrange(30)}" if rng.random() < 0.5 else f"Bistro {rng.randrange(30)}"
             for _ in range(5)]  # fmt: skip
    return "\n".join(f"{i + 1}. {n}" for i, n in enumerate(names))


def _subprocess(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A fresh process per run: in-process reruns share module state between runs."""
    return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", *args)


@pytest.fixture
def loopback() -> Iterator[SimServer]:
    with SimServer(_restaurants) as srv:
        yield srv


def _loopback_project(pytester: pytest.Pytester, srv: SimServer, field: str) -> None:
    rows = ["title,price,cuisine,rating"]
    rows += [f"Diner {i},$,diner,{i * 0.37:.2f}" for i in range(30)]
    rows += [f"Bistro {i},$$$,french,{i * 0.41:.2f}" for i in range(30)]
    (pytester.path / "catalogue.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    pytester.makeini(
        "[pytest]\n"
        "recfair_provider = openai\n"
        "recfair_model = recfair-sim-1\n"
        f"recfair_base_url = {srv.base_url}\n"
        "recfair_n_resamples = 50\n"
        "recfair_record_mode = once\n"
    )
    pytester.makepyfile(test_audit=LOOPBACK_AUDIT.replace("FIELD", repr(field)))
    pytester.makeconftest(
        "import pytest\n\n\n@pytest.fixture\ndef cities():\n"
        "    return ['Paris', 'Lyon', 'Nice', 'Lille', 'Lens', 'Metz']\n"
    )


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("stars", "has no field 'stars'; its fields are price, cuisine, rating*"),
        ("price,", "*"),  # a trailing comma is fine: one field
        ("rating", "*numeric with * distinct values*bin it into levels*"),
    ],
)
def test_bad_item_settings_stop_before_the_first_request(
    pytester: pytest.Pytester, loopback: SimServer, field: str, message: str
) -> None:
    _loopback_project(pytester, loopback, field)
    result = _subprocess(pytester, "--fairness", "--fairness-update")
    if field == "price,":
        result.assert_outcomes(passed=1)
        assert loopback.stats.requests > 0
        return
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # checked at collection (issue 34)
    result.stderr.fnmatch_lines([f"*test_restaurants: *{message}*"])
    assert loopback.stats.requests == 0  # refused before anything was paid for


def test_numeric_levels_are_read_as_ordinal(pytester: pytest.Pytester, loopback: SimServer) -> None:
    """Yelp stores price as 1-4: the levels are the categories, in numeric order."""
    _loopback_project(pytester, loopback, "price")
    path = pytester.path / "catalogue.csv"
    text = path.read_text(encoding="utf-8")
    for sign, level in (("$$$", "3"), ("$", "1")):
        text = text.replace(f",{sign},", f",{level},")
    path.write_text(text, encoding="utf-8")
    report = pytester.path / "r.json"
    result = _subprocess(pytester, "--fairness", "--fairness-update", f"--fairness-report={report}")
    result.assert_outcomes(passed=1)
    data = json.loads(report.read_text(encoding="utf-8"))
    price = data["results"][0]["items"]["attributes"][0]["fields"][0]
    assert price["categories"] == ["1", "3"]  # numeric order, as levels
    assert len(price["between"]) == len(price["groups"]) - 1
