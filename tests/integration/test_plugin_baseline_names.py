"""Two audited tests keyed to one baseline file are a usage error under --fairness."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def test_two_audits_sharing_a_baseline_name_are_a_usage_error(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_a=(
            "from pytest_recfair import fairness\n\n"
            "@fairness(attr='religion', baseline='shared')\n"
            "def test_one():\n    pass\n\n"
            "@fairness(attr='gender', baseline='shared')\n"
            "def test_two():\n    pass\n"
        )
    )
    run = pytester.runpytest_subprocess("--fairness", "-p", "no:cacheprovider")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    run.stderr.fnmatch_lines(["*test_two*test_one*share the baseline name*shared*"])
    plain = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    plain.assert_outcomes(skipped=2)
