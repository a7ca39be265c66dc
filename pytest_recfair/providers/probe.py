"""Which prompt cases already have a valid recording, asked before a live run starts.

The plan of a live run counts the prompts it will send. The count comes from the same
lookup replay uses, on a store of its own (a lookup marks a recording as played, so the
run's store must not be the one probed). A recording counts only when it is a 2xx reply:
an error stored by an older version is asked again.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.errors import RecfairError
from pytest_recfair.providers.adapter import CallableProvider
from pytest_recfair.providers.http import HTTPProvider
from pytest_recfair.providers.transport import CassetteTransport, case_extensions
from pytest_recfair.vocab import RecordMode

__all__ = ["is_in_process", "recorded_ids"]


def is_in_process(recommender: Any) -> bool:
    """A Python callable (no HTTP, nothing recorded), not an HTTP provider."""
    return isinstance(recommender, CallableProvider) or not (
        callable(getattr(recommender, "build_request", None))
        and callable(getattr(recommender, "parse_response", None))
    )


def recorded_ids(
    recommender: Any, cases: Sequence[Any], root: Path, mode: RecordMode, test_id: str
) -> set[str]:
    """The ids of ``cases`` whose request has a valid (2xx) recording under ``root``."""
    if is_in_process(recommender):
        return set()
    store = CassetteStore(root, mode, autosave=None)
    if not store.policy.replays:
        return set()
    if isinstance(recommender, HTTPProvider):
        store.add_secrets(recommender.secrets)
    replayer = CassetteTransport(store, test_id=test_id)
    found: set[str] = set()
    for case in cases:
        request = recommender.build_request(case.system, case.prompt)
        request.extensions = {**request.extensions, **case_extensions(case)}
        try:
            response = replayer.replay(request)
        except RecfairError:  # a miss the record mode would not record: not recorded
            continue
        if response is not None and 200 <= response.status_code < 300:
            found.add(case.id)
    return found
