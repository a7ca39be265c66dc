"""The exception tree of pytest-recfair.

    RecfairError (ValueError)       every error a user can cause and fix
    ├── ConfigError                 bad option, ini key or marker argument
    ├── DataError                   a seed, grid, template or baseline file is malformed
    ├── ProviderError               the recommender could not be reached or answered badly
    └── CassetteError               a cassette is missing, unreadable or lacks an interaction

Messages say what was expected, what was found, and what to do next.
"""

from __future__ import annotations

from pytest_recfair.secrets import scrub


class RecfairError(ValueError):
    """Base of every user-facing error. Its message is scrubbed of secrets (registered API
    keys, auth headers, key query parameters): services quote both in their errors."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(scrub(a) if isinstance(a, str) else a for a in args))


class ConfigError(RecfairError):
    """An option, ini key or marker argument has a bad value."""


class DataError(RecfairError):
    """A data file (seeds, grid, templates, baseline) is malformed."""


class ProviderError(RecfairError):
    """The recommender under test failed in a way retries could not fix."""


class CassetteError(RecfairError):
    """A cassette is unreadable, or replay found no recorded interaction."""
