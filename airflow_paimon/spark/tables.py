"""Paimon tables in Spark: read a table (any snapshot, tag or time) as a DataFrame, write a DataFrame of changes.

Reading: the driver plans splits with the format library (partition and key-range pruning, projection), ships
them to tasks, and each task reads its splits with ``read_split`` (merge-on-read) inside ``mapInArrow``.

Writing: rows get the bucket Paimon gives their key (``format.bucketing.bucket_ids``, the very function the
library's own writer uses), are repartitioned so that one task owns each (partition, bucket), are sorted by key
and checked for duplicate keys inside the task, and are written there with ``TableWrite.write_bucket`` starting at
the sequence number the driver computed for that bucket from the base snapshot. Tasks return their commit
messages as JSON; the driver commits them all in ONE exactly-once commit (commit user + identifier). Nothing is
visible before that commit: files of a job killed half-way are unreferenced orphans that orphan cleanup removes.
"""

from __future__ import annotations

import heapq
import importlib
import json
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from airflow_paimon.format import CommitMessage, Snapshot, Split, Table
from airflow_paimon.format.bucketing import bucket_ids
from airflow_paimon.format.commit import LATEST, CommitId, Transaction
from airflow_paimon.format.errors import DuplicateKeyError, InvalidDataError, PaimonError
from airflow_paimon.format.read import read_split
from airflow_paimon.format.scan import ScanPlanner
from airflow_paimon.format.versions import kinds_to_write, version_sort_indices
from airflow_paimon.format.write import TableWrite

from .schema_map import cast_to, exchange_schema, spark_schema, to_exchange

if TYPE_CHECKING:
    import pyarrow.dataset as ds

__all__ = [
    "KIND_COLUMN", "CHANGE_COLUMN", "BUCKET_COLUMN", "KIND_CODES", "DuplicateKeyError", "WriteResult",
    "read_table_df", "read_changes_df", "splits_to_df", "assign_buckets", "write_changes",
    "diff_rows", "partition_filter", "unwrap_task_error",
]

KIND_COLUMN = "_VALUE_KIND"      # +I / -U / +U / -D (strings) or their byte codes 0..3
CHANGE_COLUMN = "_change"        # the kind column of change (diff) DataFrames
BUCKET_COLUMN = "__bucket"
KIND_CODES = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}
DUPLICATE_MARKER = "PAIMON_DUPLICATE_KEY"


_TASK_ERROR = re.compile(r"^(airflow_paimon\.[\w.]+)\.(\w+Error): (.+)$", re.MULTILINE)


def unwrap_task_error(exc: BaseException) -> BaseException:
    """The format library's error a Spark task raised, recovered from the JVM exception text when possible
    (Spark reports a Python task's exception as text inside its own exception)."""
    text = str(exc)
    if DUPLICATE_MARKER in text:
        start = text.index(DUPLICATE_MARKER) + len(DUPLICATE_MARKER) + 1
        line = text[start:].splitlines()[0].strip() if text[start:] else ""
        return DuplicateKeyError(line or text)
    found = _TASK_ERROR.findall(text)
    if found:
        module, name, message = found[-1]
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            return exc
        if isinstance(cls, type) and issubclass(cls, PaimonError):
            return cls(message.strip())
    return exc


def estimated_bytes(df: DataFrame) -> int | None:
    """Spark's own size estimate of `df` (for files: their size), without running a job; None if unknown."""
    try:
        size = df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
        value = int(size if isinstance(size, int) else size.toString())
    except Exception:  # noqa: BLE001 - Spark Connect, or no estimate
        return None
    return value if value < (1 << 62) else None


# =====================================================================================================
# Reading
# =====================================================================================================

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


def _and(a: ds.Expression | None, b: ds.Expression | None) -> ds.Expression | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b


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


def _default_tasks(spark: SparkSession) -> int:
    return max(1, spark.sparkContext.defaultParallelism * 2)


def _logical_schema(table: Table, columns: Sequence[str] | None) -> pa.Schema:
    logical = table.arrow_schema()
    names = list(columns) if columns is not None else logical.names
    unknown = [c for c in names if c not in logical.names]
    if unknown:
        raise PaimonError(f"columns {unknown} are not in the schema of {table.identifier}: {logical.names}")
    return pa.schema([pa.field(n, logical.field(n).type, True) for n in names])


