"""The `delta` and `changelog` modes: the files each snapshot of the range added, read snapshot by snapshot.

`delta` reads the new data files of the APPEND snapshots (compactions rewrite rows without changing them) and,
on an append table with deletion vectors, the rows each APPEND snapshot newly marked deleted (a DELETE or UPDATE
there rewrites no file: the positions its vectors gained are its deletes, read back from the files they point
into, before the snapshot's new rows); `changelog` reads the changelog files every snapshot lists in its
`changelogManifestList` (compactions included: the `lookup` and `full-compaction` producers write their
changelog there). Neither can answer when a snapshot
of the range expired, when an OVERWRITE replaced rows (its files do not say which rows went) or when buckets
were rescaled inside the range: those raise, naming `diff`, which compares the two ends instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

import numpy as np
import pyarrow as pa

from ..data_file import DELETE
from ..deletion_vectors_index import DeletionVectors
from ..errors import PaimonError, SnapshotExpiredError, SnapshotNotFoundError
from ..manifest import ADD, ManifestEntry
from ..snapshot import Snapshot, read_snapshot_file
from .bounds import Bound
from .rows import batches_with_kinds

if TYPE_CHECKING:
    from ..table import Table


class ChangeModeError(PaimonError):
    """The asked mode cannot give a correct answer for this range; the message names the mode that can."""


@dataclass(frozen=True)
class RangeUnit:
    """One file of one snapshot of the range: its rows as written, or, with `deleted`, only the rows at those
    positions, which the snapshot marked deleted in the file's deletion vector."""

    snapshot: Snapshot
    entry: ManifestEntry
    deleted: np.ndarray | None = None

    def batches(self, table: "Table", names: list[str]) -> Iterator[tuple[pa.Table, np.ndarray]]:
        """The unit's rows (`names` columns) and their row kinds, batch by batch (see `batches_with_kinds`)."""
        e = self.entry
        for data, kinds in batches_with_kinds(table, e.partition, e.bucket, e.file, names, self.deleted):
            yield data, (kinds if self.deleted is None else np.full(data.num_rows, DELETE, dtype=np.int8))


def _range_text(start: Bound, end: Bound) -> str:
    return f"({start.id}, {end.id}]"


def _diff_hint(start: Bound, end: Bound) -> str:
    if start.readable and end.readable:
        return "use mode='diff', which compares the two ends"
    return "and an end of the range is gone too: choose ends that are tags or retained snapshots and use mode='diff'"


def _snapshot(table: "Table", sid: int, mode: str, start: Bound, end: Bound) -> Snapshot:
    try:
        return table.snapshot(sid)
    except SnapshotNotFoundError:
        pass
    if mode == "changelog":
        path = f"{table.path}/changelog/changelog-{sid}"
        if table.io.is_file(path):
            return read_snapshot_file(table.io, path, "changelog")
    raise SnapshotExpiredError(f"snapshot {sid} of {table.identifier}, inside the range {_range_text(start, end)}, "
                               f"expired, so mode {mode!r} cannot read its changes; {_diff_hint(start, end)}")


def check_range(table: "Table", start: Bound, end: Bound, mode: str) -> list[Snapshot]:
    """Every snapshot of the range, checked before any row is read: an answer is complete or refused."""
    if mode == "changelog" and table.core_options.changelog_producer == "none":
        raise ChangeModeError(f"{table.identifier} has changelog-producer 'none': it writes no changelog files, so "
                              "mode 'changelog' has nothing to read; use mode='delta' (rows as written) or "
                              "mode='diff' (the two ends compared)")
    snaps = [_snapshot(table, sid, mode, start, end) for sid in range(start.id + 1, end.id + 1)]
    if table.has_append_vectors and start.id > 0 and start.snapshot is None and snaps \
            and snaps[0].commit_kind != "COMPACT" and snaps[0].index_manifest:
        raise SnapshotExpiredError(
            f"{start.given}: snapshot {start.id} of {table.identifier} expired and no tag holds it, so the rows "
            f"snapshot {snaps[0].id} marked deleted in the deletion vectors of this append table cannot be told "
            "apart from those deleted before; start the range at a tag or a retained snapshot")
    for snap in snaps:
        if snap.commit_kind == "OVERWRITE":
            raise ChangeModeError(
                f"snapshot {snap.id} of {table.identifier}, inside the range {_range_text(start, end)}, is an "
                f"OVERWRITE: it replaced rows without recording which, so mode {mode!r} would miss them; "
                f"{_diff_hint(start, end)}")
        if mode == "changelog" and table.core_options.changelog_producer == "input" \
                and snap.commit_kind == "APPEND" and not snap.changelog_manifest_list:
            raise ChangeModeError(
                f"snapshot {snap.id} of {table.identifier} (an APPEND commit on a table with changelog-producer "
                "'input') lists no changelog: its writer did not produce one, so mode 'changelog' would miss its "
                "rows; use mode='delta' or mode='diff'")
    return snaps


