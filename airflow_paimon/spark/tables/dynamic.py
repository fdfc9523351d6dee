"""Buckets of dynamic-bucket primary-key tables (`bucket = -1`) on Spark, from the table's HASH index.

A key the table holds is in the bucket its partition's HASH index gives its hash; a new key's bucket depends on
every key assigned before it in its partition (fill the open buckets up to `dynamic-bucket.target-row-num`, then
open new ones), so that assignment is sequential. It runs once, on the driver, with the format library's own
`DynamicBucketAssigner` over the keys of the rows to write (increment-sized: key columns only), which also writes
the new HASH index files of the buckets that grew. The tasks then bucket the rows by `KnownBuckets` (the
increment's key hashes and their buckets, shipped with the task) and write each bucket as for fixed buckets; the
index files go into the commit messages of their buckets, as the library's `Table.write` puts them.

A MERGE join only needs the bucket a target key is already in: its tasks look it up in the HASH index files
themselves (`lookup_buckets`); a key no bucket holds (-1) has no target row to join.
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from airflow_paimon.format import CommitMessage, Snapshot, Table
from airflow_paimon.format.deletion_vectors_index import IndexEntry
from airflow_paimon.format.dynamic_bucket import DynamicBucketAssigner, KnownBuckets
from airflow_paimon.format.errors import InvalidDataError, PaimonError
from airflow_paimon.format.kernels import check_unique_keys
from airflow_paimon.format.versions import kinds_to_write

from ..schema_map import cast_to, exchange_schema, to_exchange

__all__ = ["dynamic_key_schema", "assign_on_driver", "with_known_buckets", "lookup_buckets", "attach_index_files",
           "DynamicAssignment"]


def dynamic_key_schema(table: Table) -> pa.Schema:
    """The partition and primary-key columns (typed as the table's) whose values give a row its bucket."""
    logical = table.arrow_schema()
    names = [*table.partition_keys, *table.schema().trimmed_primary_keys]
    return pa.schema([pa.field(n, logical.field(n).type, True) for n in names])


class DynamicAssignment:
    """The buckets the driver assigned to the keys of one write, and the HASH index files it wrote for them."""

    def __init__(self, known: KnownBuckets, index_files: dict[tuple[bytes, int], tuple[IndexEntry, str | None]]):
        self.known = known
        self.index_files = index_files


def assign_on_driver(table: Table, rows: DataFrame, base: Snapshot | None, kind_column: str | None,
                     kinds_given: bool, duplicates: str, what: str) -> DynamicAssignment:
    """Assign buckets to the keys of `rows` (the table's columns as the write prepared them, and `kind_column`
    when `kinds_given`) against `base`'s HASH index, and write the index files of the buckets that grew.

    The rows a write drops (retractions a table with ``ignore-delete``/``ignore-update-before`` ignores) add no
    hash, as in the library's own writer. Keys that cannot be written (a null primary key, an unknown kind, a key
    twice with ``duplicates="error"``) are refused here, before any index file is written."""
    key_schema = dynamic_key_schema(table)
    options = table.core_options
    columns = list(key_schema.names)
    if kinds_given and kind_column is not None:
        columns.append(kind_column)
    elif options.rowkind_field and options.rowkind_field not in columns:
        columns.append(options.rowkind_field)
    data = rows.select(*columns).toArrow()
    kinds = None
    if kinds_given and kind_column is not None:
        kinds = data.column(kind_column)
        codes = np.asarray(kinds.drop_null().to_numpy())
        bad = int(((codes < 0) | (codes > 3)).sum()) + kinds.null_count
        if bad:
            raise InvalidDataError(f"{bad} row(s) have an unknown row kind (expected +I, -U, +U or -D)")
    data, _ = kinds_to_write(options, data, kinds)
    for k in table.primary_keys:
        if data.column(k).null_count:
            raise InvalidDataError(f"primary-key column {k!r} is null in {data.column(k).null_count} row(s)")
    keys = cast_to(data, key_schema)
    if duplicates == "error":
        def message(key: str, extra: int) -> str:
            return (f"{what} has {extra} more row(s) than distinct primary keys (first "
                    f"duplicate: {key}); each key may appear once. Nothing was committed.")

        check_unique_keys(keys, key_schema.names, message, shown=table.primary_keys)
    assigner = DynamicBucketAssigner(table, base)
    buckets = assigner.assign_rows(keys)
    return DynamicAssignment(KnownBuckets(table, keys, buckets), dict(assigner.index_files()))


def with_known_buckets(df: DataFrame, table: Table, known: KnownBuckets, bucket_column: str) -> DataFrame:
    """`df` plus the bucket the driver assigned each row's key (-1: a row the write drops)."""
    return _with_buckets(df, table, known.buckets, bucket_column)


def lookup_buckets(df: DataFrame, table: Table, base: Snapshot | None, bucket_column: str) -> DataFrame:
    """`df` plus the bucket `base`'s HASH index holds each row's key in (-1: the target does not hold it)."""
    return _with_buckets(df, table, DynamicBucketAssigner(table, base).lookup_rows, bucket_column)


def _with_buckets(df: DataFrame, table: Table, buckets_of: Callable[[pa.Table], np.ndarray],
                  bucket_column: str) -> DataFrame:
    missing = [k for k in dynamic_key_schema(table).names if k not in df.columns]
    if missing:
        raise PaimonError(f"the rows have no partition or primary-key column(s) {missing} of {table.identifier}")
    out_schema = T.StructType(df.schema.fields + [T.StructField(bucket_column, T.IntegerType(), True)])
    xschema = exchange_schema(out_schema)
    key_schema = dynamic_key_schema(table)

    def bucket_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            data = pa.Table.from_batches([batch])
            data = data.append_column(bucket_column, pa.array(buckets_of(cast_to(data, key_schema)), pa.int32()))
            yield from to_exchange(data, xschema).to_batches()

    return df.mapInArrow(bucket_task, out_schema)


def attach_index_files(table: Table, messages: list[CommitMessage],
                       index_files: dict[tuple[bytes, int], tuple[IndexEntry, str | None]]) -> list[CommitMessage]:
    """Each new HASH index file in the message of its bucket (replacing the bucket's previous one); a bucket
    whose hashes grew but whose rows the write dropped gets a message of its own."""
    by_bucket = {(m.partition, m.bucket): m for m in messages}
    out = list(messages)
    for (partition, bucket), (entry, previous) in index_files.items():
        msg = by_bucket.get((partition, bucket))
        if msg is None:
            msg = by_bucket[(partition, bucket)] = CommitMessage(partition, bucket, table.total_buckets)
            out.append(msg)
        msg.index_adds.append(entry)
        if previous is not None:
            msg.index_deletes.append(previous)
    return out