def splits_to_df(spark: SparkSession, table: Table, splits: Sequence[Split], columns: Sequence[str] | None = None,
                 filter: ds.Expression | None = None, num_tasks: int | None = None) -> DataFrame:
    """A DataFrame whose tasks read `splits` (merge-on-read, projected, filtered) with the format library."""
    out_arrow = _logical_schema(table, columns)
    sschema = spark_schema(out_arrow)
    if not splits:
        return spark.createDataFrame([], sschema)
    xschema = exchange_schema(sschema)
    names = out_arrow.names
    splits = list(splits)
    groups = balanced_groups([s.row_count for s in splits], num_tasks or _default_tasks(spark))

    def read_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task_id in batch.column(0).to_pylist():
                for i in groups[task_id]:
                    data = read_split(table, splits[i], names, filter)
                    if data.num_rows:
                        yield from to_exchange(data, xschema).to_batches(max_chunksize=65536)

    return spark.range(0, len(groups), 1, len(groups)).mapInArrow(read_task, sschema)


def read_table_df(spark: SparkSession, table: Table, *, snapshot_id: int | None = None, tag: str | None = None,
                  as_of: Any = None, snapshot: Snapshot | None = None, columns: Sequence[str] | None = None,
                  filter: ds.Expression | None = None, partitions: Sequence[Mapping[str, Any]] | None = None,
                  num_tasks: int | None = None) -> DataFrame:
    """Rows of `table` at the latest snapshot (or the snapshot, tag or time given) as a Spark DataFrame.

    `columns` projects, `partitions` (list of {partition column: value}) and `filter` (a pyarrow dataset
    expression) prune splits and files on the driver and filter rows in the tasks.
    """
    snap = snapshot if snapshot is not None else table.resolve_snapshot(snapshot_id, tag, as_of)
    expr = _and(filter, partition_filter(table, partitions))
    splits = ScanPlanner(table).plan(table.file_entries(snap), expr, snap.id) if snap is not None else []
    return splits_to_df(spark, table, splits, columns, expr, num_tasks)


# ---- changes between two snapshots -----------------------------------------------------------------

def _null_safe_equal(a: pa.ChunkedArray | pa.Array, b: pa.ChunkedArray | pa.Array) -> np.ndarray:
    eq = pc.equal(a, b)
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    eq = pc.or_kleene(eq, both_null)
    return pc.fill_null(eq, False).to_numpy(zero_copy_only=False)


def diff_rows(before: pa.Table, after: pa.Table, keys: Sequence[str],
              change_column: str = CHANGE_COLUMN) -> pa.Table:
    """Rows that differ between two key-unique tables: +I (only after), +U (changed, after's values),
    -D (only before, before's values); `change_column` holds the kind."""
    names = after.column_names
    before = before.select(names)
    a = before.append_column("__ia", pa.array(np.arange(before.num_rows, dtype=np.int64)))
    b = after.append_column("__ib", pa.array(np.arange(after.num_rows, dtype=np.int64)))
    j = a.select(list(keys) + ["__ia"]).join(b.select(list(keys) + ["__ib"]), list(keys), join_type="full outer")
    ia = j.column("__ia")
    ib = j.column("__ib")
    has_a = pc.is_valid(ia).to_numpy(zero_copy_only=False)
    has_b = pc.is_valid(ib).to_numpy(zero_copy_only=False)
    ia_np = pc.fill_null(ia, 0).to_numpy(zero_copy_only=False)
    ib_np = pc.fill_null(ib, 0).to_numpy(zero_copy_only=False)
    parts = []
    only_b = has_b & ~has_a
    if only_b.any():
        rows = after.take(pa.array(ib_np[only_b]))
        parts.append(rows.append_column(change_column, pa.array(["+I"] * rows.num_rows, pa.string())))
    both = has_a & has_b
    if both.any():
        ra = before.take(pa.array(ia_np[both]))
        rb = after.take(pa.array(ib_np[both]))
        same = np.ones(rb.num_rows, dtype=bool)
        for n in names:
            if n in keys:
                continue
            same &= _null_safe_equal(ra.column(n), rb.column(n))
        if not same.all():
            rows = rb.filter(pa.array(~same))
            parts.append(rows.append_column(change_column, pa.array(["+U"] * rows.num_rows, pa.string())))
    only_a = has_a & ~has_b
    if only_a.any():
        rows = before.take(pa.array(ia_np[only_a]))
        parts.append(rows.append_column(change_column, pa.array(["-D"] * rows.num_rows, pa.string())))
    if not parts:
        return after.schema.empty_table().append_column(change_column, pa.array([], pa.string()))
    return pa.concat_tables(parts)


