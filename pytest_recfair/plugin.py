"""pytest glue: options, marker, fixtures and reporting hooks. Each hook hands off quickly."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("recfair", "fairness audits of LLM recommenders (pytest-recfair)")
    group.addoption(
        "--fairness",
        action="store_true",
        default=False,
        help="run the tests marked @pytest.mark.fairness (fairness audits)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fairness(**kwargs): a fairness audit of the recommender; see docs/configuration.md"
    )
