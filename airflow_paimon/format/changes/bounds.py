"""The two ends of a change range, as Paimon bounds it: start exclusive, end inclusive.

An end is a snapshot id, a tag name or a point in time. A string names a tag when such a tag exists (Paimon
looks tags up first), else a snapshot id when it is all digits, else a time. A time stands for the latest
snapshot committed at or before it (Paimon's `earlierOrEqualTimeMills`); a start before the first commit of a
table whose first snapshot is still there is snapshot 0, the empty table.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InvalidOptionError, SnapshotExpiredError, SnapshotNotFoundError
from ..snapshot import Snapshot
from ..time_travel import latest_snapshot_at_or_before, utc_text
from ..values import epoch_millis

if TYPE_CHECKING:
    from ..table import Table


@dataclass(frozen=True)
class Bound:
    """One end: the snapshot id it stands for and, when the state there can still be read, that snapshot (a
    snapshot file or a tag's copy of it). Id 0 is the empty table before the first commit."""

    id: int
    snapshot: Snapshot | None
    tag: str | None
    given: str

    @property
    def readable(self) -> bool:
        return self.id == 0 or self.snapshot is not None


def _by_id(table: "Table", sid: int, given: str) -> Bound:
    if sid < 0:
        raise InvalidOptionError(f"{given}: snapshot ids start at 1 (0 is the empty table), got {sid}")
    if sid == 0:
        return Bound(0, None, None, given)
    latest = table.snapshot_manager.latest_id()
    if latest is None or sid > latest:
        raise SnapshotNotFoundError(f"{given}: snapshot {sid} does not exist on {table.identifier} (latest: "
                                    f"{latest if latest is not None else 'none'})")
    try:
        return Bound(sid, table.snapshot(sid), None, given)
    except SnapshotNotFoundError:
        for tag in table.tags.list():
            if tag.snapshot.id == sid:
                return Bound(sid, tag.snapshot, tag.name, given)
        return Bound(sid, None, None, given)


def _by_time(table: "Table", millis: int, given: str) -> Bound:
    sm = table.snapshot_manager
    earliest = sm.earliest_id()
    if earliest is None:
        return Bound(0, None, None, given)
    snap = latest_snapshot_at_or_before(sm, millis)
    if snap is not None:
        return Bound(snap.id, snap, None, given)
    if earliest == 1:
        return Bound(0, None, None, given)
    raise SnapshotExpiredError(
        f"{given}: {utc_text(millis)} is before the earliest retained snapshot {earliest} of {table.identifier} "
        f"(committed {utc_text(sm.snapshot(earliest).time_millis)}); the snapshots of that time expired: start "
        "from a tag or a later time")


def resolve_bound(table: "Table", value: Any, what: str) -> Bound:
    given = f"{what} {value!r}"
    if isinstance(value, bool) or value is None:
        raise InvalidOptionError(f"{given}: give a snapshot id, a tag name or a point in time")
    if isinstance(value, int):
        return _by_id(table, value, given)
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise InvalidOptionError(f"{what}: a blank bound; give a snapshot id, a tag name or a point in time")
        if "/" not in text and "\\" not in text and ".." not in text and table.tags.exists(text):
            tag = table.tags.get(text)
            return Bound(tag.snapshot.id, tag.snapshot, tag.name, given)
        if text.isdigit():
            return _by_id(table, int(text), given)
        try:
            millis = epoch_millis(text)
        except InvalidOptionError:
            raise InvalidOptionError(f"{given} is neither a tag of {table.identifier}, nor a snapshot id, nor a "
                                     "point in time (ISO 8601)") from None
        return _by_time(table, millis, given)
    if isinstance(value, (dt.datetime, dt.date, float)):
        return _by_time(table, epoch_millis(value), given)
    raise InvalidOptionError(f"{given}: give a snapshot id, a tag name or a point in time, "
                             f"not {type(value).__name__}")


def latest_bound(table: "Table") -> Bound:
    snap = table.latest_snapshot()
    return Bound(snap.id if snap else 0, snap, None, "the latest snapshot")