def read_changes_df(spark: SparkSession, table: Table, before: Snapshot | None, after: Snapshot | None,
                    columns: Sequence[str] | None = None, change_column: str = CHANGE_COLUMN,
                    num_tasks: int | None = None) -> DataFrame:
    """The rows that differ between snapshots `before` and `after` (tags are snapshots too), with a
    `change_column` of +I / +U / -D. Only buckets whose files differ are read."""
    if not table.is_primary_key:
        raise PaimonError(f"changes between snapshots need a primary-key table; {table.identifier} has no primary key")
    out_arrow = _logical_schema(table, columns)
    keys = [k for k in table.primary_keys]
    read_cols = list(dict.fromkeys(list(keys) + out_arrow.names))
    planner = ScanPlanner(table)
    splits_a = {(s.partition_bytes, s.bucket): s for s in
                (planner.plan(table.file_entries(before), None, before.id) if before is not None else [])}
    splits_b = {(s.partition_bytes, s.bucket): s for s in
                (planner.plan(table.file_entries(after), None, after.id) if after is not None else [])}
    pairs = []
    for key in sorted(set(splits_a) | set(splits_b), key=lambda k: (k[0], k[1])):
        sa, sb = splits_a.get(key), splits_b.get(key)
        names_a = {f.file_name for f in sa.files} if sa is not None else set()
        names_b = {f.file_name for f in sb.files} if sb is not None else set()
        if names_a != names_b:
            pairs.append((sa, sb))
    sschema = spark_schema(out_arrow).add(T.StructField(change_column, T.StringType(), True))
    if not pairs:
        return spark.createDataFrame([], sschema)
    xschema = exchange_schema(sschema)
    groups = balanced_groups([(a.row_count if a else 0) + (b.row_count if b else 0) for a, b in pairs],
                       num_tasks or _default_tasks(spark))
    logical = table.arrow_schema()
    empty = pa.schema([logical.field(n) for n in read_cols]).empty_table()

    def diff_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task_id in batch.column(0).to_pylist():
                for i in groups[task_id]:
                    sa, sb = pairs[i]
                    ta = read_split(table, sa, read_cols) if sa is not None else empty
                    tb = read_split(table, sb, read_cols) if sb is not None else empty
                    d = diff_rows(ta, tb, keys, change_column)
                    if d.num_rows:
                        yield from to_exchange(d, xschema).to_batches(max_chunksize=65536)

    return spark.range(0, len(groups), 1, len(groups)).mapInArrow(diff_task, sschema)


# =====================================================================================================
# Writing
# =====================================================================================================

@dataclass
class WriteResult:
    """What `write_changes` did: the snapshot (new, or the earlier one holding the same commit)."""

    snapshot: Snapshot | None
    already_committed: bool = False
    messages: list[CommitMessage] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def snapshot_id(self) -> int | None:
        return self.snapshot.id if self.snapshot is not None else None


def _target_spark_schema(table: Table) -> T.StructType:
    return spark_schema(table.arrow_schema())


