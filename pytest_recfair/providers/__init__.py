"""Recommenders under test: HTTP providers, the callable adapter, and the concurrent runner.

This package is the only place in pytest-recfair that imports httpx.
"""

from __future__ import annotations

from pytest_recfair.providers.adapter import CallableProvider, callable_label, numbered
from pytest_recfair.providers.base import (
    TRUNCATED_FINISH_REASONS,
    Completion,
    Provider,
    TruncatedReply,
    Usage,
)
from pytest_recfair.providers.http import (
    AnthropicProvider,
    GeminiProvider,
    HTTPProvider,
    OllamaProvider,
    OpenAIProvider,
    configure,
    from_config,
    is_loopback,
)
from pytest_recfair.providers.pacing import retry_after_seconds
from pytest_recfair.providers.pipeline import async_http_client, http_client
from pytest_recfair.providers.runner import arun_cases, run_cases
from pytest_recfair.providers.runstate import RunOptions, RunOutcome

__all__ = [
    "TRUNCATED_FINISH_REASONS",
    "AnthropicProvider",
    "CallableProvider",
    "Completion",
    "GeminiProvider",
    "HTTPProvider",
    "OllamaProvider",
    "OpenAIProvider",
    "Provider",
    "RunOptions",
    "RunOutcome",
    "TruncatedReply",
    "Usage",
    "arun_cases",
    "async_http_client",
    "callable_label",
    "configure",
    "from_config",
    "http_client",
    "is_loopback",
    "numbered",
    "retry_after_seconds",
    "run_cases",
]
