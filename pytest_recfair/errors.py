"""The errors a user can cause and fix: messages say what was expected, what was found,
and what to do next."""

from __future__ import annotations

from pytest_recfair.secrets import scrub


class RecfairError(ValueError):
    """Its message is scrubbed of secrets: services quote keys in their errors."""

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
