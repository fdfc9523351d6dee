"""The rows that differ between two snapshots (or tags) of a primary-key table, as a Spark DataFrame.

Only buckets whose files differ are read: each task reads both versions of its buckets and compares them with
the format library's `diff_rows` (+I, +U, -D in a change column).
"""

from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from airflow_paimon.format import Snapshot, Split, Table
from airflow_paimon.format.errors import PaimonError
from airflow_paimon.format.kernels import CHANGE_COLUMN, diff_rows
from airflow_paimon.format.read import read_split
from airflow_paimon.format.scan import ScanPlanner

from ..schema_map import spark_schema
from ..tasks import run_per_group
from .read import logical_schema

__all__ = ["CHANGE_COLUMN", "read_changes_df"]


def _splits_by_bucket(table: Table, snapshot: Snapshot | None) -> dict[tuple[bytes, int], Split]:
    if snapshot is None:
        return {}
    return {(s.partition_bytes, s.bucket): s for s in
            ScanPlanner(table).plan(table.file_entries(snapshot), None, snapshot.id, snapshot)}


def read_changes_df(spark: SparkSession, table: Table, before: Snapshot | None, after: Snapshot | None,
                    columns: Sequence[str] | None = None, change_column: str = CHANGE_COLUMN,
                    num_tasks: int | None = None) -> DataFrame:
    """The rows that differ between snapshots `before` and `after` (tags are snapshots too), with a
    `change_column` of +I / +U / -D."""
    if not table.is_primary_key:
        raise PaimonError(f"changes between snapshots need a primary-key table; {table.identifier} has no primary key")
    out_arrow = logical_schema(table, columns)
    keys = list(table.primary_keys)
    read_cols = list(dict.fromkeys(keys + out_arrow.names))
    splits_a, splits_b = _splits_by_bucket(table, before), _splits_by_bucket(table, after)
    pairs = []
    for key in sorted(set(splits_a) | set(splits_b), key=lambda k: (k[0], k[1])):
        sa, sb = splits_a.get(key), splits_b.get(key)
        names_a = {f.file_name for f in sa.files} if sa is not None else set()
        names_b = {f.file_name for f in sb.files} if sb is not None else set()
        # On a deletion-vector table the same files can hold other rows: their vectors changed.
        vectors_a = sa.deletion_files if sa is not None else None
        vectors_b = sb.deletion_files if sb is not None else None
        if names_a != names_b or vectors_a != vectors_b:
            pairs.append((sa, sb))
    logical = table.arrow_schema()
    empty = pa.schema([logical.field(n) for n in read_cols]).empty_table()

    def diff(i: int) -> Iterator[pa.Table]:
        sa, sb = pairs[i]
        ta = read_split(table, sa, read_cols) if sa is not None else empty
        tb = read_split(table, sb, read_cols) if sb is not None else empty
        yield diff_rows(ta, tb, keys, change_column)

    sizes = [(a.row_count if a else 0) + (b.row_count if b else 0) for a, b in pairs]
    schema = spark_schema(out_arrow).add(T.StructField(change_column, T.StringType(), True))
    return run_per_group(spark, sizes, diff, schema, num_tasks)
