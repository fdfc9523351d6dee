"""Which snapshot was current at a point in time, answered exactly or refused.

Among retained snapshots the answer is exact: snapshot times increase with their ids and expiry only removes the
oldest. Before the earliest retained snapshot, only tags (and Paimon's long-lived changelog files) still say what
was committed, and they are samples: a tag on snapshot k committed at or before the time is the answer only if
snapshot k + 1 is known too (retained, tagged or in a changelog file) and was committed after the time. Otherwise
some snapshot between them may have been current then, so the closest tag is an older state than the one asked
for: it is returned only when the caller asks for it, and the result says so.

Paimon itself refuses a time older than its earliest snapshot (`StaticFromTimestampStartingScanner`) and has no
tag fallback; the exact tag case and the explicit closest-tag choice go beyond it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import SnapshotExpiredError, SnapshotNotFoundError
from .snapshot import Snapshot, SnapshotManager, read_snapshot_file

if TYPE_CHECKING:
    from .table import Table

EXACT = "exact"
CLOSEST_TAG = "closest-tag"


def utc_text(millis: int) -> str:
    """Epoch milliseconds as a readable UTC time for messages."""
    text = dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    return text[:-3] + "Z"


@dataclass(frozen=True)
class TimeTravel:
    """The snapshot a read or rollback at `millis` uses, and how it was found.

    `how` is "exact" (the snapshot current at that time) or "closest-tag" (asked for explicitly: the newest tag
    committed at or before the time, which may be older than the state current then). `tag` names the tag the
    snapshot was read from when it is no longer retained.
    """

    millis: int
    snapshot: Snapshot
    how: str
    tag: str | None = None

    @property
    def exact(self) -> bool:
        return self.how == EXACT

    def describe(self) -> str:
        source = f"tag {self.tag!r} (snapshot {self.snapshot.id})" if self.tag else f"snapshot {self.snapshot.id}"
        committed = utc_text(self.snapshot.time_millis)
        if self.exact:
            return f"{source}, committed {committed}, was current at {utc_text(self.millis)}"
        return (f"{source}, committed {committed}, is the closest tag at or before {utc_text(self.millis)}; the "
                "snapshot current then has expired and may be newer")


def _changelog_snapshots(table: Table) -> list[Snapshot]:
    out = []
    for info in table.io.list_dir(f"{table.path}/changelog"):
        name = info.path.rsplit("/", 1)[-1]
        if not (name.startswith("changelog-") and name[10:].isdigit()):
            continue
        try:
            out.append(read_snapshot_file(table.io, info.path, "changelog"))
        except FileNotFoundError:
            continue
    return out


def latest_snapshot_at_or_before(sm: SnapshotManager, millis: int) -> Snapshot | None:
    """The snapshot manager's binary search over the hinted id range; if that range has a hole (left by a crash
    in the middle of a rollback), the same search over the listed ids."""
    try:
        return sm.latest_at_or_before(millis)
    except SnapshotNotFoundError:
        pass
    ids = sm.ids()
    lo, hi = 0, len(ids) - 1
    found: Snapshot | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        snap = sm.snapshot(ids[mid])
        if snap.time_millis <= millis:
            found, lo = snap, mid + 1
        else:
            hi = mid - 1
    return found


def _quoted(names: list[str]) -> str:
    return ", ".join(repr(n) for n in sorted(names))


def snapshot_at(table: Table, millis: int, closest_tag: bool = False, alternative: str = "") -> TimeTravel:
    """The snapshot current at `millis` (epoch ms), exactly; or, with `closest_tag`, the newest tag at or before
    it when the exact answer is no longer known. SnapshotExpiredError / SnapshotNotFoundError otherwise, naming
    the retained range and the closest tag; `alternative` ends that message with what the caller can do."""
    sm = table.snapshot_manager
    earliest_id, latest_id = sm.earliest_id(), sm.latest_id()
    earliest = sm.snapshot(earliest_id) if earliest_id is not None else None
    if earliest is not None and earliest.time_millis <= millis:
        found = latest_snapshot_at_or_before(sm, millis)
        if found is not None:
            return TimeTravel(millis, found, EXACT)
    when = utc_text(millis)
    tags = table.tags.list()
    tag_names: dict[int, list[str]] = {}
    known: dict[int, Snapshot] = {}
    for t in tags:
        tag_names.setdefault(t.snapshot.id, []).append(t.name)
        known[t.snapshot.id] = t.snapshot
    timing = dict(known)
    for s in _changelog_snapshots(table):
        timing.setdefault(s.id, s)
    if earliest is not None:
        timing[earliest.id] = earliest
    before = [sid for sid, s in known.items() if s.time_millis <= millis]
    if before:
        best = known[max(before)]
        name = min(tag_names[best.id])
        after = timing.get(best.id + 1)
        if after is not None and after.time_millis > millis:
            return TimeTravel(millis, best, EXACT, name)
        if closest_tag:
            return TimeTravel(millis, best, CLOSEST_TAG, name)
        retained = (f"retained snapshots {earliest_id}..{latest_id} start at {utc_text(earliest.time_millis)}"
                    if earliest is not None else "no snapshot is retained")
        raise SnapshotExpiredError(
            f"the snapshot of {table.identifier} current at {when} has expired ({retained}); the closest tag is "
            f"{_quoted(tag_names[best.id])} on snapshot {best.id}, committed {utc_text(best.time_millis)}, but "
            f"whether a later snapshot was committed before {when} is no longer known"
            + (f": {alternative}" if alternative else ""))
    first = min(timing.values(), key=lambda s: s.id) if timing else None
    if first is None:
        raise SnapshotNotFoundError(f"{table.identifier} has no snapshot yet: nothing was committed")
    if first.id == 1:
        raise SnapshotNotFoundError(
            f"{table.identifier} has no snapshot committed at or before {when}: its first commit (snapshot 1) was "
            f"at {utc_text(first.time_millis)}; give a time at or after it")
    raise SnapshotExpiredError(
        f"the snapshots of {table.identifier} from {when} have expired: the oldest known is snapshot {first.id}, "
        f"committed {utc_text(first.time_millis)}, and no tag is older")
