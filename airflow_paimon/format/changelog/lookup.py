"""`changelog-producer = lookup`: the exact changelog of a write against the table as it was.

Cost follows the increment: only the buckets the write touches are looked at, and in them only the files whose
key range [minKey, maxKey] can hold one of its keys; of those, only the rows of its keys are kept.

Paimon's lookup compaction produces changelog for every level-0 row it merges. So a write whose changelog is
already written must not leave its rows at level 0: like Paimon's writer (an APPEND snapshot with the new
level-0 file, then a COMPACT snapshot with the compaction and its changelog), the write's compact increment moves
the new file up, by metadata only, to the empty level just below the newest occupied one (lookups search levels
from 1 upwards, so newer data must sit lower). When level 1 is taken, the new file is merged with the occupied
levels 1..j into level j instead. Level-0 files found in a touched bucket (written before the producer was set,
or by a writer whose COMPACT snapshot did not land) are described and moved up by the write, as Paimon's lookup
compaction would: so concurrent writers, or a crash between the two snapshots, lose no changelog. On a
deletion-vector table the deletion-vector writer makes that move (marking the vectors), and the lookup reads the
files above level 0 without the rows their vectors mark, as Paimon's `LookupLevels` does.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrow_tables import conformed, no_rows
from ..compact import max_level
from ..data_file import (
    UPDATE_BEFORE,
    EncodedFile,
    encode_parquet,
    kv_file_meta,
    kv_file_schema,
    kv_file_table,
    kv_unique_columns,
    new_data_file_name,
    write_encoded,
    write_kv_file,
)
from ..deletion_vectors_index import DeletionVectors
from ..key_reads import read_rows_of_keys
from ..manifest import FILE_SOURCE_COMPACT, DataFileMeta
from ..parquet_splice import PLAIN_COLUMN_CODECS, ParquetParts, SpliceError, plain_int32_file, splice
from ..read import fill_partition, read_files, version_schema
from ..scan import Split, vector_split
from ..schema import SEQUENCE_NUMBER, VALUE_KIND
from .rows import after_kinds, changes, is_add, newest, values_only, write_changelog

if TYPE_CHECKING:
    from ..snapshot import Snapshot
    from ..table import Table


class Lookup:
    """The table at `base`, read per bucket only where a write's keys can be."""

    def __init__(self, table: "Table", base: "Snapshot | None"):
        self.table = table
        self.files: dict[tuple[bytes, int], list[DataFileMeta]] = {}
        for e in table.file_entries(base):
            self.files.setdefault((e.partition, e.bucket), []).append(e.file)
        # On a deletion-vector table a key's replaced or deleted rows above level 0 are only marked in the vectors
        # (the retraction that deleted a key is dropped when its file moves up): a lookup must not see them.
        self.vectors = DeletionVectors.of(table, base) if table.core_options.deletion_vectors else None

    def _split(self, partition: tuple, bucket: int, files: list[DataFileMeta]) -> Split:
        return vector_split(self.vectors, partition, self.table.partition_codec.to_bytes(partition), bucket, files)

    def read(self, partition: tuple, bucket: int, files: list[DataFileMeta]) -> pa.Table:
        table = self.table
        schema = version_schema(table)
        if not files:
            return no_rows(schema)
        split = self._split(partition, bucket, files)
        parts = read_files(table, split, schema.names, schema)
        return fill_partition(table, split, pa.concat_tables(parts))

    def read_keys(self, partition: tuple, bucket: int, files: list[DataFileMeta], wanted: pa.Table) -> pa.Table:
        """The rows of `files` whose key is one of `wanted`'s, without reading the values of any other key."""
        table = self.table
        schema = version_schema(table)
        split = self._split(partition, bucket, files)
        parts = read_rows_of_keys(table, split, schema.names, schema, wanted)
        if not parts:
            return no_rows(schema)
        return fill_partition(table, split, pa.concat_tables(parts))

    def bucket_files(self, partition: tuple, bucket: int) -> list[DataFileMeta]:
        return self.files.get((self.table.partition_codec.to_bytes(partition), bucket), [])

    def versions(self, partition: tuple, bucket: int, rows: pa.Table) -> tuple[pa.Table, pa.Table]:
        """For the keys of `rows` and of the bucket's level-0 files: (their versions above level 0, every row of
        the level-0 files). Level-0 files a lookup table holds at `base` are not described yet (written before
        the producer was set, or by a writer whose COMPACT snapshot did not land), so the write describes them."""
        table = self.table
        key_names = table.schema().trimmed_primary_keys
        files = self.bucket_files(partition, bucket)
        level0 = self.read(partition, bucket, [f for f in files if f.level == 0])
        wanted = rows.select(key_names)
        if level0.num_rows:
            wanted = pa.concat_tables([wanted, level0.select(key_names).cast(wanted.schema)])
            wanted = wanted.group_by(key_names).aggregate([])
        upper = self.read_keys(partition, bucket, [f for f in files if f.level > 0], wanted)
        if table.core_options.ignore_delete:
            upper, level0 = values_only(upper), values_only(level0)
        return upper, level0