def assign_buckets(df: DataFrame, table: Table, bucket_column: str = BUCKET_COLUMN) -> DataFrame:
    """`df` (with the table's bucket-key columns) plus the bucket Paimon gives each row (int)."""
    out_schema = T.StructType(df.schema.fields + [T.StructField(bucket_column, T.IntegerType(), True)])
    xschema = exchange_schema(out_schema)
    if not table.is_primary_key:
        return df.withColumn(bucket_column, F.lit(0).cast("int"))
    logical = table.arrow_schema()
    bucket_keys = table.bucket_keys
    key_schema = pa.schema([pa.field(k, logical.field(k).type, True) for k in bucket_keys])
    missing = [k for k in bucket_keys if k not in df.columns]
    if missing:
        raise PaimonError(f"the rows have no bucket-key column(s) {missing} of {table.identifier}")
    num_buckets = table.core_options.bucket

    def bucket_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            data = pa.Table.from_batches([batch])
            keys = cast_to(data, key_schema)
            buckets = bucket_ids(keys, num_buckets)
            data = data.append_column(bucket_column, pa.array(buckets, pa.int32()))
            yield from to_exchange(data, xschema).to_batches()

    return df.mapInArrow(bucket_task, out_schema)


def _kind_expr(df: DataFrame, kind_column: str | None) -> Any:
    if kind_column is None:
        return F.lit(0).cast("byte")
    if kind_column not in df.columns:
        raise PaimonError(f"the rows have no kind column {kind_column!r}")
    dtype = df.schema[kind_column].dataType
    c = F.col(kind_column)
    if isinstance(dtype, T.StringType):
        expr = None
        for name, code in KIND_CODES.items():
            expr = F.when(F.trim(c) == name, F.lit(code)) if expr is None else expr.when(F.trim(c) == name, F.lit(code))
        return expr.otherwise(F.lit(-1)).cast("byte")
    return c.cast("byte")


def equal_runs(columns: Sequence[pa.ChunkedArray | pa.Array], n: int) -> list[tuple[int, int]]:
    """(start, end) of runs of equal (null-safe) values over `columns` of sorted data."""
    if n == 0:
        return []
    differs = np.zeros(max(n - 1, 0), dtype=bool)
    for col in columns:
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        differs |= ~_null_safe_equal(col.slice(0, n - 1), col.slice(1))
    cuts = np.flatnonzero(differs) + 1
    starts = np.concatenate([[0], cuts]).astype(np.int64)
    ends = np.concatenate([cuts, [n]]).astype(np.int64)
    return list(zip(starts.tolist(), ends.tolist()))


def key_text(rows: pa.Table, keys: Sequence[str], i: int) -> str:
    return ", ".join(f"{k}={rows.column(k)[i].as_py()!r}" for k in keys)


_MESSAGE_SCHEMA = T.StructType([
    T.StructField("message", T.StringType(), True),
    T.StructField("inserted", T.LongType(), True),
    T.StructField("updated", T.LongType(), True),
    T.StructField("deleted", T.LongType(), True),
])


