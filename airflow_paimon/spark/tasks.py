"""Spreading work over Spark tasks: units the driver planned (splits, buckets, listing units) and rows Spark
shuffled by (partition, bucket).

Units: the driver knows the work and its sizes; `run_per_group` packs the units into balanced groups, starts one
task per group (``spark.range(groups).mapInArrow``: only the group number travels through Spark) and runs a
function per unit there; what the tasks return is collected or joined on. Rows: a task that received rows
hash-partitioned by (partition, bucket) cuts them into one group per bucket with `bucket_groups`.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from airflow_paimon.format.kernels import equal_runs

from .schema_map import exchange_schema, to_exchange

__all__ = ["balanced_groups", "contiguous_groups", "default_tasks", "run_groups", "run_per_group", "BucketRows",
           "bucket_groups", "estimated_bytes"]

BATCH_ROWS = 65536


def balanced_groups(sizes: Sequence[int], k: int) -> list[list[int]]:
    """Indices of `sizes` in k groups of about equal total (largest first, each to the lightest group)."""
    k = max(1, min(k, len(sizes)))
    heap = [(0, g) for g in range(k)]
    groups: list[list[int]] = [[] for _ in range(k)]
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        total, g = heapq.heappop(heap)
        groups[g].append(i)
        heapq.heappush(heap, (total + max(1, sizes[i]), g))
    return groups


def default_tasks(spark: SparkSession) -> int:
    """Twice the cores: room for uneven units without one straggler holding the job."""
    return max(1, int(spark.sparkContext.defaultParallelism) * 2)


def contiguous_groups(sizes: Sequence[int], k: int) -> list[list[int]]:
    """Indices of `sizes` in at most k runs of consecutive indices of about equal total: a task then holds one
    stretch of an ordered sequence (a feed's units), so outputs named by group keep that order."""
    k = max(1, min(k, len(sizes)))
    total = sum(max(1, s) for s in sizes)
    groups: list[list[int]] = [[]]
    done = 0
    for i, size in enumerate(sizes):
        if groups[-1] and len(groups) < k and done >= total * len(groups) / k:
            groups.append([])
        groups[-1].append(i)
        done += max(1, size)
    return groups if sizes else []


def run_per_group(spark: SparkSession, sizes: Sequence[int], work: Callable[[int], Iterable[pa.Table]],
                  schema: T.StructType, num_tasks: int | None = None) -> DataFrame:
    """A DataFrame of `schema` whose tasks run ``work(i)`` for every unit i (0 <= i < len(sizes)), one task per
    group of units of about equal total size (`num_tasks` groups at most; default: `default_tasks`).

    `work` runs on the executors: it must reach only what it closes over (shipped with the task). The tables it
    yields are cast to the exchange schema here (columns by name); empty ones are dropped."""
    if not sizes:
        return spark.createDataFrame([], schema)
    groups = balanced_groups(sizes, num_tasks or default_tasks(spark))

    def per_unit(group: int, units: list[int]) -> Iterator[pa.Table]:
        for i in units:
            yield from work(i)

    return run_groups(spark, groups, per_unit, schema)


def run_groups(spark: SparkSession, groups: Sequence[Sequence[int]],
               work: Callable[[int, list[int]], Iterable[pa.Table]], schema: T.StructType) -> DataFrame:
    """A DataFrame of `schema` with one task per group g, which runs ``work(g, groups[g])``; what `work` yields
    is cast to the exchange schema (columns by name), empty tables dropped."""
    if not groups:
        return spark.createDataFrame([], schema)
    listed = [list(g) for g in groups]
    xschema = exchange_schema(schema)

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for group in batch.column(0).to_numpy():
                for out in work(int(group), listed[int(group)]):
                    if out.num_rows:
                        yield from to_exchange(out, xschema).to_batches(max_chunksize=BATCH_ROWS)

    return spark.range(0, len(listed), 1, len(listed)).mapInArrow(task, schema)


@dataclass
class BucketRows:
    """The rows of one (partition, bucket) that a task received."""

    partition: tuple[Any, ...]
    bucket: int
    rows: pa.Table


def bucket_groups(data: pa.Table, partition_keys: Sequence[str], bucket_column: str,
                  order: pa.Array | Sequence[int] | None = None) -> list[BucketRows]:
    """`data` cut into one group per (partition, bucket), in that order.

    `order`: row indices that already sort `data` by partition and bucket (and maybe more, e.g. key and version);
    without it the rows are sorted by partition and bucket here, nulls first, keeping their order otherwise."""
    if order is None:
        order = pc.sort_indices(data, sort_keys=[(p, "ascending") for p in partition_keys] +
                                [(bucket_column, "ascending")], null_placement="at_start")
    data = data.take(order)
    groups = []
    for start, end in equal_runs([data.column(p) for p in partition_keys] + [data.column(bucket_column)],
                                 data.num_rows):
        part = data.slice(start, end - start)
        partition = tuple(part.column(p)[0].as_py() for p in partition_keys)
        groups.append(BucketRows(partition, int(part.column(bucket_column)[0].as_py()), part))
    return groups


def estimated_bytes(df: DataFrame) -> int | None:
    """Spark's own size estimate of `df` (for files: their size), without running a job; None if unknown."""
    try:
        size = df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
        value = int(size if isinstance(size, int) else size.toString())
    except Exception:  # noqa: BLE001 - Spark Connect, or no estimate
        return None
    return value if value < (1 << 62) else None