def lookup_changelog(table: "Table", lookup: Lookup, partition: tuple, bucket: int,
                     rows: pa.Table, dictionary: Sequence[str] | None = None,
                     data_file: EncodedFile | None = None) -> list[DataFileMeta]:
    """The changelog file of one bucket of a write: `rows` holds its newest version of each key it touches
    (table columns, `_SEQUENCE_NUMBER`, `_VALUE_KIND`). Before: the newest value above level 0; after: the
    merge of every version (so `sequence.field` decides, as in Paimon). `dictionary`: see `write_changelog`.
    `data_file`: the data file written of `rows`, as encoded, whose columns the changelog reuses where its rows
    are exactly those (`spliced_changelog`)."""
    schema = version_schema(table)
    rows = conformed(rows.select(schema.names), schema)
    upper, level0 = lookup.versions(partition, bucket, rows)
    upper = conformed(upper, schema)
    before = newest(table, upper)   # its retractions: `changes` drops them
    options = table.core_options
    if level0.num_rows == 0 and not options.sequence_fields:
        # `rows` (one per key, sorted by key) are numbered after every stored version of their keys: they win.
        stats = options.stats
        if data_file is not None and not options.changelog_row_deduplicate \
                and options.changelog_codec == options.data_codec(0) \
                and stats.file_mode(0, changelog=True) == stats.file_mode(0) \
                and bool(is_add(rows.column(VALUE_KIND)).all()):
            try:
                return [spliced_changelog(table, partition, bucket, before, rows, data_file, dictionary)]
            except SpliceError:   # a Parquet file it does not splice: the changelog written row by row
                pass
        after = rows
    else:
        after = newest(table, pa.concat_tables([upper, conformed(level0, schema), rows]))
    return write_changelog(table, partition, bucket, changes(table, before, after), FILE_SOURCE_COMPACT,
                           dictionary)


def spliced_changelog(table: "Table", partition: tuple, bucket: int, before: pa.Table, after: pa.Table,
                      data_file: EncodedFile, dictionary: Sequence[str] | None) -> DataFileMeta:
    """The changelog of a write whose every row is a value (`after`, the rows of the data file `data_file`, its
    description and bytes): -U(before) of each key that had a value, then every row of `after` as +U (a key
    that had a value) or +I.

    The -U rows come first, as a row group of their own: each key's -U still comes before its +U, as Paimon's
    readers replay them. The +I/+U rows are the data file's rows: their encoded columns are copied from it
    (parquet_splice.py), only their kinds are encoded again (plain, by `plain_int32_file` where the codec allows),
    and the data file's statistics are merged into the changelog's, not computed again: encoding and describing
    those rows was most of a lookup write's cost."""
    schema = table.schema()
    options = table.core_options
    former = values_only(before.select(after.column_names))
    retract = pa.array(np.full(former.num_rows, UPDATE_BEFORE, dtype=np.int8))
    kinds = after_kinds(table, former, after)
    codec = options.changelog_codec
    # The -U row group and the kinds' chunk keep no Parquet statistics: a reader filtering the changelog reads
    # them rather than skip them, and their min/max were over a quarter of their encoding (the manifest's
    # description is computed apart).
    first = encode_parquet(kv_file_table(schema, former, former.column(SEQUENCE_NUMBER), retract), codec,
                           kv_unique_columns(schema), dictionary, statistics=False)
    rows = ParquetParts(data_file.data)
    if codec.name in PLAIN_COLUMN_CODECS:
        kind_file = plain_int32_file(VALUE_KIND, kinds, [g.num_rows for g in rows.row_groups], codec.name,
                                     codec.level)
    else:
        kind_field = kv_file_schema(schema).field(VALUE_KIND)
        kind_file = encode_parquet(pa.Table.from_arrays([pa.array(kinds)], schema=pa.schema([kind_field])),
                                   codec, (), dictionary, statistics=False)
    column = len(schema.trimmed_primary_keys) + 1    # _VALUE_KIND's place in the file
    data = splice(ParquetParts(first), [(rows, {column: (ParquetParts(kind_file), 0)})])
    name = new_data_file_name(options.changelog_file_prefix)
    write_encoded(table.io, f"{table.bucket_dir(partition, bucket)}/{name}", data)
    # (the data file's rows are all values, as here: its count of retractions, 0, stays right)
    return kv_file_meta(name, len(data), schema, former, former.column(SEQUENCE_NUMBER).combine_chunks(), retract,
                        options.stats, changelog=True, file_source=FILE_SOURCE_COMPACT, then=data_file)


def level_up(table: "Table", lookup: Lookup, partition: tuple, bucket: int,
             new_file: DataFileMeta) -> tuple[list[DataFileMeta], list[DataFileMeta]]:
    """The compact increment (files before, files after) that takes a write's level-0 file (and any level-0
    file it described with it) out of level 0."""
    top = max_level(table)
    files = lookup.bucket_files(partition, bucket)
    moving = [new_file] + [f for f in files if f.level == 0]
    occupied = {f.level for f in files if f.level > 0}
    lowest = min(occupied | {top})
    if lowest > 1 and len(moving) == 1:
        return [new_file], [dataclasses.replace(new_file, level=lowest - 1)]
    target = lowest - 1
    if target < 1:
        target = 1
        while target + 1 in occupied:
            target += 1
        moving += [f for f in files if 1 <= f.level <= target]
    result = newest(table, lookup.read(partition, bucket, moving))
    if target == top:
        result = values_only(result)
    if result.num_rows == 0:
        return moving, []
    schema = table.schema()
    seq = result.column(SEQUENCE_NUMBER).combine_chunks()
    kinds = pc.cast(result.column(VALUE_KIND).combine_chunks(), pa.int8())
    out = write_kv_file(table.io, table.bucket_dir(partition, bucket), schema, result.select(schema.field_names),
                        seq, kinds, table.core_options.data_codec(target),
                        prefix=table.core_options.data_file_prefix, stats=table.core_options.stats, level=target,
                        file_source=FILE_SOURCE_COMPACT)
    return moving, [out]
