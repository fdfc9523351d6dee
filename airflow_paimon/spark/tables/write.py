"""A DataFrame of changes written to a Paimon table in ONE exactly-once commit.

Rows get their bucket (buckets.py), are repartitioned so that one task owns each (partition, bucket), are sorted
by key and version and checked for duplicate keys inside the task, and are written there with
``TableWrite.write_bucket`` starting at the sequence number the driver computed for that bucket from the base
snapshot. Tasks return their commit messages as JSON; the driver commits them all at once (commit user +
identifier). Nothing is visible before that commit: files of a job killed half-way are unreferenced orphans that
orphan cleanup removes.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from airflow_paimon.format import CommitMessage, Snapshot, Table
from airflow_paimon.format.bucketing import bucket_ids
from airflow_paimon.format.commit import LATEST, CommitId, Transaction
from airflow_paimon.format.deletion_vectors_write import DeletionVectorWriter
from airflow_paimon.format.dynamic_bucket import KnownBuckets
from airflow_paimon.format.errors import InvalidDataError, PaimonError
from airflow_paimon.format.kernels import check_unique_keys, last_of_each_key
from airflow_paimon.format.versions import kinds_to_write, version_sort_indices
from airflow_paimon.format.write import TableWrite

from ..schema_map import cast_to, exchange_schema, spark_schema, to_exchange
from ..tasks import bucket_groups
from .buckets import BUCKET_COLUMN, assign_buckets, bucket_key_schema, by_bucket
from .changelog import BucketChangelog, before_columns
from .dynamic import assign_on_driver, attach_index_files, dynamic_key_schema, with_known_buckets
from .task_errors import DUPLICATE_MARKER, task_errors

__all__ = ["KIND_COLUMN", "KIND_CODES", "WriteResult", "write_changes"]

KIND_COLUMN = "_VALUE_KIND"      # +I / -U / +U / -D (strings) or their byte codes 0..3
KIND_CODES = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}


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


def _kind_expr(df: DataFrame, kind_column: str | None) -> Any:
    if kind_column is None:
        return F.lit(0).cast("byte")
    if kind_column not in df.columns:
        raise PaimonError(f"the rows have no kind column {kind_column!r}")
    dtype = df.schema[kind_column].dataType
    c = F.col(kind_column)
    if isinstance(dtype, T.StringType):
        (first, first_code), *others = KIND_CODES.items()
        expr = F.when(F.trim(c) == first, F.lit(first_code))
        for name, code in others:
            expr = expr.when(F.trim(c) == name, F.lit(code))
        return expr.otherwise(F.lit(-1)).cast("byte")
    return c.cast("byte")


_MESSAGE_SCHEMA = T.StructType([
    T.StructField("message", T.StringType(), True),
    T.StructField("inserted", T.LongType(), True),
    T.StructField("updated", T.LongType(), True),
    T.StructField("deleted", T.LongType(), True),
])


def _write_task(table: Table, next_seq: dict[tuple[Any, ...], int], duplicates: str, what: str,
                changelog: BucketChangelog, assign: bool = False, kinds_given: bool = True,
                images: bool = False, deletion_vectors: DeletionVectorWriter | None = None,
                known: KnownBuckets | None = None) -> Any:
    logical = table.arrow_schema()
    # Primary-key tables and bucketed append tables hash their bucket key; unbucketed append tables use bucket 0;
    # dynamic-bucket tables take the buckets the driver assigned (`known`).
    bucket_keys = table.bucket_keys if table.is_primary_key or table.core_options.bucket >= 1 else []
    key_schema = dynamic_key_schema(table) if known is not None else \
        bucket_key_schema(table) if bucket_keys else None
    num_buckets = table.core_options.bucket
    names = logical.names
    pkeys = table.partition_keys
    keys = table.schema().trimmed_primary_keys if table.is_primary_key else []
    pk_all = table.primary_keys
    options = table.core_options
    seq_fields = [f for f in options.sequence_fields if f not in keys]
    xschema = exchange_schema(_MESSAGE_SCHEMA)
    part_schema = pa.schema([logical.field(p) for p in pkeys])
    image_columns = before_columns(table) if images else []

    def write_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parts = [b for b in batches if b.num_rows]
        if not parts:
            return
        data = pa.Table.from_batches(parts)
        if assign:
            if key_schema is None:
                buckets = np.zeros(data.num_rows, dtype=np.int32)
            elif known is not None:
                buckets = known.buckets(cast_to(data, key_schema))
            else:
                buckets = bucket_ids(cast_to(data, key_schema), num_buckets, table.core_options.bucket_function)
            data = data.append_column(BUCKET_COLUMN, pa.array(buckets, pa.int32()))
        if kinds_given:
            kinds_raw = data.column("__kind")
            codes = np.asarray(kinds_raw.drop_null().to_numpy())
            bad = int(((codes < 0) | (codes > 3)).sum()) + kinds_raw.null_count
            if bad:
                raise InvalidDataError(f"{bad} row(s) have an unknown row kind (expected +I, -U, +U or -D)")
        # rowkind.field and the ignore options, as the library's own writer applies them.
        data, kinds = kinds_to_write(options, data, data.column("__kind") if kinds_given else None, not keys)
        if kinds is not None:
            data = data.set_column(data.column_names.index("__kind"), "__kind", kinds)
        if not data.num_rows:
            return
        if known is not None and pc.min(data.column(BUCKET_COLUMN)).as_py() < 0:
            raise PaimonError("a row to write has no bucket assigned on the driver; nothing was committed")
        if pkeys:
            casted = cast_to(data, part_schema)
            for p in pkeys:
                data = data.set_column(data.column_names.index(p), p, casted.column(p))
        for k in pk_all:
            if data.column(k).null_count:
                raise InvalidDataError(f"primary-key column {k!r} is null in {data.column(k).null_count} row(s)")
        # Of several rows with one key, the newest in Paimon's order ends last (versions.py).
        order = version_sort_indices(data, [*pkeys, BUCKET_COLUMN, *keys], seq_fields, options.sequence_descending)
        groups = bucket_groups(data, pkeys, BUCKET_COLUMN, pa.array(order))
        # Every bucket of this task is checked before any file is written.
        for group in groups:
            if not keys:
                continue
            if duplicates == "error":
                bucket = group.bucket

                def message(key: str, extra: int) -> str:
                    return (f"{DUPLICATE_MARKER}: {what} has {extra} more row(s) than distinct primary keys in "
                            f"bucket {bucket} (first duplicate: {key}); each key may appear once. Nothing was "
                            "committed.")

                check_unique_keys(group.rows, keys, message, shown=[*pkeys, *keys], presorted=True)
            else:
                keep = last_of_each_key([group.rows.column(k) for k in keys], group.rows.num_rows)
                if not keep.all():
                    group.rows = group.rows.filter(pa.array(keep))
        writer = TableWrite(table)
        for group in groups:
            kinds = group.rows.column("__kind").combine_chunks().cast(pa.int8())
            rows = cast_to(group.rows, logical, names)
            first = next_seq.get((group.partition, group.bucket), 0)
            dictionary = changelog.dictionary(rows, kinds) if keys else None
            msg = writer.write_bucket(group.partition, group.bucket, rows, kinds if keys else None, first,
                                      dictionary=dictionary)
            if deletion_vectors is not None:
                deletion_vectors.settle(group.partition, msg)
            if keys:
                changelog.add(msg, group.partition, group.bucket, rows, kinds,
                              np.arange(first, first + rows.num_rows, dtype=np.int64),
                              group.rows.select(image_columns) if images else None, dictionary)
            counts = np.bincount(kinds.to_numpy(zero_copy_only=False).astype(np.int64), minlength=4)
            out = pa.table({"message": [json.dumps(msg.to_dict())], "inserted": [int(counts[0])],
                            "updated": [int(counts[2])], "deleted": [int(counts[1] + counts[3])]})
            yield from to_exchange(out, xschema).to_batches()

    return write_task


def write_changes(spark: SparkSession, table: Table, df: DataFrame, *, kind_column: str | None = KIND_COLUMN,
                  commit_user: str | None = None, commit_identifier: int | None = None,
                  base_snapshot: Any = LATEST, duplicates: str = "error", bucket_column: str | None = None,
                  num_tasks: int | None = None, commit: bool = True, commit_kind: str = "APPEND",
                  properties: dict[str, str] | None = None, what: str = "the data",
                  single_task: bool = False, transaction: Transaction | None = None,
                  before_images: bool = False) -> WriteResult:
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
    * the table's `changelog-producer` (input, lookup) gets its changelog in the same commit (tables/changelog.py);
      `before_images=True`: `df` also holds the before-images of the rows (`changelog.before_columns`, as a
      MERGE read them), so a `lookup` changelog needs no second read of the target.
    """
    if duplicates not in ("error", "last"):
        raise ValueError("duplicates must be 'error' or 'last'")
    # Refused here, on the driver, before a dynamic-bucket table's index files or any task's files are written.
    table.require_writable()
    tx = transaction
    if tx is None:
        tx = table.transaction(commit_id=CommitId.of(commit_user, commit_identifier), kind=commit_kind,
                               properties=properties, base=base_snapshot, commit_user=commit_user,
                               changelog=table.core_options.changelog_producer)
        if commit and tx.already_committed is not None:
            return WriteResult(tx.already_committed, already_committed=True)
    base = tx.base
    next_seq = table.next_sequence_numbers(base) if base is not None else {}
    target = spark_schema(table.arrow_schema())
    images = before_columns(table) if before_images else []
    unknown = [c for c in df.columns
               if c not in target.names and c not in (kind_column, bucket_column) and c not in images]
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
    cols += [F.col(c) for c in images]
    assign = False
    dynamic = None
    selected = df.select(*cols)
    seconds: dict[str, float] = {}
    if table.is_dynamic_bucket:
        # New keys' buckets depend on every key before them: assigned once, on the driver (tables/dynamic.py), from
        # rows kept for the write (a MERGE's rows come from a join that should not run twice).
        started = time.monotonic()
        bucket_column = None
        selected = selected.persist()
        try:
            with task_errors():
                dynamic = assign_on_driver(table, selected, base, "__kind", kinds_given, duplicates, what)
        except BaseException:
            selected.unpersist()
            raise
        seconds["assign_buckets"] = round(time.monotonic() - started, 3)
    if bucket_column is not None:
        prepared = df.select(*cols, F.col(bucket_column).cast("int").alias(BUCKET_COLUMN))
    elif single_task:
        prepared = selected.coalesce(1)
        assign = True
    else:
        prepared = assign_buckets(selected, table, BUCKET_COLUMN) if dynamic is None else \
            with_known_buckets(selected, table, dynamic.known, BUCKET_COLUMN)
        keys = [F.col(p) for p in table.partition_keys] + ([F.col(BUCKET_COLUMN)] if table.is_primary_key else [])
        prepared = by_bucket(prepared, keys, num_tasks)
    # A deletion-vector table's new rows leave level 0 in the same commit, as the library's own writes do (unless
    # the table is write-only: its compaction moves them).
    dv = DeletionVectorWriter(table, base) \
        if table.core_options.writes_settle_vectors and table.is_primary_key else None
    task = _write_task(table, next_seq, duplicates, what, BucketChangelog(table, base, tx.kind), assign, kinds_given,
                       before_images, dv, dynamic.known if dynamic is not None else None)
    started = time.monotonic()
    try:
        with task_errors():
            rows = prepared.mapInArrow(task, _MESSAGE_SCHEMA).collect()
    finally:
        if dynamic is not None:
            selected.unpersist()
    messages = [CommitMessage.from_dict(json.loads(r["message"])) for r in rows]
    if dynamic is not None:
        messages = attach_index_files(table, messages, dynamic.index_files)
    counts = {"inserted": sum(r["inserted"] for r in rows), "updated": sum(r["updated"] for r in rows),
              "deleted": sum(r["deleted"] for r in rows)}
    seconds["spark_job"] = round(time.monotonic() - started, 3)
    if not commit or not messages:
        return WriteResult(None, messages=messages, rows=counts, seconds=seconds)
    started = time.monotonic()
    snap = tx.commit(messages)
    seconds["commit"] = round(time.monotonic() - started, 3)
    return WriteResult(snap, messages=messages, rows=counts, seconds=seconds)
