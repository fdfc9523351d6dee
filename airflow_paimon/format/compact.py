"""Compaction: full compaction of primary-key buckets, and merging small files of append tables.

Full compaction of a primary-key bucket merges all its files with merge-on-read (newest version of each key,
``sequence.field`` first, then ``_SEQUENCE_NUMBER``) and, because the output goes to the top level and replaces
every file of the bucket, drops deleted keys. The rows keep their own sequence numbers and row kinds, so the new
files cover the same sequence-number range as the old ones and later writes still order after them. The top
level is ``num-levels - 1``; like Paimon, ``num-levels`` defaults to ``num-sorted-run.compaction-trigger + 1``
(5 + 1 = 6, so level 5).

On a deletion-vector table the files are read without the rows their vectors delete, and the bucket's
deletion-vector index file leaves the index with the files it described.

Small files of an append table (bucket -1) are concatenated in sequence order into files of about
``target-file-size``.

Under `changelog-producer` = full-compaction or lookup, the compaction also writes the changelog of what it merges
(see changelog/full_compaction.py).

A compaction is one commit of kind COMPACT with DELETE entries for the old files and ADD entries for the new ones.
The old files stay on disk: snapshots and tags taken before the compaction still read them. Expiry removes them
once nothing references them any more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from .changelog.full_compaction import LEVEL, write_compaction_changelog
from .commit_message import CommitMessage
from .data_file import write_append_file, write_kv_file
from .errors import InvalidOptionError
from .manifest import FILE_SOURCE_COMPACT, DataFileMeta
from .read import fill_partition, merge_on_read, read_files, version_schema
from .scan import ScanPlanner, Split
from .schema import SEQUENCE_NUMBER, VALUE_KIND
from .values import count

if TYPE_CHECKING:
    from .snapshot import Snapshot
    from .table import Table

__all__ = ["max_level", "needs_compaction", "compact_split", "compact_primary_key_bucket", "compact_append_files",
           "plan_compaction"]

DEFAULT_SORTED_RUN_TRIGGER = 5


def _int_option(options: Mapping[str, str], key: str) -> int | None:
    raw = options.get(key)
    return None if raw is None else count(str(raw), key, minimum=None)


def max_level(table: "Table") -> int:
    """The top level of the LSM tree: ``num-levels - 1`` (default num-levels: compaction trigger + 1)."""
    opts = table.options()
    levels = _int_option(opts, "num-levels")
    if levels is None:
        trigger = _int_option(opts, "num-sorted-run.compaction-trigger") or DEFAULT_SORTED_RUN_TRIGGER
        levels = trigger + 1
    if levels < 2:
        raise InvalidOptionError(f"num-levels: {levels} is below 2")
    return levels - 1


def target_file_size(table: "Table") -> int:
    return table.core_options.target_file_size


def _has_deletes(f: DataFileMeta) -> bool:
    return f.delete_row_count is None or f.delete_row_count > 0


def needs_compaction(table: "Table", split: Split, target_size: int | None = None) -> bool:
    """Whether compacting this split changes anything."""
    if not split.files:
        return False
    if table.is_primary_key:
        top = max_level(table)
        return (len(split.files) > 1 or split.files[0].level != top or _has_deletes(split.files[0])
                or bool(split.deletion_files))
    size = target_size or target_file_size(table)
    return sum(1 for f in split.files if f.file_size < size) >= 2 or bool(split.deletion_files)


def _chunks(n: int, rows_per_file: int) -> list[tuple[int, int]]:
    rows_per_file = max(1, rows_per_file)
    return [(s, min(n, s + rows_per_file)) for s in range(0, n, rows_per_file)]


def _rows_per_file(files: Sequence[DataFileMeta], target_size: int) -> int:
    rows = sum(f.row_count for f in files)
    size = sum(f.file_size for f in files)
    if rows == 0 or size == 0:
        return max(1, rows)
    return max(1, int(target_size / (size / rows)))


def compact_primary_key_bucket(table: "Table", split: Split, target_size: int | None = None) -> CommitMessage | None:
    """Full compaction of one primary-key bucket into the top level; None when there is nothing to do."""
    if not needs_compaction(table, split):
        return None
    schema = table.schema()
    logical = schema.logical_arrow_schema()
    keys = schema.trimmed_primary_keys
    seq_fields = list(table.core_options.sequence_fields)
    file_schema = version_schema(table)
    files = sorted(split.files, key=lambda f: (-f.level, f.max_sequence_number, f.min_sequence_number))
    ordered_split = Split(split.partition, split.partition_bytes, split.bucket, files, split.snapshot_id,
                          split.deletion_files)
    parts = read_files(table, ordered_split, logical.names + [SEQUENCE_NUMBER, VALUE_KIND], file_schema)
    top = max_level(table)
    changelog: list[DataFileMeta] = []
    if table.core_options.changelog_producer in ("full-compaction", "lookup"):
        leveled = pa.concat_tables([p.append_column(LEVEL, pa.array(np.full(p.num_rows, f.level, dtype=np.int32)))
                                    for p, f in zip(parts, files)])
        changelog = write_compaction_changelog(table, split.partition, split.bucket,
                                               fill_partition(table, ordered_split, leveled), top)
    ordered = all(a.max_sequence_number < b.min_sequence_number for a, b in zip(files, files[1:]))
    # Retractions are always dropped: the output replaces every file of the bucket at the top level.
    options = table.core_options
    merged = merge_on_read(parts, keys, seq_fields, ordered, True, seq_descending=options.sequence_descending,
                           ignore_delete=options.ignore_delete)
    merged = fill_partition(table, ordered_split, merged)
    bucket_dir = table.bucket_dir(split.partition, split.bucket)
    codec = table.core_options.data_codec(top)
    new_files = []
    per_file = _rows_per_file(files, target_size or target_file_size(table))
    for start, end in _chunks(merged.num_rows, per_file):
        chunk = merged.slice(start, end - start)
        seq = chunk.column(SEQUENCE_NUMBER).combine_chunks()
        kinds = chunk.column(VALUE_KIND).combine_chunks().cast(pa.int8())
        rows = chunk.select(logical.names)
        new_files.append(write_kv_file(table.io, bucket_dir, schema, rows, seq, kinds, codec,
                                       prefix=table.core_options.data_file_prefix, level=top,
                                       stats=table.core_options.stats, file_source=FILE_SOURCE_COMPACT))
    # The rows the bucket's deletion vectors delete were left out when its files were read: the vectors of
    # the replaced files go with them.
    vectors = sorted({path.rsplit("/", 1)[-1] for path, _, _ in (split.deletion_files or {}).values()})
    return CommitMessage(split.partition_bytes, split.bucket, table.total_buckets, new_files, list(split.files),
                         changelog_files=changelog, index_deletes=vectors)


def compact_append_files(table: "Table", split: Split, target_size: int | None = None) -> CommitMessage | None:
    """Concatenate the small files of one append-table partition (or bucket) into files of about the target size.

    With deletion vectors, the files that have one are rewritten too, without the rows it deletes (Paimon's
    append compaction folds them in the same way): the bucket's vectors then all go, with their index files."""
    size = target_size or target_file_size(table)
    vectors = split.deletion_files or {}
    small = sorted((f for f in split.files if f.file_size < size or f.file_name in vectors),
                   key=lambda f: f.min_sequence_number)
    if len(small) < 2 and not vectors:
        return None
    schema = table.schema()
    logical = schema.logical_arrow_schema()
    small_split = Split(split.partition, split.partition_bytes, split.bucket, small, split.snapshot_id,
                        split.deletion_files)
    parts = read_files(table, small_split, logical.names, logical)
    data = pa.concat_tables([p.cast(pa.schema([f.with_nullable(True) for f in logical])) for p in parts])
    data = fill_partition(table, small_split, data)
    bucket_dir = table.bucket_dir(split.partition, split.bucket)
    codec = table.core_options.data_codec(None)
    seq = small[0].min_sequence_number
    new_files = []
    for start, end in _chunks(data.num_rows, _rows_per_file(small, size)):
        meta = write_append_file(table.io, bucket_dir, schema, data.slice(start, end - start), seq, codec,
                                 prefix=table.core_options.data_file_prefix, stats=table.core_options.stats,
                                 file_source=FILE_SOURCE_COMPACT)
        new_files.append(meta)
        seq = meta.max_sequence_number + 1
    index_files = sorted({path.rsplit("/", 1)[-1] for path, _, _ in vectors.values()})
    return CommitMessage(split.partition_bytes, split.bucket, table.total_buckets, new_files, small,
                         index_deletes=index_files)


