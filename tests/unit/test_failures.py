"""Transport failures are counted per value and stop the audit unless a share is allowed."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pytest_recfair import secrets
from pytest_recfair.errors import ConfigError
from pytest_recfair.gate import unanswered as failures


@dataclass(frozen=True)
class Case:
    id: str
    entity: str
    attribute: str | None
    value: str | None


CASES = [
    Case(f"e{e}/{v or 'neutral'}", f"e{e}", None if v is None else "gender", v)
    for e in range(10)
    for v in (None, "female", "male", "nonbinary")
]


def test_no_failure() -> None:
    s = failures.summarize(CASES, {})
    assert s.count == 0
    assert s.share == 0
    assert s.within(0.0)


def test_counts_per_value_and_share() -> None:
    errors = {"e1/female": "HTTP 500", "e2/female": "HTTP 500", "e3/neutral": "timeout"}
    s = failures.summarize(CASES, errors)
    assert s.count == 3
    assert s.share == pytest.approx(3 / 40)
    assert s.by_group() == {"gender=female": 2, "neutral": 1}
    assert {f.case_id for f in s.failed} == set(errors)
    assert not s.within(0.0)
    assert not s.within(0.05)
    assert s.within(0.075)


def test_message_lists_counts_first_errors_and_what_to_do() -> None:
    key = "sk-planted-failure-key-0123456789"
    secrets.register([key])
    errors = {c.id: f"HTTP 500 from http://h/v1?key={key}: {'x' * 1000}" for c in CASES[:5]}
    msg = failures.summarize(CASES, errors).message("tests/t.py::test_a", 0.01)
    assert msg.startswith("tests/t.py::test_a: 5 of 40 prompts (12.5%)")
    assert "max_failed=0.01" in msg
    assert "neutral 2" in msg
    assert "[e0/neutral] HTTP 500" in msg
    assert "[e1/neutral]" not in msg  # only the first three errors
    assert key not in msg
    assert "recfair_max_failed" in msg
    assert "\n" not in msg


@pytest.mark.parametrize(("given", "share"), [(0, 0.0), ("0.05", 0.05), ("5%", 0.05), (0.5, 0.5)])
def test_max_failed_values(given: object, share: float) -> None:
    assert failures.check_max_failed(given) == pytest.approx(share)


@pytest.mark.parametrize("bad", [1, 1.5, -0.1, "abc", "", True, None, float("nan"), "150%"])
def test_max_failed_bad_values(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"^recfair_max_failed: expected the share") as e:
        failures.check_max_failed(bad, "recfair_max_failed")
    assert "\n" not in str(e.value)
