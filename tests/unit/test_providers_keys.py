"""Which requests carry an API key: a loopback base_url gets one only on purpose (issue 25.4)."""

from __future__ import annotations

import pytest

from pytest_recfair.providers import from_config
from pytest_recfair.providers.http import unauthorized_hint


def test_a_loopback_url_gets_a_key_only_when_its_variable_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A local proxy (LiteLLM, an SSH tunnel) gets the provider key only when named."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-proxy-key")
    url = "http://127.0.0.1:4000/v1"
    default = from_config("openai", model="m", base_url=url).build_request(None, "p")
    assert "authorization" not in default.headers
    named = from_config("openai", model="m", base_url=url, api_key_env="OPENAI_API_KEY")
    assert named.build_request(None, "p").headers["authorization"] == "Bearer sk-local-proxy-key"
    remote = from_config("openai", model="m").build_request(None, "p")
    assert remote.headers["authorization"] == "Bearer sk-local-proxy-key"


def test_a_401_from_a_loopback_url_explains_the_rule_and_the_opt_in() -> None:
    hint = unauthorized_hint(None, "http://localhost:4000/v1")
    assert "loopback" in hint
    assert "recfair_api_key_env = OPENAI_API_KEY" in hint
    assert "loopback" not in unauthorized_hint(None, "https://api.example.com/v1")
    assert "MY_KEY" in unauthorized_hint("MY_KEY", "http://localhost:4000/v1")
