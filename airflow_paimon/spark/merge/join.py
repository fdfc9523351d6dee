"""Source rows joined with their bucket of the target, in Arrow, one task per (partition, bucket).

Only buckets the source touches are read (all of them for NOT MATCHED BY SOURCE), and of them only the columns
the clauses need. A big source is shuffled by bucket; a small one is collected on the driver, checked, and
broadcast to tasks over the buckets it touches (no shuffle, no Python stage before the join). Either way every
bucket's source keys are checked for duplicates before it is joined.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from airflow_paimon.format import Split
from airflow_paimon.format.bucketing import bucket_ids
from airflow_paimon.format.dynamic_bucket import DynamicBucketAssigner
from airflow_paimon.format.kernels import check_unique_keys
from airflow_paimon.format.key_reads import read_split_of_keys
from airflow_paimon.format.read import read_split
from airflow_paimon.format.schema import SEQUENCE_NUMBER

from ..schema_map import cast_to, exchange_schema, to_exchange
from ..tables.buckets import BUCKET_COLUMN, assign_buckets, bucket_key_schema
from ..tables.dynamic import dynamic_key_schema, lookup_buckets
from ..tables.task_errors import DUPLICATE_MARKER
from ..tasks import BATCH_ROWS, bucket_groups, run_per_group
from .plan import TARGET_SEQUENCE, MergePlan

__all__ = ["JoinStats", "check_source_keys", "joined_rows"]


class JoinStats:
    """How much of the target the join tasks read (Spark accumulators, summed on the driver)."""

    def __init__(self, spark: SparkSession):
        sc = spark.sparkContext
        self.splits = sc.accumulator(0)
        self.rows = sc.accumulator(0)


def check_source_keys(keys: pa.Table, primary_keys: Sequence[str], where: str) -> None:
    """DuplicateKeyError when two source rows share a target primary key: MERGE cannot pick one."""
    def message(key: str, extra: int) -> str:
        return (f"{DUPLICATE_MARKER}: the MERGE source has several rows for one target primary key "
                f"({key}; {extra} extra row(s) in {where}). Can't execute this MERGE: a target row would match "
                "more than one source row. Nothing was committed.")

    check_unique_keys(keys, primary_keys, message)


def _positions(n: int) -> pa.Array:
    return pa.array(np.arange(n, dtype=np.int64))


class _Joiner:
    """Joins the source rows of one (partition, bucket) with that bucket of the target."""

    def __init__(self, plan: MergePlan, stats: JoinStats):
        logical = plan.table.arrow_schema()
        self.table, self.on, self.full = plan.table, plan.on, plan.full
        self.src_names, self.tcols = plan.source_names, plan.target_columns
        self.on_schema = pa.schema([logical.field(c) for c in plan.on])
        self.images = plan.before_images
        self.read_columns = plan.target_columns + ([SEQUENCE_NUMBER] if self.images else [])
        self.t_schema = pa.schema([pa.field(c, logical.field(c).type, True) for c in plan.target_columns] +
                                  ([pa.field(SEQUENCE_NUMBER, pa.int64(), True)] if self.images else []))
        self.split_acc, self.rows_acc = stats.splits, stats.rows

    def check_unique(self, src: pa.Table, where: str) -> None:
        check_source_keys(cast_to(src, self.on_schema), self.table.primary_keys, where)

    def join(self, src: pa.Table, split: Split | None, bucket: int) -> pa.Table:
        src = src.select(self.src_names)
        keys_src = cast_to(src, self.on_schema)
        if split is not None:
            if self.images and not self.full:
                # A `lookup` target keeps lookup files of its data files: only the source keys' rows are taken
                # from them, so the read follows the source, not the bucket (every column is read for the
                # before-images).
                target = read_split_of_keys(self.table, split, self.read_columns, keys_src)
            else:
                target = read_split(self.table, split, self.read_columns)
            self.split_acc.add(1)
            self.rows_acc.add(target.num_rows)
        else:
            target = self.t_schema.empty_table()
        # Row indices into src (ji) and target (jt) of each joined row; null: no such row.
        ji: pa.Array
        jt: pa.Array
        if target.num_rows == 0 and not self.full:
            ji, jt = _positions(src.num_rows), pa.nulls(src.num_rows, pa.int64())
        elif src.num_rows == 0 and self.full:
            ji, jt = pa.nulls(target.num_rows, pa.int64()), _positions(target.num_rows)
        else:
            left = keys_src.append_column("__is", _positions(src.num_rows))
            right = cast_to(target, self.on_schema).append_column("__it", _positions(target.num_rows))
            # Acero builds its hash table on the right input: the source side, the small one.
            j = right.join(left, self.on, join_type="full outer" if self.full else "right outer", use_threads=False)
            ji, jt = j.column("__is").combine_chunks(), j.column("__it").combine_chunks()
        s_rows = src.take(cast(pa.Int64Array, ji))
        t_rows = target.take(cast(pa.Int64Array, jt))
        cols: dict[str, pa.Array | pa.ChunkedArray] = {
            f"__s_{i}": s_rows.column(n) for i, n in enumerate(self.src_names)}
        cols.update({f"__t_{i}": t_rows.column(n) for i, n in enumerate(self.tcols)})
        cols["__has_s"] = pc.is_valid(ji)
        cols["__has_t"] = pc.is_valid(jt)
        cols[BUCKET_COLUMN] = pa.array(np.full(len(ji), bucket, dtype=np.int32))
        if self.images:
            cols[TARGET_SEQUENCE] = t_rows.column(SEQUENCE_NUMBER)
        return pa.table(cols)


def _shuffled_join_task(plan: MergePlan, joiner: _Joiner, has_marker: bool) -> Any:
    """Tasks fed with source rows shuffled by (partition, bucket)."""
    pkeys = plan.table.partition_keys
    part_schema = pa.schema([plan.table.arrow_schema().field(p) for p in pkeys])
    splits, xschema = plan.splits, exchange_schema(plan.joined_schema)

    def join_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parts = [b for b in batches if b.num_rows]
        if not parts:
            return
        data = pa.Table.from_batches(parts)
        casted = cast_to(data, part_schema)
        for p in pkeys:
            data = data.set_column(data.column_names.index(p), p, casted.column(p))
        groups = bucket_groups(data, pkeys, BUCKET_COLUMN)
        for group in groups:
            if has_marker:
                marker = pc.equal(group.rows.column("__marker"), pa.scalar(True)).fill_null(False)
                group.rows = group.rows.filter(~np.asarray(marker.to_numpy(zero_copy_only=False), dtype=bool))
            joiner.check_unique(group.rows, f"bucket {group.bucket}")
        for group in groups:
            joined = joiner.join(group.rows, splits.get((group.partition, group.bucket)), group.bucket)
            if joined.num_rows:
                yield from to_exchange(joined, xschema).to_batches(max_chunksize=BATCH_ROWS)

    return join_task


def _joined_by_shuffle(spark: SparkSession, plan: MergePlan, joiner: _Joiner) -> DataFrame:
    table = plan.table
    if table.is_dynamic_bucket:
        src = lookup_buckets(plan.source, table, plan.tx.base, BUCKET_COLUMN)
    else:
        src = assign_buckets(plan.source, table, BUCKET_COLUMN)
    has_marker = False
    if plan.full and plan.splits:
        # One marker row per target bucket, so that buckets without source rows get a task too.
        pschema = T.StructType([T.StructField(p, plan.target_types[p], True) for p in table.partition_keys] +
                               [T.StructField(BUCKET_COLUMN, T.IntegerType(), True)])
        markers = spark.createDataFrame([tuple(p) + (b,) for (p, b) in plan.splits], pschema)
        src = src.withColumn("__marker", F.lit(False)).unionByName(
            markers.withColumn("__marker", F.lit(True)), allowMissingColumns=True)
        has_marker = True
    src = src.repartition(max(1, plan.num_tasks), *[F.col(p) for p in table.partition_keys], F.col(BUCKET_COLUMN))
    return src.mapInArrow(_shuffled_join_task(plan, joiner, has_marker), plan.joined_schema)


def _joined_from_small_source(spark: SparkSession, plan: MergePlan, joiner: _Joiner) -> DataFrame:
    """The driver collects the source (Arrow), checks its keys, finds the buckets it touches and broadcasts it;
    tasks over the touched buckets read the target and join."""
    table = plan.table
    logical = table.arrow_schema()
    pkeys = table.partition_keys
    data = plan.source.toArrow()
    if table.is_dynamic_bucket:
        # A key the target holds is in its HASH-index bucket; a new key (-1) has no target row to join.
        buckets = DynamicBucketAssigner(table, plan.tx.base).lookup_rows(cast_to(data, dynamic_key_schema(table)))
    else:
        buckets = bucket_ids(cast_to(data, bucket_key_schema(table)), table.core_options.bucket,
                             table.core_options.bucket_function)
    parts = cast_to(data, pa.schema([logical.field(p) for p in pkeys]))
    keyed = pa.table({**{p: parts.column(p) for p in pkeys}, BUCKET_COLUMN: pa.array(buckets, pa.int32())})
    order = pc.sort_indices(keyed, sort_keys=[(c, "ascending") for c in keyed.column_names],
                            null_placement="at_start")
    data = data.take(order)
    joiner.check_unique(data, "the source")
    groups = {(g.partition, g.bucket): g for g in bucket_groups(keyed, pkeys, BUCKET_COLUMN, order)}
    starts = {}
    start = 0
    for key, g in groups.items():
        starts[key] = (start, start + g.rows.num_rows)
        start += g.rows.num_rows
    keys = list(groups) + ([k for k in plan.splits if k not in groups] if plan.full else [])
    sizes = [(plan.splits[k].row_count if k in plan.splits else 0) + (groups[k].rows.num_rows if k in groups else 0)
             for k in keys]
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as w:
        w.write_table(data)
    shipped = spark.sparkContext.broadcast(sink.getvalue().to_pybytes())
    empty = data.schema.empty_table()
    task_splits = {k: plan.splits.get(k) for k in keys}
    received: list[pa.Table] = []

    def join(i: int) -> Iterator[pa.Table]:
        if not received:
            received.append(pa.ipc.open_stream(shipped.value).read_all())
        key = keys[i]
        begin, end = starts.get(key, (0, 0))
        group = received[0].slice(begin, end - begin) if end > begin else empty
        yield joiner.join(group, task_splits[key], key[1])

    return run_per_group(spark, sizes, join, plan.joined_schema, plan.num_tasks)


def joined_rows(spark: SparkSession, plan: MergePlan, stats: JoinStats) -> DataFrame:
    """The joined rows (see `MergePlan`) of every bucket the MERGE touches."""
    joiner = _Joiner(plan, stats)
    if plan.small_source:
        return _joined_from_small_source(spark, plan, joiner)
    return _joined_by_shuffle(spark, plan, joiner)
