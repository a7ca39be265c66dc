"""Metrics go into JUnit XML as <property> elements of each audited test case."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.support.plugin import make_project, plugin_args

pytest_plugins = ["pytester"]


def test_junit_properties(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECFAIR_TEST_BIAS", "0.5")
    make_project(
        pytester,
        """
        from pytest_recfair import fairness

        @fairness(attr="religion")
        def test_religion(fairness_result):
            pass
        """,
    )
    xml = pytester.path / "junit.xml"
    result = pytester.runpytest(
        *plugin_args(), "--fairness", "--fairness-update", f"--junitxml={xml}"
    )
    result.assert_outcomes(passed=1)
    case = ET.parse(xml).getroot().find(".//testcase[@name='test_religion']")
    assert case is not None
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    for key in (
        "recfair.religion.snsr",
        "recfair.religion.snsv",
        "recfair.religion.pafs",
        "recfair.religion.refusal_gap",
    ):
        assert key in props, sorted(props)
        assert 0.0 <= float(props[key] or "nan") <= 1.0
    assert float(props["recfair.religion.snsr"] or 0) > 0.2  # the planted bias shows
    assert props["recfair.gate"] == "pass"
    assert props["recfair.model"]
