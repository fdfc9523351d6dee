"""The `diff` mode: the two ends of the range compared key by key, one (partition, bucket) at a time.

Only groups whose files differ between the ends are read (a file both ends list holds the same rows at both).
Inside such a group only the keys of the files one end lists alone can have changed; a shared file is opened only
when its key range may hold one of them, then only its key columns are read, and its other columns only when it
holds a changed key, keeping only those keys' rows (key_reads.py); it is read once for both ends. So the cost
follows what changed and the files that may hold it, not the whole table; snapshots between the ends are never
read, so a diff still answers after all of them expired. Where the number of buckets of a partition differs
between the ends (a rescale), that partition is compared as a whole. A bucket whose changed files hold many rows
(a compaction between the ends rewrote them all) is compared one key range at a time (slices.py). A key only at
the start is a `delete`, only at the end an `insert`, at both with other values an `update_preimage` (the start's
row) followed by its `update_postimage`. Paimon's own diff gives the new rows only; the pre-images and deletes are
this library's extension.
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, TypeVar

import numpy as np
import pyarrow as pa

from ..arrow_tables import conformed
from ..data_file import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE
from ..deletion_vectors import read_deletion_files
from ..kernels import ascending_integers, null_safe_equal
from ..key_reads import read_rows_of_keys
from ..manifest import DataFileMeta, ManifestEntry
from ..read import (
    FilesReader,
    deletion_vector_split,
    fill_partition,
    merge_columns,
    merge_versions,
    read_files,
    read_split,
    version_schema,
)
from ..scan import ScanPlanner, Split
from ..snapshot import Snapshot
from . import slices
from .bounds import Bound
from .slices import KeySlice, key_slices, read_slice

if TYPE_CHECKING:
    from ..table import Table

_LEFT, _RIGHT = "__start_row", "__end_row"
# a group's files only the start lists and those only the end lists; a unit of work: a group, those, a slice
_OwnFiles = tuple[list[ManifestEntry], list[ManifestEntry]]
_Unit = tuple[tuple[bytes, int], _OwnFiles, "KeySlice | None"]
T = TypeVar("T")
R = TypeVar("R")


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


def _own_rows(table: "Table", partition: bytes, entries: list[ManifestEntry], names: list[str],
              key_slice: KeySlice | None) -> dict[int, list[tuple[DataFileMeta, pa.Table]]]:
    """Per bucket, every row (of the slice, when given) of the files only one end lists: every key in them is a
    changed key. A file holding no row of the slice is left out."""
    by_bucket: dict[int, list[DataFileMeta]] = {}
    for e in entries:
        by_bucket.setdefault(e.bucket, []).append(e.file)
    values = table.partition_codec.from_bytes(partition)
    columns, schema = merge_columns(table, names), version_schema(table)
    out: dict[int, list[tuple[DataFileMeta, pa.Table]]] = {}
    for bucket, files in by_bucket.items():
        split = Split(values, partition, bucket, files)
        if key_slice is None:
            out[bucket] = list(zip(files, read_files(table, split, columns, schema)))
        else:
            parts = [(f, rows) for f in files if (rows := key_slice.of(bucket, f)) is not None]
            if parts:
                out[bucket] = parts
    return out


def _state(table: "Table", partition: bytes, own: dict[int, list[tuple[DataFileMeta, pa.Table]]],
           names: list[str], shared: dict[int, list[tuple[DataFileMeta, pa.Table]]]) -> pa.Table:
    """The merged rows of the changed keys at one end (one bucket, or every bucket of a rescaled partition):
    `own` holds the rows of the files only this end lists, `shared` the changed keys' rows of the files both
    ends list (per bucket, read once for both ends)."""
    values = table.partition_codec.from_bytes(partition)
    out = []
    for bucket in sorted(set(own) | set(shared)):
        parts = own.get(bucket, []) + shared.get(bucket, [])
        if not parts:
            continue
        parts.sort(key=lambda p: (-p[0].level, p[0].max_sequence_number, p[0].min_sequence_number))
        files = [f for f, _ in parts]
        merged = merge_versions(table, files, [rows for _, rows in parts])
        split = Split(values, partition, bucket, files)
        out.append(fill_partition(table, split, merged).select(names))
    if not out:
        logical = table.arrow_schema()
        return pa.schema([logical.field(n) for n in names]).empty_table()
    return pa.concat_tables(out) if len(out) > 1 else out[0]


def _own_decide(table: "Table", own: dict[int, list[tuple[DataFileMeta, pa.Table]]],
                other: dict[int, list[tuple[DataFileMeta, pa.Table]]], shared: list[ManifestEntry]) -> bool:
    """Whether an end's own files alone give its state of the changed keys: they hold every changed key (the
    other end lists no files of its own) in versions newer than any shared file's, and the newest version wins
    (no `sequence.field`, and retractions count: no `ignore-delete`). A common diff, an increment appended
    between the ends, then reads the shared files only for the other end."""
    options = table.core_options
    if any(other.values()) or not any(own.values()) or options.sequence_fields or options.ignore_delete:
        return False
    oldest_own = min(f.min_sequence_number for part in own.values() for f, _ in part)
    return all(e.file.max_sequence_number < oldest_own for e in shared)


def _shared_rows(table: "Table", partition: bytes, entries: list[ManifestEntry], names: list[str],
                 changed: pa.Table) -> dict[int, list[tuple[DataFileMeta, pa.Table]]]:
    """Per bucket, the rows of the changed keys in the files both ends list (each file read once)."""
    columns, schema = merge_columns(table, names), version_schema(table)
    values = table.partition_codec.from_bytes(partition)
    out: dict[int, list[tuple[DataFileMeta, pa.Table]]] = {}
    for e in entries:
        split = Split(values, partition, e.bucket, [e.file])
        for rows in read_rows_of_keys(table, split, columns, schema, changed):
            out.setdefault(e.bucket, []).append((e.file, rows))
    return out


def _same(a: pa.ChunkedArray, b: pa.ChunkedArray) -> np.ndarray:
    """Row-wise equality where two NULLs are equal."""
    return null_safe_equal(a, b)


def _pairs(start: pa.Table, end: pa.Table, keys: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(start rows, end rows) of the keys at both ends, pairwise; then the start rows and the end rows of the
    keys at one end only, ascending. A key-ordered integer key (the merged state of one bucket) pairs by a binary
    search; any other by a join."""
    if len(keys) == 1:
        s, e = ascending_integers(start.column(keys[0])), ascending_integers(end.column(keys[0]))
        if s is not None and e is not None:
            at = np.minimum(np.searchsorted(e, s), max(len(e) - 1, 0))
            hit = e[at] == s if len(e) else np.zeros(len(s), dtype=bool)
            unmatched = np.ones(len(e), dtype=bool)
            unmatched[at[hit]] = False
            return np.flatnonzero(hit), at[hit], np.flatnonzero(~hit), np.flatnonzero(unmatched)
    left = start.select(keys).append_column(_LEFT, pa.array(np.arange(start.num_rows, dtype=np.int64)))
    right = end.select(keys).append_column(_RIGHT, pa.array(np.arange(end.num_rows, dtype=np.int64)))
    pairs = left.join(right, keys, join_type="full outer")
    li = pairs.column(_LEFT).to_numpy(zero_copy_only=False)
    ri = pairs.column(_RIGHT).to_numpy(zero_copy_only=False)
    li_ok, ri_ok = ~np.isnan(li), ~np.isnan(ri)
    both = li_ok & ri_ok
    return (li[both].astype(np.int64), ri[both].astype(np.int64), np.sort(li[li_ok & ~ri_ok].astype(np.int64)),
            np.sort(ri[ri_ok & ~li_ok].astype(np.int64)))


