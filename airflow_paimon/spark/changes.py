"""A table's change feed (`Table.changes`) as a Spark DataFrame: the same rows and columns (the table's, then
`_change_type`, `_commit_version`, `_commit_timestamp`) for every mode.

The driver plans with the format library (`plan_changes`: bounds, mode, every check, and the files to read, from
metadata only), so a range the mode cannot answer raises before any job; tasks read the planned units: one
changelog or data file of one snapshot (changelog, delta; or the rows of one data file that a snapshot marked
deleted in an append table's deletion vectors), or one (partition, bucket) whose files differ between
the two ends (diff; a partition whose buckets were rescaled between the ends is one unit, as the library
compares it whole). Units are numbered in the feed's order; `feed_units` hands them to jobs that do more than
read them (the export application writes them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from airflow_paimon.format import Table
from airflow_paimon.format.changes.diff import diff_batches, diff_units
from airflow_paimon.format.changes.feed import ChangePlan, plan_changes
from airflow_paimon.format.changes.rows import change_batch

from .schema_map import spark_schema
from .tasks import run_per_group

if TYPE_CHECKING:
    import pyarrow.dataset as ds

__all__ = ["FeedUnits", "feed_units", "read_change_feed_df"]


@dataclass
class FeedUnits:
    """A planned change feed cut into units: ``read(i)`` yields unit i's change rows (on an executor: it closes
    over what it needs), ``sizes[i]`` its rows on disk (for balancing tasks)."""

    plan: ChangePlan
    sizes: list[int]
    read: Callable[[int], Iterator[pa.Table]]


def feed_units(table: Table, start: Any = None, end: Any = None, *, mode: str = "auto",
               columns: Sequence[str] | None = None, filter: "ds.Expression | None" = None,
               consumer_id: str | None = None) -> FeedUnits:
    """The units of `table.changes(start, end, ...)`, in the feed's order; raises as `table.changes` does."""
    plan = plan_changes(table, start, end, columns=columns, filter=filter, mode=mode, consumer_id=consumer_id)
    schema, names = plan.schema, plan.names
    if plan.empty:
        return FeedUnits(plan, [], lambda i: iter(()))
    if plan.mode == "diff":
        assert plan.end is not None and plan.end.snapshot is not None
        version, millis = plan.end.id, plan.end.snapshot.time_millis
        units = diff_units(plan.ends, table.core_options.deletion_vectors)
        snapshots = (plan.start.snapshot if plan.start is not None else None, plan.end.snapshot)

        def diff(i: int) -> Iterator[pa.Table]:
            before, after = units[i]
            for rows, kinds in diff_batches(table, before, after, names, snapshots):
                yield change_batch(table, rows, kinds, version, millis, schema, filter)

        return FeedUnits(plan, [sum(e.file.row_count for e in b + a) for b, a in units], diff)
    planned = plan.planned

    def read(i: int) -> Iterator[pa.Table]:
        unit = planned[i]
        for data, kinds in unit.batches(table, names):
            yield change_batch(table, data, kinds, unit.snapshot.id, unit.snapshot.time_millis, schema, filter)

    return FeedUnits(plan, [u.entry.file.row_count for u in planned], read)


def read_change_feed_df(spark: SparkSession, table: Table, start: Any = None, end: Any = None, *,
                        mode: str = "auto", columns: Sequence[str] | None = None,
                        filter: "ds.Expression | None" = None, consumer_id: str | None = None,
                        num_tasks: int | None = None) -> DataFrame:
    """`table.changes(start, end, mode=..., columns=..., filter=..., consumer_id=...)` as a DataFrame (same
    bounds: start exclusive, end inclusive; same errors, raised on the driver before any job)."""
    units = feed_units(table, start, end, mode=mode, columns=columns, filter=filter, consumer_id=consumer_id)
    out_schema = spark_schema(units.plan.schema)
    if not units.sizes:
        return spark.createDataFrame([], out_schema)
    return run_per_group(spark, units.sizes, units.read, out_schema, num_tasks)