def compact_split(table: "Table", split: Split, target_size: int | None = None) -> CommitMessage | None:
    """Compact one split (a primary-key bucket, or an append table's partition)."""
    newest = max((f.schema_id for f in split.files), default=table.schema().id)
    if newest > table.schema().id:
        # Some files were written under a schema newer than this Table object's (changed after it was opened):
        # rewriting them with the older schema would drop what the newer writers stored in added columns.
        table = table.at_schema(newest)
    if table.is_primary_key:
        return compact_primary_key_bucket(table, split, target_size)
    return compact_append_files(table, split, target_size)


def plan_compaction(table: "Table", snapshot: "Snapshot | None" = None,
                    partitions: Iterable[Mapping[str, Any]] | None = None) -> list[Split]:
    """The splits of `snapshot` (default latest), optionally of some partitions only, that need compaction."""
    table.require_writable()
    snap = snapshot if snapshot is not None else table.latest_snapshot()
    if snap is None:
        return []
    splits = ScanPlanner(table).plan(table.file_entries(snap), None, snap.id, snap)
    if partitions:
        specs = [dict(p) for p in partitions]
        names = table.partition_keys
        for spec in specs:
            unknown = [k for k in spec if k not in names]
            if unknown:
                raise InvalidOptionError(f"{unknown} are not partition columns of {table.identifier} ({names})")
        codec = table.partition_codec

        def wanted(split: Split) -> bool:
            values = codec.as_dict(split.partition)
            return any(all(_same(values[k], v, table.schema().arrow_type(k)) for k, v in spec.items())
                       for spec in specs)

        splits = [s for s in splits if wanted(s)]
    size = target_file_size(table)
    return [s for s in splits if needs_compaction(table, s, size)]


def _same(actual: Any, given: Any, arrow_type: pa.DataType) -> bool:
    if actual is None or given is None:
        return actual is None and given is None
    try:
        return bool(pa.scalar(given).cast(arrow_type).as_py() == actual)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return str(given) == str(actual)

