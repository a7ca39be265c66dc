"""Record modes as data: what each mode does, one row per mode (names as in vcrpy /
pytest-recording). The store and the runner ask the policy, never the mode's name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from pytest_recfair.vocab import RECORD_MODES, RECORD_OPTION, RecordMode

__all__ = ["MODE_POLICIES", "RECORD_MODES", "RERECORD_HINT", "ModePolicy", "RecordMode"]

#: How to record what a replay-only run missed (said by every miss).
RERECORD_HINT: Final = (
    f"record the missing replies with {RECORD_OPTION}=new_episodes (or once: both keep "
    "the recorded replies and ask only what is missing)"
)


@dataclass(frozen=True, slots=True)
class ModePolicy:
    """What one record mode does; the store and the runner ask this, never the name."""

    #: Recorded replies are served (False: every request is recorded afresh).
    replays: bool
    #: A request without a recorded reply may go to the network (and be recorded).
    records: bool
    #: The old file is read (False: it is replaced unread).
    reads_old: bool
    #: Old interactions kept on save: all of them, those not re-recorded, or none.
    keeps: Literal["all", "not_rerecorded", "none"]


#: One row per mode (names as in vcrpy / pytest-recording); a new mode is one row. With a
#: store keyed by what was asked and shared by every test, "once" (record a file that does
#: not exist yet) and "new_episodes" coincide: each asks exactly the requests without a
#: valid recording, so an interrupted or partial recording is simply resumed.
MODE_POLICIES: Final[Mapping[RecordMode, ModePolicy]] = {
    "none": ModePolicy(replays=True, records=False, reads_old=True, keeps="all"),
    "once": ModePolicy(replays=True, records=True, reads_old=True, keeps="all"),
    "new_episodes": ModePolicy(replays=True, records=True, reads_old=True, keeps="all"),
    "all": ModePolicy(replays=False, records=True, reads_old=True, keeps="not_rerecorded"),
    "rewrite": ModePolicy(replays=False, records=True, reads_old=False, keeps="none"),
}