def _write_task(table: Table, next_seq: dict[tuple, int], bucket_column: str, duplicates: str,
                what: str, assign: bool = False, kinds_given: bool = True) -> Any:
    logical = table.arrow_schema()
    bucket_keys = table.bucket_keys if table.is_primary_key else []
    key_schema = pa.schema([pa.field(k, logical.field(k).type, True) for k in bucket_keys])
    num_buckets = table.core_options.bucket
    names = logical.names
    pkeys = table.partition_keys
    keys = table.schema().trimmed_primary_keys if table.is_primary_key else []
    pk_all = table.primary_keys
    options = table.core_options
    seq_fields = [f for f in options.sequence_fields if f not in keys]
    xschema = exchange_schema(_MESSAGE_SCHEMA)
    part_schema = pa.schema([logical.field(p) for p in pkeys])

    def write_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parts = [b for b in batches if b.num_rows]
        if not parts:
            return
        data = pa.Table.from_batches(parts)
        if assign:
            buckets = bucket_ids(cast_to(data, key_schema), num_buckets) if bucket_keys else \
                np.zeros(data.num_rows, dtype=np.int32)
            data = data.append_column(bucket_column, pa.array(buckets, pa.int32()))
        if kinds_given:
            kinds_raw = data.column("__kind")
            bad = pc.sum(pc.or_(pc.less(kinds_raw, 0), pc.greater(kinds_raw, 3))).as_py() or 0
            if bad or kinds_raw.null_count:
                raise InvalidDataError(f"{bad + kinds_raw.null_count} row(s) have an unknown row kind "
                                       "(expected +I, -U, +U or -D)")
        # rowkind.field and the ignore options, as the library's own writer applies them.
        data, kinds = kinds_to_write(options, data, data.column("__kind") if kinds_given else None, not keys)
        if kinds is not None:
            data = data.set_column(data.column_names.index("__kind"), "__kind", kinds)
        if not data.num_rows:
            return
        if pkeys:
            casted = cast_to(data, part_schema)
            for p in pkeys:
                data = data.set_column(data.column_names.index(p), p, casted.column(p))
        for k in pk_all:
            if data.column(k).null_count:
                raise InvalidDataError(f"primary-key column {k!r} is null in {data.column(k).null_count} row(s)")
        # Of several rows with one key, the newest in Paimon's order ends last (versions.py).
        order = version_sort_indices(data, [*pkeys, bucket_column, *keys], seq_fields, options.sequence_descending)
        data = data.take(pa.array(order))
        # Every bucket of this task is checked before any file is written.
        groups = []
        for start, end in equal_runs([data.column(p) for p in pkeys] + [data.column(bucket_column)], data.num_rows):
            part = data.slice(start, end - start)
            partition = tuple(part.column(p)[0].as_py() for p in pkeys)
            bucket = int(part.column(bucket_column)[0].as_py())
            if keys:
                runs = equal_runs([part.column(k) for k in keys], part.num_rows)
                if len(runs) != part.num_rows:
                    if duplicates == "error":
                        first = next(s for s, e in runs if e - s > 1)
                        count = part.num_rows - len(runs)
                        raise DuplicateKeyError(
                            f"{DUPLICATE_MARKER}: {what} has {count} more row(s) than distinct primary keys in "
                            f"bucket {bucket} (first duplicate: {key_text(part, list(pkeys) + keys, first)}); "
                            "each key may appear once. Nothing was committed.")
                    last = np.array([e - 1 for s, e in runs], dtype=np.int64)
                    part = part.take(pa.array(last))
            groups.append((partition, bucket, part))
        writer = TableWrite(table)
        for partition, bucket, part in groups:
            kinds = part.column("__kind").combine_chunks().cast(pa.int8())
            rows = cast_to(part, logical, names)
            msg = writer.write_bucket(partition, bucket, rows, kinds if keys else None,
                                      next_seq.get((partition, bucket), 0))
            counts = np.bincount(kinds.to_numpy(zero_copy_only=False).astype(np.int64), minlength=4)
            out = pa.table({"message": [json.dumps(msg.to_dict())], "inserted": [int(counts[0])],
                            "updated": [int(counts[2])], "deleted": [int(counts[1] + counts[3])]})
            yield from to_exchange(out, xschema).to_batches()

    return write_task


def by_bucket(df: DataFrame, keys: list, num_tasks: int | None) -> DataFrame:
    """`df` hash-partitioned by `keys`, so that all rows of a (partition, bucket) meet in one task.

    Without `num_tasks`, Spark's adaptive execution may coalesce small partitions (whole partitions only, so a
    bucket still stays in one task): a small increment is written by few tasks and needs few Python workers."""
    if not keys:
        return df.repartition(1)
    if num_tasks is None:
        return df.repartition(*keys)
    return df.repartition(max(1, num_tasks), *keys)


