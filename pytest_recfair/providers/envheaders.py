"""Extra request headers whose values come from named environment variables.

A team's gateway often wants a header or two (an organisation id, a routing tag, a
second token). The configuration names the header and the environment variable that
holds its value (``X-Org: ORG_ID_ENV``), never the value itself, so no config file,
cassette, report or log line holds it; the values are scrubbed like API keys.

Pure: stdlib only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Final

from pytest_recfair.errors import ConfigError

__all__ = ["HeaderEnvs", "parse_header_envs", "read_header_envs"]

#: (header, environment variable name) pairs, in the order given: how the settings
#: hold ``recfair_extra_headers`` (a tuple, so the frozen settings stay hashable).
HeaderEnvs = tuple[tuple[str, str], ...]

_HEADER: Final = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
_ENV: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EXPECTED: Final = (
    "'Header-Name: ENV_VAR_NAME' pairs separated by commas or new lines, the value being "
    "the NAME of an environment variable that holds the header's value"
)


def parse_header_envs(value: object) -> dict[str, str]:
    """``"X-Org: ORG_ENV, X-Tag: TAG_ENV"`` or ``{"X-Org": "ORG_ENV"}`` -> header -> env name."""
    if isinstance(value, Mapping):
        pairs = [(str(k), str(v)) for k, v in value.items()]
    elif isinstance(value, str):
        pairs = []
        for part in re.split(r"[,\n]", value):
            if not part.strip():
                continue
            name, sep, env = part.partition(":")
            if not sep:
                name, sep, env = part.partition("=")
            if not sep:
                raise ConfigError(f"expected {_EXPECTED}; {part.strip()!r} has no ':'")
            pairs.append((name.strip(), env.strip()))
    else:
        raise ConfigError(f"expected {_EXPECTED}")
    out: dict[str, str] = {}
    for name, env in pairs:
        if not _HEADER.match(name) or not _ENV.match(env):
            raise ConfigError(f"expected {_EXPECTED}; got {name!r}: {env!r}")
        out[name] = env
    return out


def read_header_envs(
    names: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """(header -> value of each set variable, the names of the unset variables)."""
    env = os.environ if environ is None else environ
    values = {h: env[v] for h, v in names.items() if env.get(v)}
    missing = [v for v in names.values() if not env.get(v)]
    return values, missing