def _every_row(rows: np.ndarray, n: int) -> bool:
    """Whether `rows` is 0, 1, ..., n - 1."""
    return len(rows) == n and (n == 0 or (int(rows[0]) == 0 and bool((np.diff(rows) == 1).all())))


def compare(start: pa.Table, end: pa.Table, keys: list[str]) -> tuple[pa.Table, np.ndarray]:
    """The change rows turning `start` into `end` (both one row per key) and their kinds."""
    bl, br, gone, new = _pairs(start, end, keys)
    changed = np.zeros(len(bl), dtype=bool)
    # a side whose every row is paired, in order (often the start: the changed keys' former rows), is not taken
    whole_start, whole_end = _every_row(bl, start.num_rows), _every_row(br, end.num_rows)
    open_pairs = np.arange(len(bl))   # the pairs no column has told apart yet: only they are compared further
    for name in start.column_names:
        if name in keys:
            continue
        if len(open_pairs) == 0:
            break
        every = len(open_pairs) == len(bl)
        left = start.column(name) if every and whole_start else start.column(name).take(pa.array(bl[open_pairs]))
        right = end.column(name) if every and whole_end else end.column(name).take(pa.array(br[open_pairs]))
        differs = ~_same(left, right)
        changed[open_pairs[differs]] = True
        open_pairs = open_pairs[~differs]
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
    both_tables = pa.concat_tables([start, conformed(end.select(start.column_names), start.schema)])
    return both_tables.take(pa.array(take)), kinds


