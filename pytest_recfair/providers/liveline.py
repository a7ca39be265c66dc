"""The pytest progress line lives in :mod:`pytest_recfair.providers.progress` (one meter);
this name stays for the plugin's import."""

from __future__ import annotations

from pytest_recfair.providers.progress import LiveLine, clock

__all__ = ["LiveLine", "clock"]
