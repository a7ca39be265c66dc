"""Per-audit provider settings (ini and marker) applied to the recommender of a test.

The session's provider is built once from the ini keys; a test's ``temperature``,
``max_tokens``, ``sampling_seed`` and ``extra_headers`` give it a configured copy, so
two tests with other settings never share one. Callables take none of these (they are
the user's own code); timeout, retries and the system message reach them through the
runner and the prompt cases.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from typing import Any

from pytest_recfair import secrets
from pytest_recfair.providers.http import HTTPProvider

__all__ = ["configure"]


def configure(
    recommender: Any,
    *,
    temperature: float | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
    header_envs: Mapping[str, str] | None = None,
) -> Any:
    """``recommender`` with the settings that are given (None: keep its own)."""
    if not isinstance(recommender, HTTPProvider):
        return recommender
    changes: dict[str, Any] = {
        name: value
        for name, value in (
            ("temperature", temperature),
            ("max_tokens", max_tokens),
            ("seed", seed),
        )
        if value is not None
    }
    if not changes and not header_envs:
        return recommender
    out = copy.copy(recommender)
    for name, value in changes.items():
        setattr(out, name, value)
    if header_envs:
        values, missing = read_header_envs(header_envs)
        out.extra_headers = {**recommender.extra_headers, **values}
        # Every value is treated as a secret: scrubbed from cassettes and messages.
        out.secrets = tuple(dict.fromkeys([*recommender.secrets, *values.values()]))
        secrets.register(out.secrets)
        out.missing_header_envs = tuple(missing)
    return out


def read_header_envs(
    names: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """(header -> value of each set variable, the names of the unset variables)."""
    env = os.environ if environ is None else environ
    values = {h: env[v] for h, v in names.items() if env.get(v)}
    missing = [v for v in names.values() if not env.get(v)]
    return values, missing
