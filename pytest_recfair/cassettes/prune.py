"""--fairness-prune: the cassette interactions and baselines no test of the run used.

A run records what it used (the store's ``usage``: file name and stored key of every
interaction replayed or recorded; the baseline files the tests looked up). Anything else
in the cassette and baseline folders is listed, and deleted only when the run covered
every test (the plugin decides that: nothing deselected, no failures, no shard ...);
after a partial run an unused entry may belong to a test that did not run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_recfair.cassettes import compact
from pytest_recfair.cassettes.store import (
    CassetteStore,
    Key,
    read_interactions,
    serialize,
    stored_key,
)

__all__ = ["PrunePlan", "apply", "plan"]


@dataclass
class PrunePlan:
    """What no test used: per cassette file the unused interactions, whole baselines."""

    cassettes: dict[Path, tuple[int, int]] = field(default_factory=dict)  # unused, total
    baselines: list[Path] = field(default_factory=list)
    used: set[tuple[str, Key]] = field(default_factory=set)

    @property
    def empty(self) -> bool:
        return not self.cassettes and not self.baselines

    def lines(self, root: Path) -> list[str]:
        out = []
        for path, (unused, total) in sorted(self.cassettes.items()):
            what = "whole file" if unused == total else f"{unused} of {total} interactions"
            out.append(f"  cassette {_rel(path, root)}: {what} unused")
        out.extend(f"  baseline {_rel(path, root)}: unused" for path in self.baselines)
        return out


def plan(
    cassette_root: Path,
    used: set[tuple[str, Key]],
    baseline_root: Path,
    used_baselines: Iterable[Path],
    *,
    migrate: bool = False,
) -> PrunePlan:
    """The unused entries; with ``migrate``, cassettes of the old per-test layout are moved
    into the shared files first (otherwise they are not looked at)."""
    if migrate and cassette_root.is_dir():
        CassetteStore(cassette_root).migrate_legacy()
    found = PrunePlan(used=used)
    for path in compact.cassette_files(cassette_root):
        items = read_interactions(path)
        unused = sum((path.name, stored_key(item)) not in used for item in items)
        if unused:
            found.cassettes[path] = (unused, len(items))
    keep = {p.resolve() for p in used_baselines}
    if baseline_root.is_dir():
        found.baselines = [
            p for p in sorted(baseline_root.glob("*.json")) if p.resolve() not in keep
        ]
    return found


def apply(found: PrunePlan) -> None:
    """Delete what ``found`` lists (files rewritten atomically, emptied ones removed)."""
    for path, (unused, total) in found.cassettes.items():
        if unused == total:
            path.unlink(missing_ok=True)
            continue
        items = read_interactions(path)
        kept = [item for item in items if (path.name, stored_key(item)) in found.used]
        compact.write(path, serialize(kept))  # in the file's own format
    for path in found.baselines:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