def diff_units(ends: tuple[list[ManifestEntry], list[ManifestEntry]],
               deletion_vectors: bool = False) -> list[tuple[list[ManifestEntry], list[ManifestEntry]]]:
    """The live files of both ends cut into independent units (a (partition, bucket); a partition whose buckets
    were rescaled between the ends is one unit, compared whole), dropping units both ends list alike. A
    deletion-vector table's bucket may change with the same files (their vectors changed): with
    ``deletion_vectors`` every unit is kept, and the diff reads only those whose files or vectors differ."""
    before, after = ends
    counts_before, counts_after = _bucket_counts(before), _bucket_counts(after)
    whole = {p for p in set(counts_before) | set(counts_after)
             if len(counts_before.get(p, set()) | counts_after.get(p, set())) > 1}
    g_before, g_after = _groups(before, whole), _groups(after, whole)
    units = [(g_before.get(g, []), g_after.get(g, [])) for g in sorted(set(g_before) | set(g_after))]
    return [u for u in units
            if deletion_vectors or {e.file.file_name for e in u[0]} != {e.file.file_name for e in u[1]}]


def end_entries(table: "Table", start: Bound, end: Bound) -> tuple[list[ManifestEntry], list[ManifestEntry]]:
    """The live files at both ends (metadata only)."""
    return (table.file_entries(start.snapshot) if start.id else []), table.file_entries(end.snapshot)


def diff_batches(table: "Table", before: list[ManifestEntry], after: list[ManifestEntry], names: list[str],
                 ends: tuple[Snapshot | None, Snapshot | None] | None = None) -> Iterator[tuple[pa.Table, np.ndarray]]:
    """The changes between the files `before` and `after` (of the snapshots `ends`, which a deletion-vector table
    needs: a file both ends list may have lost rows to its vector in between): rows and their kinds."""
    return diff_results(table, before, after, names, ends, lambda rows, kinds: (rows, kinds))


def diff_results(table: "Table", before: list[ManifestEntry], after: list[ManifestEntry], names: list[str],
                 ends: tuple[Snapshot | None, Snapshot | None] | None,
                 finish: Callable[[pa.Table, np.ndarray], R]) -> Iterator[R]:
    """`diff_batches`, each unit's rows and kinds passed through `finish` in the thread that compared them (the
    consumer's thread then only hands results on)."""
    if table.core_options.deletion_vectors:
        if ends is None:
            raise ValueError("a diff of a deletion-vector table needs the snapshots at both ends")
        for rows, kinds in _deletion_vector_diff(table, before, after, names, ends):
            yield finish(rows, kinds)
        return
    counts_before, counts_after = _bucket_counts(before), _bucket_counts(after)
    whole = {p for p in set(counts_before) | set(counts_after)
             if len(counts_before.get(p, set()) | counts_after.get(p, set())) > 1}
    g_before, g_after = _groups(before, whole), _groups(after, whole)
    keys = table.schema().trimmed_primary_keys + [k for k in table.partition_keys
                                                  if k not in table.schema().trimmed_primary_keys]
    trimmed = table.schema().trimmed_primary_keys

    def alone(group: tuple[bytes, int]) -> _OwnFiles:
        """The files of the group only the start lists, and those only the end lists."""
        files_before, files_after = g_before.get(group, []), g_after.get(group, [])
        names_before = {e.file.file_name for e in files_before}
        names_after = {e.file.file_name for e in files_after}
        return ([e for e in files_before if e.file.file_name not in names_after],
                [e for e in files_after if e.file.file_name not in names_before])

    def unit(item: _Unit) -> R | None:
        group, (before_only, after_only), key_slice = item
        partition = group[0]
        own_before = _own_rows(table, partition, before_only, names, key_slice)
        own_after = _own_rows(table, partition, after_only, names, key_slice)
        changed = _changed_keys([rows for own in (own_before, own_after) for part in own.values() for _, rows in part],
                                trimmed)
        if changed.num_rows == 0:
            return None
        only_before = {e.file.file_name for e in before_only}
        shared_files = [e for e in g_before.get(group, []) if e.file.file_name not in only_before]
        alone_before = _own_decide(table, own_before, own_after, shared_files)
        alone_after = _own_decide(table, own_after, own_before, shared_files)
        shared = _shared_rows(table, partition, shared_files, names, changed)   # at most one end decides alone
        old = _state(table, partition, own_before, names, {} if alone_before else shared)
        new = _state(table, partition, own_after, names, {} if alone_after else shared)
        rows, kinds = compare(old, new, keys)
        return finish(rows, kinds) if rows.num_rows else None

    groups = [g for g in sorted(set(g_before) | set(g_after))
              if {e.file.file_name for e in g_before.get(g, [])} != {e.file.file_name for e in g_after.get(g, [])}]

    columns, schema = merge_columns(table, names), version_schema(table)

    def items() -> Iterator[_Unit]:
        # made as the feed is read: a bucket's slices are its changed files read a batch at a time
        for group in groups:
            own = alone(group)
            cut = key_slices(table, table.partition_codec.from_bytes(group[0]),
                             [(e.bucket, e.file) for e in own[0] + own[1]], columns, schema, slices.SLICE_ROWS)
            if cut is None:
                yield group, own, None
            else:
                yield from ((group, own, key_slice) for key_slice in cut)

    for result in in_order_parallel(unit, items()):
        if result is not None:
            yield result


