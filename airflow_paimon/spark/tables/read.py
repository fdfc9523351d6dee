"""A Paimon table (any snapshot, tag or time) as a Spark DataFrame.

The driver plans splits with the format library (partition and key-range pruning, projection), and each task
reads its share of them with ``read_split`` (merge-on-read) inside ``mapInArrow``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from airflow_paimon.format import Snapshot, Split, Table
from airflow_paimon.format.errors import PaimonError
from airflow_paimon.format.read import read_split
from airflow_paimon.format.scan import ScanPlanner

from ..schema_map import spark_schema
from ..tasks import run_per_group

if TYPE_CHECKING:
    import pyarrow.dataset as ds

__all__ = ["partition_filter", "logical_schema", "splits_to_df", "read_table_df"]


def partition_filter(table: Table, partitions: Sequence[Mapping[str, Any]] | None) -> ds.Expression | None:
    """An expression selecting the given partitions (each a mapping of some partition columns to values)."""
    if not partitions:
        return None
    import pyarrow.dataset as ds  # only here: it loads pandas, a second of the application's start-up

    keys = table.partition_keys
    out = None
    for spec in partitions:
        unknown = [k for k in spec if k not in keys]
        if unknown:
            raise PaimonError(f"{unknown} are not partition columns of {table.identifier} (partition keys: {keys})")
        expr = None
        for k, v in spec.items():
            t = table.schema().arrow_type(k)
            if v is None:
                e = ds.field(k).is_null()
            else:
                value = pa.scalar(v).cast(t) if not isinstance(v, pa.Scalar) else v.cast(t)
                e = ds.field(k) == value
            expr = e if expr is None else expr & e
        if expr is None:
            continue
        out = expr if out is None else out | expr
    return out


def _both(a: ds.Expression | None, b: ds.Expression | None) -> ds.Expression | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b


def logical_schema(table: Table, columns: Sequence[str] | None) -> pa.Schema:
    """The table's columns `columns` (default: all), every one nullable as Spark hands them over."""
    logical = table.arrow_schema()
    names = list(columns) if columns is not None else logical.names
    unknown = [c for c in names if c not in logical.names]
    if unknown:
        raise PaimonError(f"columns {unknown} are not in the schema of {table.identifier}: {logical.names}")
    return pa.schema([pa.field(n, logical.field(n).type, True) for n in names])


def splits_to_df(spark: SparkSession, table: Table, splits: Sequence[Split], columns: Sequence[str] | None = None,
                 filter: ds.Expression | None = None, num_tasks: int | None = None) -> DataFrame:
    """A DataFrame whose tasks read `splits` (merge-on-read, projected, filtered) with the format library."""
    schema = logical_schema(table, columns)
    names = schema.names
    splits = list(splits)

    def read(i: int) -> Iterator[pa.Table]:
        yield read_split(table, splits[i], names, filter)

    return run_per_group(spark, [s.row_count for s in splits], read, spark_schema(schema), num_tasks)


def read_table_df(spark: SparkSession, table: Table, *, snapshot_id: int | None = None, tag: str | None = None,
                  as_of: Any = None, snapshot: Snapshot | None = None, columns: Sequence[str] | None = None,
                  filter: ds.Expression | None = None, partitions: Sequence[Mapping[str, Any]] | None = None,
                  num_tasks: int | None = None) -> DataFrame:
    """Rows of `table` at the latest snapshot (or the snapshot, tag or time given) as a Spark DataFrame.

    `columns` projects, `partitions` (list of {partition column: value}) and `filter` (a pyarrow dataset
    expression) prune splits and files on the driver and filter rows in the tasks.
    """
    snap = snapshot if snapshot is not None else table.resolve_snapshot(snapshot_id, tag, as_of)
    expr = _both(filter, partition_filter(table, partitions))
    splits = ScanPlanner(table).plan(table.file_entries(snap), expr, snap.id) if snap is not None else []
    return splits_to_df(spark, table, splits, columns, expr, num_tasks)
