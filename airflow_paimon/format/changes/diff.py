"""The `diff` mode: the two ends of the range compared key by key, one (partition, bucket) at a time.

Only groups whose files differ between the ends are read (a file both ends list holds the same rows at both).
Inside such a group only the keys of the files one end lists alone can have changed; a shared file is read only
when its key range may hold one of them, and only those keys are compared. So the cost follows what changed, not
the table; snapshots between the ends are never read, so a diff still answers after all of them expired.
Where the number of buckets of a partition differs between the ends
(a rescale), that partition is compared as a whole. A key only at the start is a `delete`, only at the end an
`insert`, at both with other values an `update_preimage` (the start's row) followed by its `update_postimage`.
Paimon's own diff gives the new rows only; the pre-images and deletes are this library's extension.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..binary_row import deserialize_row
from ..data_file import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE
from ..kernels import null_safe_equal, semi_join
from ..manifest import DataFileMeta, ManifestEntry
from ..read import read_split
from ..scan import Split
from .bounds import Bound
from .rows import read_with_kinds

if TYPE_CHECKING:
    from ..table import Table

_LEFT, _RIGHT = "__start_row", "__end_row"


def _groups(entries: list[ManifestEntry], whole: set[bytes]) -> dict[tuple[bytes, int], list[ManifestEntry]]:
    out: dict[tuple[bytes, int], list[ManifestEntry]] = {}
    for e in entries:
        out.setdefault((e.partition, -1 if e.partition in whole else e.bucket), []).append(e)
    return out


def _bucket_counts(entries: list[ManifestEntry]) -> dict[bytes, set[int]]:
    out: dict[bytes, set[int]] = {}
    for e in entries:
        out.setdefault(e.partition, set()).add(e.total_buckets)
    return out


def _state(table: "Table", partition: bytes, entries: list[ManifestEntry], names: list[str]) -> pa.Table:
    """The merged rows of these entries (one bucket, or every bucket of a rescaled partition)."""
    by_bucket: dict[int, list[DataFileMeta]] = {}
    for e in entries:
        by_bucket.setdefault(e.bucket, []).append(e.file)
    values = table.partition_codec.from_bytes(partition)
    parts = []
    for bucket in sorted(by_bucket):
        files = sorted(by_bucket[bucket], key=lambda f: (-f.level, f.max_sequence_number, f.min_sequence_number))
        parts.append(read_split(table, Split(values, partition, bucket, files), names))
    if not parts:
        logical = table.arrow_schema()
        return pa.schema([logical.field(n) for n in names]).empty_table()
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _same(a: pa.ChunkedArray, b: pa.ChunkedArray) -> np.ndarray:
    """Row-wise equality where two NULLs are equal."""
    return null_safe_equal(a, b)


def compare(start: pa.Table, end: pa.Table, keys: list[str]) -> tuple[pa.Table, np.ndarray]:
    """The change rows turning `start` into `end` (both one row per key) and their kinds."""
    left = start.select(keys).append_column(_LEFT, pa.array(np.arange(start.num_rows, dtype=np.int64)))
    right = end.select(keys).append_column(_RIGHT, pa.array(np.arange(end.num_rows, dtype=np.int64)))
    pairs = left.join(right, keys, join_type="full outer")
    li = pairs.column(_LEFT).to_numpy(zero_copy_only=False)
    ri = pairs.column(_RIGHT).to_numpy(zero_copy_only=False)
    li_ok, ri_ok = ~np.isnan(li), ~np.isnan(ri)
    both = li_ok & ri_ok
    bl, br = li[both].astype(np.int64), ri[both].astype(np.int64)
    changed = np.zeros(len(bl), dtype=bool)
    for name in start.column_names:
        if name in keys:
            continue
        changed |= ~_same(start.column(name).take(pa.array(bl)), end.column(name).take(pa.array(br)))
    gone = np.sort(li[li_ok & ~ri_ok].astype(np.int64))
    new = np.sort(ri[ri_ok & ~li_ok].astype(np.int64))
    bl, br = bl[changed], br[changed]
    order = np.argsort(bl, kind="stable")
    bl, br = bl[order], br[order]
    # rows: deletes, then pre/post pairs interleaved, then inserts; taken from [start; end]
    offset = start.num_rows
    pre_post = np.empty(2 * len(bl), dtype=np.int64)
    pre_post[0::2], pre_post[1::2] = bl, br + offset
    take = np.concatenate([gone, pre_post, new + offset])
    kinds = np.concatenate([np.full(len(gone), DELETE), np.tile([UPDATE_BEFORE, UPDATE_AFTER], len(bl)),
                            np.full(len(new), INSERT)]).astype(np.int8)
    both_tables = pa.concat_tables([start, end.select(start.column_names).cast(start.schema)])
    return both_tables.take(pa.array(take)), kinds


def end_entries(table: "Table", start: Bound, end: Bound) -> tuple[list[ManifestEntry], list[ManifestEntry]]:
    """The live files at both ends (metadata only)."""
    return (table.file_entries(start.snapshot) if start.id else []), table.file_entries(end.snapshot)


def diff_batches(table: "Table", before: list[ManifestEntry], after: list[ManifestEntry], names: list[str]
                 ) -> Iterator[tuple[pa.Table, np.ndarray]]:
    counts_before, counts_after = _bucket_counts(before), _bucket_counts(after)
    whole = {p for p in set(counts_before) | set(counts_after)
             if len(counts_before.get(p, set()) | counts_after.get(p, set())) > 1}
    g_before, g_after = _groups(before, whole), _groups(after, whole)
    keys = table.schema().trimmed_primary_keys + [k for k in table.partition_keys
                                                  if k not in table.schema().trimmed_primary_keys]
    trimmed = table.schema().trimmed_primary_keys
    for group in sorted(set(g_before) | set(g_after)):
        files_before, files_after = g_before.get(group, []), g_after.get(group, [])
        names_before = {e.file.file_name for e in files_before}
        names_after = {e.file.file_name for e in files_after}
        if names_before == names_after:
            continue
        partition = group[0]
        only = [e for e in files_before if e.file.file_name not in names_after] + \
            [e for e in files_after if e.file.file_name not in names_before]
        changed = _changed_keys(table, only, trimmed)
        if changed.num_rows == 0:
            continue
        shared = [e for e in files_before if e.file.file_name in names_after
                  and _may_hold(table, e.file, trimmed, changed)]
        start_files = shared + [e for e in files_before if e.file.file_name not in names_after]
        end_files = shared + [e for e in files_after if e.file.file_name not in names_before]
        old = _only(_state(table, partition, start_files, names), changed, trimmed)
        new = _only(_state(table, partition, end_files, names), changed, trimmed)
        rows, kinds = compare(old, new, keys)
        if rows.num_rows:
            yield rows, kinds


def _changed_keys(table: "Table", entries: list[ManifestEntry], keys: list[str]) -> pa.Table:
    """The distinct keys of the files only one end lists: only they can have changed."""
    parts = [read_with_kinds(table, e.partition, e.bucket, e.file, keys)[0].select(keys) for e in entries]
    if not parts:
        return pa.schema([table.arrow_schema().field(k) for k in keys]).empty_table()
    return pa.concat_tables(parts).group_by(keys).aggregate([])


def _may_hold(table: "Table", meta: DataFileMeta, keys: list[str], changed: pa.Table) -> bool:
    """Whether a file both ends share may hold one of the changed keys, by its first key column's range."""
    written = table.schema_by_id(meta.schema_id)
    try:
        types = [written.arrow_type(k) for k in written.trimmed_primary_keys]
        lo = deserialize_row(meta.key_stats.min_values, types)[0]
        hi = deserialize_row(meta.key_stats.max_values, types)[0]
        bounds: Any = pc.min_max(changed.column(keys[0]))
        first, last = bounds["min"].as_py(), bounds["max"].as_py()
        if lo is None or hi is None or first is None or last is None:
            return True
        return bool(lo <= last and first <= hi)
    except Exception:  # statistics of an unexpected shape: read the file
        return True


def _only(state: pa.Table, changed: pa.Table, keys: list[str]) -> pa.Table:
    """The rows of `state` whose key changed (the state was read from part of the shared files only)."""
    if state.num_rows == 0:
        return state
    return semi_join(state, changed, keys)