def in_order_parallel(work: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
    """`work` of each item, in the items' order, computed by as many threads as cores (Parquet decoding, takes
    and joins release the GIL) with at most twice that many results held at once: the feed stays a stream. Twice,
    so that a thread done before the oldest item's takes the next item instead of waiting for the oldest to be
    handed on (units differ in cost; with one item per thread, a fast one idled while a slow one finished).
    `items` is iterated as the work goes, as far as the results held allow."""
    workers = os.cpu_count() or 1
    if workers <= 1:
        yield from map(work, items)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending: deque[Future[R]] = deque()
        try:
            for item in items:
                if len(pending) == 2 * workers:
                    yield pending.popleft().result()
                pending.append(pool.submit(work, item))
            while pending:
                yield pending.popleft().result()
        finally:
            # a reader that stops early (or a failed item) leaves no queued item to be computed for nobody
            for future in pending:
                future.cancel()


def _deletion_vector_diff(table: "Table", before: list[ManifestEntry], after: list[ManifestEntry], names: list[str],
                          ends: tuple[Snapshot | None, Snapshot | None]) -> Iterator[tuple[pa.Table, np.ndarray]]:
    """Each bucket whose files or vectors differ between the ends, read at both ends as a read would (files above
    level 0 without the rows their vectors delete) and compared key by key."""
    planner = ScanPlanner(table)
    sides = []
    for entries, snap in zip((before, after), ends):
        splits = planner.plan(entries, None, snap.id if snap else None, snap) if entries else []
        sides.append({(s.partition_bytes, s.bucket): s for s in splits})
    keys = table.schema().trimmed_primary_keys + [k for k in table.partition_keys
                                                  if k not in table.schema().trimmed_primary_keys]
    empty = pa.schema([table.arrow_schema().field(n) for n in names]).empty_table()
    for group in sorted(set(sides[0]) | set(sides[1])):
        old, new = sides[0].get(group), sides[1].get(group)
        # A file keeps its name when a compaction moves it out of level 0, which reads of such a table skip: the
        # bucket reads alike at both ends only where its files sit at the same levels.
        if old is not None and new is not None and old.deletion_files == new.deletion_files \
                and sorted((f.file_name, f.level) for f in old.files) == \
                sorted((f.file_name, f.level) for f in new.files):
            continue
        # every file either end reads
        files = {(s.bucket, f.file_name): (s.bucket, f) for s in (old, new) if s is not None
                 for f in deletion_vector_split(table, s).files}
        either = old if old is not None else new
        assert either is not None
        # sliced, each file is read once for both ends, its rows' positions kept for each end's vector
        cut = key_slices(table, either.partition, list(files.values()), merge_columns(table, names),
                         version_schema(table), slices.SLICE_ROWS, positions=True)
        # each end's vectors, read once for all of the bucket's slices
        vectors = [] if cut is None else [read_deletion_files(table.io, s.deletion_files)
                                          if s is not None and s.deletion_files else {} for s in (old, new)]
        for key_slice in [None] if cut is None else cut:
            readers: list[FilesReader] = [read_files, read_files] if key_slice is None else \
                [partial(read_slice, key_slice=key_slice, vectors=v) for v in vectors]
            rows, kinds = compare(read_split(table, old, names, files_reader=readers[0]) if old else empty,
                                  read_split(table, new, names, files_reader=readers[1]) if new else empty, keys)
            if rows.num_rows:
                yield rows, kinds


def _changed_keys(parts: list[pa.Table], keys: list[str]) -> pa.Table:
    """The distinct keys of the files only one end lists (`parts`, their rows): only they can have changed."""
    if not parts:
        return pa.table({})
    if len(keys) == 1:
        key_values = [v for v in (ascending_integers(p.column(keys[0])) for p in parts) if v is not None]
        if len(key_values) == len(parts):
            # keys of data files: each file's in order, once each; numpy merges them without a hash table
            distinct = key_values[0] if len(parts) == 1 else np.unique(np.concatenate(key_values))
            return pa.table({keys[0]: pa.array(distinct, parts[0].schema.field(keys[0]).type)})
    return pa.concat_tables([p.select(keys) for p in parts]).group_by(keys).aggregate([])