def _vector_deletes(table: "Table", before: str | None, snap: Snapshot) -> list[RangeUnit]:
    """The rows `snap` marked deleted: per data file, the positions its vector gained since `before` (the index
    manifest of the snapshot just before it), in the order of the file entries."""
    old, new = DeletionVectors(table, before), DeletionVectors.of(table, snap)
    empty = np.empty(0, dtype=np.int64)
    changed = {key for key, e in new.entries.items()
               if [x.file_name for x in new.entries_of(*key)] != [x.file_name for x in old.entries_of(*key)]}
    out = []
    for e in table.file_entries(snap):
        if (e.partition, e.bucket) not in changed:
            continue
        gained = new.bucket(e.partition, e.bucket).get(e.file.file_name)
        if gained is None:
            continue
        gained = np.setdiff1d(gained, old.bucket(e.partition, e.bucket).get(e.file.file_name, empty))
        if len(gained):
            out.append(RangeUnit(snap, e, gained.astype(np.int64)))
    return out


def range_units(table: "Table", start: Bound, snaps: list[Snapshot], mode: str) -> list[RangeUnit]:
    """What each snapshot of the range added (metadata only, read before any row: for an append table's vector
    deletes, the vectors too), in the feed's order, checked for a change in the number of buckets of a
    partition."""
    buckets: dict[bytes, int] = {}
    out: list[RangeUnit] = []
    vectors = mode == "delta" and table.has_append_vectors
    previous = start.snapshot.index_manifest if start.snapshot is not None else None
    for snap in snaps:
        if vectors and snap.commit_kind == "APPEND" and snap.index_manifest != previous:
            out.extend(_vector_deletes(table, previous, snap))
        previous = snap.index_manifest
        listed: str | None
        if mode == "delta":
            if snap.commit_kind != "APPEND":
                continue
            listed = snap.delta_manifest_list
        else:
            listed = snap.changelog_manifest_list
        if not listed:
            continue
        for meta in table.manifest_io.read_list(listed):
            for e in table.manifest_io.read_entries(meta.file_name):
                if e.kind != ADD:
                    continue
                if not e.file.file_name.endswith(".parquet"):
                    # Paimon writes each file in the format its name ends with (changelog-file.format may differ
                    # from file.format); only Parquet is read here, and every file is checked before any row
                    raise ChangeModeError(
                        f"snapshot {snap.id} of {table.identifier} lists {e.file.file_name}, written in the "
                        f"{e.file.file_name.rsplit('.', 1)[-1]!r} format, and only Parquet files are read here, so "
                        f"mode {mode!r} cannot read its changes; use mode='diff' between two ends whose data files "
                        "are Parquet" + (", or mode='delta'" if mode == "changelog" else ""))
                seen = buckets.setdefault(e.partition, e.total_buckets)
                if seen != e.total_buckets:
                    raise ChangeModeError(
                        f"the buckets of {table.identifier} were rescaled inside the range (from {seen} to "
                        f"{e.total_buckets} at snapshot {snap.id}), so mode {mode!r} cannot line its rows up; "
                        "use mode='diff', which compares the two ends")
                out.append(RangeUnit(snap, e))
    return out


def range_batches(table: "Table", units: list[RangeUnit], names: list[str]
                  ) -> Iterator[tuple[pa.Table, np.ndarray, Snapshot]]:
    """(rows, kinds, snapshot) per batch of each unit, oldest snapshot first."""
    for unit in units:
        for data, kinds in unit.batches(table, names):
            yield data, kinds, unit.snapshot
