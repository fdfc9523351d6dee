"""The `delta` and `changelog` modes: the files each snapshot of the range added, read snapshot by snapshot.

`delta` reads the new data files of the APPEND snapshots (compactions rewrite rows without changing them);
`changelog` reads the changelog files every snapshot lists in its `changelogManifestList` (compactions included:
the `lookup` and `full-compaction` producers write their changelog there). Neither can answer when a snapshot
of the range expired, when an OVERWRITE replaced rows (its files do not say which rows went) or when buckets
were rescaled inside the range: those raise, naming `diff`, which compares the two ends instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import numpy as np
import pyarrow as pa

from ..errors import PaimonError, SnapshotExpiredError, SnapshotNotFoundError
from ..manifest import ADD, ManifestEntry
from ..snapshot import Snapshot, read_snapshot_file
from .bounds import Bound
from .rows import read_with_kinds

if TYPE_CHECKING:
    from ..table import Table


class ChangeModeError(PaimonError):
    """The asked mode cannot give a correct answer for this range; the message names the mode that can."""


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
        if table.io.exists(path):
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
    vectors = table.core_options.deletion_vectors and not table.is_primary_key
    previous = start.snapshot.index_manifest if start.snapshot is not None else None
    for snap in snaps:
        if vectors and snap.commit_kind != "COMPACT" and snap.index_manifest != previous:
            # An append table's deletes and updates only mark rows in its deletion vectors: no file lists them.
            raise ChangeModeError(
                f"snapshot {snap.id} of {table.identifier}, inside the range {_range_text(start, end)}, changed the "
                f"deletion vectors of an append table: the rows it deleted are in no file, so mode {mode!r} "
                "would miss them")
        previous = snap.index_manifest
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


def range_entries(table: "Table", snaps: list[Snapshot], mode: str) -> list[tuple[Snapshot, list[ManifestEntry]]]:
    """The files each snapshot of the range added (metadata only, read before any row), checked for a change in
    the number of buckets of a partition."""
    buckets: dict[bytes, int] = {}
    out = []
    for snap in snaps:
        listed: str | None
        if mode == "delta":
            if snap.commit_kind != "APPEND":
                continue
            listed = snap.delta_manifest_list
        else:
            listed = snap.changelog_manifest_list
        if not listed:
            continue
        added = []
        for meta in table.manifest_io.read_list(listed):
            for e in table.manifest_io.read_entries(meta.file_name):
                if e.kind != ADD:
                    continue
                seen = buckets.setdefault(e.partition, e.total_buckets)
                if seen != e.total_buckets:
                    raise ChangeModeError(
                        f"the buckets of {table.identifier} were rescaled inside the range (from {seen} to "
                        f"{e.total_buckets} at snapshot {snap.id}), so mode {mode!r} cannot line its rows up; "
                        "use mode='diff', which compares the two ends")
                added.append(e)
        out.append((snap, added))
    return out


def range_batches(table: "Table", planned: list[tuple[Snapshot, list[ManifestEntry]]], names: list[str]
                  ) -> Iterator[tuple[pa.Table, np.ndarray, Snapshot]]:
    """(rows, kinds, snapshot) per file, oldest snapshot first."""
    for snap, entries in planned:
        for e in entries:
            data, kinds = read_with_kinds(table, e.partition, e.bucket, e.file, names)
            yield data, kinds, snap
