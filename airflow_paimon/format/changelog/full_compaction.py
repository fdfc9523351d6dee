"""Changelog written by compaction: `full-compaction` (the previous top level against the merged result) and
`lookup` (level-0 rows a compaction merges), and when `full-compaction.delta-commits` makes a full compaction due.

Full compaction follows Paimon's `FullChangelogMergeFunctionWrapper`: a key whose only version is at the top level
did not change and gets nothing; otherwise the top-level value is the before and the merge result the after.
A lookup compaction follows `LookupChangelogMergeFunctionWrapper`: only keys with level-0 rows change, the newest
value above level 0 is the before. Rows a lookup write already described were moved above level 0 by its COMPACT
snapshot, so they are never described twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..kernels import last_of_each_key, semi_join
from ..manifest import FILE_SOURCE_COMPACT, DataFileMeta
from ..schema import SEQUENCE_NUMBER
from ..versions import version_sort_indices
from .rows import changes, newest, values_only, write_changelog

if TYPE_CHECKING:
    from ..snapshot import Snapshot
    from ..table import Table

LEVEL = "__level"


def _per_key(table: "Table", rows: pa.Table) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """`rows` sorted by key then version, with masks of each key's first and last row."""
    keys = table.schema().trimmed_primary_keys
    options = table.core_options
    order = version_sort_indices(rows, keys, options.sequence_fields, options.sequence_descending,
                                 [SEQUENCE_NUMBER])
    rows = rows.take(pa.array(order))
    last = last_of_each_key([rows.column(k) for k in keys], rows.num_rows)
    first = np.ones(rows.num_rows, dtype=bool)
    first[1:] = last[:-1]
    return rows, first, last


def compaction_changelog(table: "Table", rows: pa.Table, top: int) -> pa.Table:
    """The changelog rows of compacting `rows` (every version in the compacted files, with their level in
    `__level`) under the table's producer; empty for producers whose compactions write none."""
    producer = table.core_options.changelog_producer
    if producer not in ("full-compaction", "lookup") or rows.num_rows == 0:
        return rows.slice(0, 0).drop_columns([LEVEL])
    if table.core_options.ignore_delete:
        rows = values_only(rows)
    rows, first, last = _per_key(table, rows)
    levels = rows.column(LEVEL).to_numpy()
    # One flag per key (in key order, as `newest` returns keys): does the key change in this compaction?
    key_id = np.cumsum(first) - 1
    if producer == "full-compaction":
        only_top = (first & last & (levels == top))[last]
        changed = ~only_top
        before_rows = rows.filter(pa.array(levels == top))
    else:
        changed = np.zeros(int(last.sum()), dtype=bool)
        np.logical_or.at(changed, key_id, levels == 0)
        before_rows = rows.filter(pa.array(levels > 0))
    after = rows.filter(pa.array(last)).filter(pa.array(changed)).drop_columns([LEVEL])
    before = newest(table, before_rows.drop_columns([LEVEL]))
    if before.num_rows:
        keys = table.schema().trimmed_primary_keys
        before = semi_join(before, after, keys)
    return changes(table, before, after)


def write_compaction_changelog(table: "Table", partition: tuple, bucket: int, rows: pa.Table,
                               top: int) -> list[DataFileMeta]:
    return write_changelog(table, partition, bucket, compaction_changelog(table, rows, top), FILE_SOURCE_COMPACT)


def full_compaction_due(table: "Table") -> bool:
    """Whether `full-compaction.delta-commits` delta (APPEND) commits have landed since the last COMPACT
    snapshot: the library's equivalent of Paimon's writer-side trigger for streaming writes. Asked after every
    write, so the latest snapshot is looked up only on a table that sets the option (on an object store, four
    requests)."""
    every = table.core_options.full_compaction_delta_commits
    if every is None or table.core_options.changelog_producer != "full-compaction":
        return False
    count = 0
    snap: Snapshot | None = table.latest_snapshot()
    while snap is not None and snap.commit_kind != "COMPACT":
        if snap.commit_kind == "APPEND":
            count += 1
            if count >= every:
                return True
        earlier = snap.id - 1
        earliest = table.snapshot_manager.earliest_id()
        snap = table.snapshot(earlier) if earliest is not None and earlier >= earliest else None
    return False
