"""Writes to deletion-vector tables: each write leaves one live row per key above level 0, so readers need no merge.

Paimon's batch read of a deletion-vector table reads only the files above level 0, each without the rows its
vector deletes, and merges nothing. Paimon's own writers get there by compaction: a write adds a level-0 file
(invisible to those reads) and the lookup compaction that follows moves it up and marks, in the vectors of the
older files, the positions of the keys it rewrote. A write here does the same in one commit pair, as Paimon's
writer commits them: the APPEND snapshot adds the level-0 file; the COMPACT snapshot right after it

- moves the new rows (merged with any level-0 files already in the bucket, which other writers left there) to the
  empty level just below the lowest occupied one, by metadata when the file holds only inserts and updates,
  rewritten without its retractions otherwise; when level 1 is taken, levels 1..j are merged into level j (their
  deleted rows dropped, their vectors with them), so each level stays one sorted run as Paimon expects;
- marks every older position of the written keys (updates and deletes alike) in the vectors of the files above
  level 0, and replaces the bucket's deletion-vector index file with one holding the new vectors;
- with `sequence.field`, first merges the written keys' live rows above level 0 with the new rows by that field:
  where an older version wins it is written again with the new rows (never moved by metadata then), as Paimon's
  lookup compaction writes the merge result, so the one live row per key is the one a merging read gives.

Cost follows the increment: only the buckets the write touches are looked at, and in them only the files whose
key range can hold one of its keys are read (their key columns only), unless levels must be merged.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .compact import max_level
from .data_file import write_kv_file
from .deletion_vectors import write_vectors
from .deletion_vectors_index import DeletionVectors, IndexEntry, index_directory
from .evolution import file_columns, read_data_file
from .key_reads import may_hold_keys, positions_of_keys, read_rows_of_keys
from .manifest import FILE_SOURCE_COMPACT, DataFileMeta
from .read import merge_on_read, read_files, version_schema
from .scan import vector_split
from .schema import SEQUENCE_NUMBER, VALUE_KIND

if TYPE_CHECKING:
    from .commit_message import CommitMessage
    from .snapshot import Snapshot
    from .table import Table


class DeletionVectorWriter:
    """The compact increment of writes to one deletion-vector table, computed against the write's base."""

    def __init__(self, table: "Table", base: "Snapshot | None"):
        self.table = table
        self.vectors = DeletionVectors.of(table, base)
        self.files: dict[tuple[bytes, int], list[DataFileMeta]] = {}
        for e in table.file_entries(base):
            self.files.setdefault((e.partition, e.bucket), []).append(e.file)

    def _read(self, partition: tuple, pbytes: bytes, bucket: int, files: list[DataFileMeta]) -> list[pa.Table]:
        schema = version_schema(self.table)
        return read_files(self.table, vector_split(self.vectors, partition, pbytes, bucket, files), schema.names,
                          schema)

    def _live_rows(self, partition: tuple, pbytes: bytes, bucket: int, files: list[DataFileMeta],
                   wanted: pa.Table) -> pa.Table:
        """The rows of the `wanted` keys in `files` (above level 0) that no vector deletes."""
        schema = version_schema(self.table)
        split = vector_split(self.vectors, partition, pbytes, bucket, files)
        parts = read_rows_of_keys(self.table, split, schema.names, schema, wanted) if files else []
        return pa.concat_tables(parts) if parts else schema.empty_table()

    def settle(self, partition: tuple, msg: "CommitMessage") -> None:
        """Fill `msg`'s compact increment: its level-0 file moved up, the older versions of its keys deleted."""
        table = self.table
        schema = table.schema()
        keys = list(schema.trimmed_primary_keys)
        pbytes, bucket = msg.partition, msg.bucket
        new_file = msg.new_files[0]
        files = self.files.get((pbytes, bucket), [])
        level0 = sorted((f for f in files if f.level == 0), key=lambda f: f.max_sequence_number)
        upper = [f for f in files if f.level > 0]
        moving = level0 + [new_file]
        parts = self._read(partition, pbytes, bucket, moving)
        written = pa.concat_tables(parts)
        touched = written.select(keys).group_by(keys).aggregate([])
        options = table.core_options
        live = self._live_rows(partition, pbytes, bucket, upper, touched) if options.sequence_fields else None
        if live is not None and live.num_rows:
            # By the sequence field a key's live row above level 0 may outrank what was written: the winner is
            # written again, up here, as Paimon's lookup compaction writes it, and its old position marked.
            parts = [live] + parts
        adds = merge_on_read(parts, keys, options.sequence_fields, False, True,
                             seq_descending=options.sequence_descending)

        top = max_level(table)
        occupied = {f.level for f in upper}
        lowest = min(occupied | {top})
        if lowest > 1:
            target, merged = lowest - 1, []
        else:
            target = 1
            while target + 1 in occupied:
                target += 1
            merged = [f for f in upper if f.level <= target]
        merged_names = {f.file_name for f in merged}
        vectors = {name: pos for name, pos in self.vectors.bucket(pbytes, bucket).items() if name not in merged_names}
        changed = bool(merged_names & set(self.vectors.bucket(pbytes, bucket)))
        first = touched.column(keys[0]).combine_chunks()
        current = schema
        file_schema = version_schema(table)
        for f in upper:
            if f.file_name in merged_names or not may_hold_keys(table, f, first):
                continue
            path = table.data_file_path(partition, bucket, f)
            file_keys = read_data_file(table.io, path, file_columns(current, table.schema_by_id(f.schema_id), keys),
                                       file_schema)
            hits = positions_of_keys(file_keys, touched, keys)
            if len(hits):
                old = vectors.get(f.file_name)
                union = hits if old is None else np.union1d(old, hits)
                if old is None or len(union) != len(old):
                    vectors[f.file_name] = union
                    changed = True

        if merged:
            kept = []
            for rows in self._read(partition, pbytes, bucket, merged):
                stale = positions_of_keys(rows.select(keys), touched, keys)
                if len(stale):
                    mask = np.ones(rows.num_rows, dtype=bool)
                    mask[stale] = False
                    rows = rows.filter(pa.array(mask))
                kept.append(rows)
            out = merge_on_read(kept + [adds], keys, [], False, True)
        else:
            out = adds
        only_adds = adds.num_rows == written.num_rows and len(moving) == 1 and not merged \
            and (live is None or live.num_rows == 0)
        if only_adds:
            after = [dataclasses.replace(new_file, level=target)]
        elif out.num_rows:
            after = [write_kv_file(table.io, table.bucket_dir(partition, bucket), schema,
                                   out.select(schema.field_names), out.column(SEQUENCE_NUMBER).combine_chunks(),
                                   out.column(VALUE_KIND).combine_chunks().cast(pa.int8()),
                                   table.core_options.data_codec(target),
                                   prefix=table.core_options.data_file_prefix,
                                   stats=table.core_options.stats, level=target, file_source=FILE_SOURCE_COMPACT)]
        else:
            after = []
        msg.compact_before = moving + merged
        msg.compact_after = after
        if changed:
            old_entry = self.vectors.entry(pbytes, bucket)
            msg.compact_index_deletes = [old_entry.file_name] if old_entry is not None else []
            if any(len(v) for v in vectors.values()):
                name, size, ranges = write_vectors(table.io, index_directory(table, pbytes, bucket), vectors,
                                                   table.core_options.deletion_vectors_bitmap64)
                msg.compact_index_adds = [IndexEntry.deletion_vectors(pbytes, bucket, name, size, ranges)]
