"""Unknown ``recfair_*`` ini keys: a typo in the config must not silently do nothing.

pytest warns about unknown ini keys only under ``--strict-config``; a misspelt
``recfair_max_snrs`` would leave the gate without its limit. The ini file pytest chose
(``config.inipath``) is read again here with the standard parsers, since pytest offers no
public view of the keys it found; ``-o`` overrides are checked too.
"""

from __future__ import annotations

import configparser
import tomllib
from collections.abc import Collection, Iterable
from pathlib import Path

from pytest_recfair.errors import ConfigError

__all__ = ["check_ini_keys", "ini_file_keys"]

PREFIX = "recfair_"


def ini_file_keys(path: Path) -> list[str]:
    """The keys of pytest's section in ``path`` (pytest.ini, tox.ini, setup.cfg or
    pyproject.toml); unreadable or foreign files give none (pytest reports those)."""
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(path.read_text(encoding="utf-8"))
            tool = data.get("tool", {}).get("pytest", {})
            section = tool.get("ini_options", tool)
            return [str(k) for k in section if isinstance(k, str)]
        parser = configparser.RawConfigParser(strict=False)
        parser.read(path, encoding="utf-8")
    except (OSError, ValueError, configparser.Error, tomllib.TOMLDecodeError):
        return []
    for name in ("pytest", "tool:pytest"):
        if parser.has_section(name):
            return list(parser.options(name))
    return []


def check_ini_keys(keys: Iterable[str], known: Collection[str], where: str) -> None:
    """Raise for the first ``recfair_*`` key in ``keys`` that is not in ``known``, naming
    the nearest known key."""
    for key in keys:
        if not key.startswith(PREFIX) or key in known:
            continue
        from rapidfuzz import process  # only for a typo: keeps every run's startup lean
        from rapidfuzz.distance import OSA

        # optimal string alignment: a swapped pair of letters ("snrs") is one edit
        near = process.extractOne(key, sorted(known), scorer=OSA.distance)
        close = near is not None and near[1] <= max(2, len(key) // 4)
        hint = f"did you mean {near[0]!r}?" if close and near else "see docs/configuration.md"
        raise ConfigError(
            f"{where}: unknown ini key {key!r}; {hint} (pytest-recfair reads only the "
            f"recfair_* keys listed in docs/configuration.md)."
        )
