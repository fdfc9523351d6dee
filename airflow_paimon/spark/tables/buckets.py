"""Rows in the bucket Paimon gives their key, and shuffles that bring each (partition, bucket) into one task.

The bucket is ``format.bucketing.bucket_ids``, the very function the library's own writer uses, so keys land
where Paimon (and Flink) would put them.
"""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from airflow_paimon.format import Table
from airflow_paimon.format.bucketing import bucket_ids
from airflow_paimon.format.errors import PaimonError

from ..schema_map import cast_to, exchange_schema, to_exchange

__all__ = ["BUCKET_COLUMN", "bucket_key_schema", "assign_buckets", "by_bucket"]

BUCKET_COLUMN = "__bucket"


def bucket_key_schema(table: Table) -> pa.Schema:
    """The Arrow schema of the table's bucket-key columns, which `bucket_ids` hashes."""
    logical = table.arrow_schema()
    return pa.schema([pa.field(k, logical.field(k).type, True) for k in table.bucket_keys])


def assign_buckets(df: DataFrame, table: Table, bucket_column: str = BUCKET_COLUMN) -> DataFrame:
    """`df` (with the table's bucket-key columns) plus the bucket Paimon gives each row (int)."""
    out_schema = T.StructType(df.schema.fields + [T.StructField(bucket_column, T.IntegerType(), True)])
    xschema = exchange_schema(out_schema)
    if not table.is_primary_key and table.core_options.bucket < 1:  # an unbucketed append table
        return df.withColumn(bucket_column, F.lit(0).cast("int"))
    missing = [k for k in table.bucket_keys if k not in df.columns]
    if missing:
        raise PaimonError(f"the rows have no bucket-key column(s) {missing} of {table.identifier}")
    key_schema = bucket_key_schema(table)
    num_buckets, function = table.core_options.bucket, table.core_options.bucket_function

    def bucket_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            data = pa.Table.from_batches([batch])
            buckets = bucket_ids(cast_to(data, key_schema), num_buckets, function)
            data = data.append_column(bucket_column, pa.array(buckets, pa.int32()))
            yield from to_exchange(data, xschema).to_batches()

    return df.mapInArrow(bucket_task, out_schema)


def by_bucket(df: DataFrame, keys: list[Any], num_tasks: int | None) -> DataFrame:
    """`df` hash-partitioned by `keys`, so that all rows of a (partition, bucket) meet in one task.

    Without `num_tasks`, Spark's adaptive execution may coalesce small partitions (whole partitions only, so a
    bucket still stays in one task): a small increment is written by few tasks and needs few Python workers."""
    if not keys:
        return df.repartition(1)
    if num_tasks is None:
        return df.repartition(*keys)
    return df.repartition(max(1, num_tasks), *keys)