def write_changes(spark: SparkSession, table: Table, df: DataFrame, *, kind_column: str | None = KIND_COLUMN,
                  commit_user: str | None = None, commit_identifier: int | None = None,
                  base_snapshot: Any = LATEST, duplicates: str = "error", bucket_column: str | None = None,
                  num_tasks: int | None = None, commit: bool = True, commit_kind: str = "APPEND",
                  properties: dict[str, str] | None = None, what: str = "the data",
                  single_task: bool = False, transaction: Transaction | None = None) -> WriteResult:
    """Write the rows of `df` (table columns by name, plus `kind_column`: +I/+U/-U/-D or 0..3; absent = +I)
    and commit them once.

    * `base_snapshot`: the snapshot the changes were computed against (default: the latest); sequence numbers
      continue from it and the commit refuses concurrent changes to the same buckets after it.
    * `duplicates`: ``"error"`` (several rows with one key: DuplicateKeyError, nothing committed) or ``"last"``
      (keep the row with the highest sequence-field values in Paimon's order, else an arbitrary one).
    * without `kind_column`, a table with ``rowkind.field`` takes each row's kind from that column; with
      ``ignore-delete`` (``ignore-update-before``) retractions (-U rows) are not written, as Paimon's writers do.
    * `bucket_column`: `df` already holds each row's bucket in this column AND is partitioned so that one
      partition holds all rows of a (partition, bucket): skip the bucket assignment and the shuffle.
    * `single_task=True`: one task reads all rows, assigns their buckets and writes every bucket (no shuffle):
      for small inputs, where starting Python workers on every core costs more than the work.
    * `commit=False` writes the files and returns the messages without committing.
    * `transaction`: the commit in progress of a caller that already looked for an earlier landing of it (every
      look reads each retained snapshot and tag); it replaces the commit arguments and `base_snapshot`, and the
      commit itself still refuses a second landing.
    """
    if duplicates not in ("error", "last"):
        raise ValueError("duplicates must be 'error' or 'last'")
    tx = transaction
    if tx is None:
        tx = table.transaction(commit_id=CommitId.of(commit_user, commit_identifier), kind=commit_kind,
                               properties=properties, base=base_snapshot, commit_user=commit_user)
        if commit and tx.already_committed is not None:
            return WriteResult(tx.already_committed, already_committed=True)
    base = tx.base
    next_seq = table.next_sequence_numbers(base) if base is not None else {}
    target = _target_spark_schema(table)
    unknown = [c for c in df.columns if c not in target.names and c not in (kind_column, bucket_column)]
    if unknown:
        raise PaimonError(f"columns {unknown} are not in the schema of {table.identifier}: {target.names}")
    if table.is_primary_key:
        absent_keys = [k for k in table.primary_keys if k not in df.columns]
        if absent_keys:
            raise PaimonError(f"the rows have no primary-key column(s) {absent_keys}")
    cols = []
    for f in target.fields:
        if f.name in df.columns:
            cols.append(F.col(f.name).cast(f.dataType).alias(f.name))
        else:
            cols.append(F.lit(None).cast(f.dataType).alias(f.name))
    kinds_given = kind_column is not None or not table.core_options.rowkind_field
    cols.append(_kind_expr(df, kind_column).alias("__kind"))
    assign = False
    if bucket_column is not None:
        prepared = df.select(*cols, F.col(bucket_column).cast("int").alias(BUCKET_COLUMN))
    elif single_task:
        prepared = df.select(*cols).coalesce(1)
        assign = True
    else:
        prepared = assign_buckets(df.select(*cols), table, BUCKET_COLUMN)
        keys = [F.col(p) for p in table.partition_keys] + ([F.col(BUCKET_COLUMN)] if table.is_primary_key else [])
        prepared = by_bucket(prepared, keys, num_tasks)
    task = _write_task(table, next_seq, BUCKET_COLUMN, duplicates, what, assign, kinds_given)
    started = time.monotonic()
    try:
        rows = prepared.mapInArrow(task, _MESSAGE_SCHEMA).collect()
    except Exception as e:  # noqa: BLE001 - Spark wraps task errors in JVM exceptions
        err = unwrap_task_error(e)
        if err is e:
            raise
        raise err from None
    messages = [CommitMessage.from_dict(json.loads(r["message"])) for r in rows]
    counts = {"inserted": sum(r["inserted"] for r in rows), "updated": sum(r["updated"] for r in rows),
              "deleted": sum(r["deleted"] for r in rows)}
    seconds = {"spark_job": round(time.monotonic() - started, 3)}
    if not commit or not messages:
        return WriteResult(None, messages=messages, rows=counts, seconds=seconds)
    started = time.monotonic()
    snap = tx.commit(messages)
    seconds["commit"] = round(time.monotonic() - started, 3)
    return WriteResult(snap, messages=messages, rows=counts, seconds=seconds)
