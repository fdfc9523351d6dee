"""MERGE INTO a Paimon primary-key table on Spark, with cost that follows the increment.

Semantics are those of Paimon's Spark ``MERGE INTO`` on primary-key tables:

* the source is matched to the target on the ``on`` columns (default: the target's primary key; they must
  contain it), the target is aliased ``t`` and the source ``s``; for each row the first clause of its kind
  (matched / not matched / not matched by source) whose condition holds applies;
* several source rows for one primary key are an error (DuplicateKeyError) and nothing is committed;
* primary-key columns cannot be updated;
* a table with ``sequence.field`` keeps the newest version: merge-on-read already orders versions by it (in
  Paimon's order: a null is older than any value; ``sequence.field.sort-order``), and matched clauses skip source
  rows whose sequence fields are older than the target row's in that same order, so an older increment merged
  after a newer one changes nothing it should not;
* a plain upsert of a table with ``rowkind.field`` takes each source row's kind from that column (a '-D' row
  deletes its key); other clauses decide their rows' kinds themselves. With ``ignore-delete`` no delete is
  written (Paimon's writers drop them), so DELETE clauses change nothing.

How it runs:

* a plain upsert (``[matched_update('*'), not_matched_insert('*')]`` without conditions, ``on`` = key) reads NO
  target data: the source rows are written as new level-0 files with new sequence numbers and merge-on-read
  does the rest. Local Parquet files of up to ``driver_bytes`` (64 MiB) are written by the application itself
  without any Spark job (see driver_upsert.py); a small increment of other files (Spark's size estimate up to
  ``single_task_bytes``, 32 MiB) is read, bucketed and written by one task, without a shuffle; a bigger one is
  shuffled by bucket to many tasks;
* any other MERGE groups the source by (partition, bucket), and the one task that owns a bucket reads that
  bucket of the target -- only the columns the clauses need -- joins it with its source rows in Arrow, and
  hands only matched / unmatched source rows (plus, for NOT MATCHED BY SOURCE, the bucket's other target
  rows) to Spark, which evaluates the clauses' SQL; buckets the source does not touch are never read;
* the changed rows (increment-sized) are shuffled once more by bucket and written, one task per bucket; no file
  is written before every bucket was joined, so a duplicate source key fails the job before any write;
* the driver commits once with the caller's commit user and identifier: a retry finds the commit and does
  nothing; a killed job commits nothing (its files are orphans for orphan cleanup).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from airflow_paimon.format import Catalog, Table, values
from airflow_paimon.format.bucketing import bucket_ids
from airflow_paimon.format.commit import CommitId, Transaction
from airflow_paimon.format.errors import UnsupportedTableError
from airflow_paimon.format.read import read_split
from airflow_paimon.format.scan import ScanPlanner
from airflow_paimon.merge import (
    MATCHED,
    NOT_MATCHED,
    NOT_MATCHED_BY_SOURCE,
    MergeClause,
    is_identity,
    is_plain_upsert,
    matched_delete,
    matched_update,
    normalize_on,
    not_matched_insert,
    parse_clauses,
    referenced_columns,
    validate_clauses,
)

from .common import reapply_identifier
from .driver_upsert import local_parquet_files, read_increment, upsert_in_driver
from .schema_map import cast_to, exchange_schema, spark_schema, spark_to_arrow_type, to_exchange
from .store_assignment import check_store_assignment
from .tables import (
    BUCKET_COLUMN,
    CHANGE_COLUMN,
    DUPLICATE_MARKER,
    DuplicateKeyError,
    assign_buckets,
    balanced_groups,
    by_bucket,
    equal_runs,
    estimated_bytes,
    key_text,
    read_changes_df,
    read_table_df,
    unwrap_task_error,
    write_changes,
)

__all__ = ["MergeSpec", "run_merge", "load_source", "SOURCE_FORMATS"]

SOURCE_FORMATS = ("parquet", "csv", "json", "orc", "avro", "paimon", "sql")
_KIND = {"update": 2, "delete": 3, "insert": 0}


@dataclass
class MergeSpec:
    """Everything the merge application needs; JSON-serialisable (`to_dict`/`from_dict`)."""

    target: str
    warehouse: str
    source: Any
    source_format: str = "parquet"
    source_options: dict[str, str] = field(default_factory=dict)
    on: Any = None
    clauses: Any = None
    commit_user: str | None = None
    commit_identifier: int | None = None
    reapply: bool = False
    reapply_token: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    num_tasks: int | None = None
    honour_sequence_field: bool = True
    single_task_bytes: int = 32 << 20
    driver_bytes: int = 64 << 20

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> "MergeSpec":
        known = set(cls.__dataclass_fields__)
        unknown = set(doc) - known
        if unknown:
            raise ValueError(f"unknown merge arguments {sorted(unknown)}; known: {sorted(known)}")
        missing = [k for k in ("target", "warehouse", "source") if not doc.get(k)]
        if missing:
            raise ValueError(f"the merge needs {missing}")
        spec = cls(**dict(doc))
        spec.reapply = values.boolean(spec.reapply, "reapply", default=False)
        spec.honour_sequence_field = values.boolean(spec.honour_sequence_field, "honour_sequence_field",
                                                    default=True)
        spec.single_task_bytes = values.count(spec.single_task_bytes, "single_task_bytes", minimum=0)
        spec.driver_bytes = values.count(spec.driver_bytes, "driver_bytes", minimum=0)
        if spec.commit_identifier is not None:
            spec.commit_identifier = values.count(spec.commit_identifier, "commit_identifier", minimum=None)
        if spec.num_tasks is not None:
            spec.num_tasks = values.count(spec.num_tasks, "num_tasks")
        spec.source_format = (spec.source_format or "parquet").lower()
        if spec.source_format not in SOURCE_FORMATS:
            raise ValueError(f"source_format {spec.source_format!r} is not one of {SOURCE_FORMATS}")
        return spec

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if isinstance(self.clauses, list):
            out["clauses"] = [c.to_dict() if isinstance(c, MergeClause) else c for c in self.clauses]
        return out


# ---- the source ---------------------------------------------------------------------------------------

def load_source(spark: SparkSession, source: Any, source_format: str = "parquet",
                source_options: Mapping[str, str] | None = None, catalog: Catalog | None = None,
                empty_schema: T.StructType | None = None) -> tuple[DataFrame, dict[str, Any]]:
    """The source DataFrame and a description of it. `source` is a path/URI (with `source_format`), a table
    identifier (`source_format="paimon"`), a SQL query (`source_format="sql"`), or a mapping:

    * ``{"path": ..., "format": "parquet", "options": {...}}`` -- files Spark reads (a folder without data files
      is an empty source with `empty_schema`, when given);
    * ``{"sql": "SELECT ..."}``;
    * ``{"table": "db.t", "snapshot_id"|"tag"|"as_of": B}`` -- the rows of a Paimon table at B (default latest);
      add ``"from_snapshot_id"|"from_tag"|"from_as_of": A`` for only the rows that differ between A and B, with a
      ``_change`` column (+I, +U, -D); ``"warehouse"``/``"options"`` for a table of another warehouse;
      ``"closest_tag": true`` to read the closest older tag when the snapshot current at an ``as_of`` time has
      expired (otherwise that is an error; ``time_travel`` in the description says which was used).
    """
    fmt = (source_format or "parquet").lower()
    if isinstance(source, str):
        if fmt == "paimon":
            source = {"table": source}
        elif fmt == "sql":
            source = {"sql": source}
        else:
            source = {"path": source, "format": fmt}
    if not isinstance(source, Mapping):
        raise ValueError(f"source must be a string or a mapping, got {type(source).__name__}")
    source = dict(source)
    if "sql" in source:
        return spark.sql(source["sql"]), {"kind": "sql"}
    if "table" in source:
        if source.get("warehouse"):
            cat = Catalog(source["warehouse"], source.get("options") or {})
        elif catalog is not None:
            cat = catalog
        else:
            raise ValueError("a Paimon table source needs a warehouse")
        table = cat.get_table(source["table"])
        closest = bool(source.get("closest_tag"))
        after = table.resolve_snapshot(source.get("snapshot_id"), source.get("tag"), source.get("as_of"), closest)
        frm = {k: source.get(f"from_{k}") for k in ("snapshot_id", "tag", "as_of")}
        info: dict[str, Any] = {"kind": "table", "table": table.identifier,
                                "snapshot_id": after.id if after is not None else None}
        if source.get("as_of") is not None:
            info["time_travel"] = table.time_travel(source["as_of"], closest).how
        if any(v is not None for v in frm.values()):
            before = table.resolve_snapshot(frm["snapshot_id"], frm["tag"], frm["as_of"], closest)
            info.update(kind="changes", from_snapshot_id=before.id if before is not None else None)
            return read_changes_df(spark, table, before, after, columns=source.get("columns")), info
        return read_table_df(spark, table, snapshot=after, columns=source.get("columns"),
                             partitions=source.get("partitions")), info
    if "path" in source:
        fmt = (source.get("format") or fmt).lower()
        if fmt in ("paimon", "sql"):
            raise ValueError(f"source_format {fmt!r} needs a table identifier or a query, not a path")
        options = {"header": "true"} if fmt == "csv" else {}
        options.update({str(k): str(v) for k, v in (source_options or {}).items()})
        options.update({str(k): str(v) for k, v in (source.get("options") or {}).items()})
        reader = spark.read.format(fmt).options(**options)
        info = {"kind": "files", "path": source["path"], "format": fmt}
        try:
            if fmt in ("csv", "json") and empty_schema is not None and "inferSchema" not in options:
                return _typed_text_source(reader, source["path"], empty_schema, options), info
            return reader.load(source["path"]), info
        except Exception as e:  # noqa: BLE001 - pyspark's AnalysisException
            # A folder without data files (a day without changes) is an empty increment; a missing path is not.
            if "UNABLE_TO_INFER_SCHEMA" not in str(e) or empty_schema is None:
                raise
            info["empty"] = True
            return spark.createDataFrame([], empty_schema), info
    raise ValueError(f"source {source!r} names no path, table or sql")


def _typed_text_source(reader: Any, path: str, target: T.StructType, options: Mapping[str, str]) -> DataFrame:
    """Text files read with the target's types for the columns the target has (other columns keep what Spark
    reads: strings for CSV, inferred types for JSON), so a text value is parsed into its column's type -- and a
    value that does not parse fails the job -- instead of arriving as a string the MERGE may not store."""
    found = reader.load(path).schema
    types = {f.name.lower(): f.dataType for f in target.fields}
    schema = T.StructType([T.StructField(f.name, types.get(f.name.lower(), f.dataType), True) for f in found.fields])
    reader = reader.schema(schema)
    if "mode" not in options:
        reader = reader.option("mode", "FAILFAST")
    return reader.load(path)


# ---- the merge ----------------------------------------------------------------------------------------

def _resolve(columns: Sequence[str], name: str) -> str | None:
    if name in columns:
        return name
    low = name.lower()
    for c in columns:
        if c.lower() == low:
            return c
    return None


def _target_columns_needed(table: Table, clauses: Sequence[MergeClause], on: Sequence[str],
                           guard_fields: Sequence[str]) -> list[str]:
    names = table.schema().field_names
    need = set(table.primary_keys) | set(on) | set(guard_fields)
    for c in clauses:
        need |= referenced_columns(c.condition, "t", names, include_unqualified=c.when != NOT_MATCHED)
        if isinstance(c.assignments, Mapping):
            for expr in c.assignments.values():
                need |= referenced_columns(expr, "t", names, include_unqualified=c.when != NOT_MATCHED)
            if c.action == "update":
                assigned = {_resolve(names, k) for k in c.assignments}
                need |= {n for n in names if n not in assigned}
        if c.action == "delete":
            need |= set(table.core_options.sequence_fields)
    return [n for n in names if n in need]


def _sequence_guard(fields: Sequence[str], descending: bool) -> Any:
    """s's sequence fields are not older than t's, by Paimon's comparator (versions.py): compared field by field,
    a null is older than any value, and with `descending` a smaller value is the newer one. So a matched clause
    fires exactly when the row it writes would win over the target row on read."""
    expr = F.lit(True)
    for f in reversed(fields):
        s, t = F.col("s").getField(f), F.col("t").getField(f)
        later = (s < t) if descending else (s > t)
        newer = (s.isNotNull() & t.isNull()) | F.coalesce(later, F.lit(False))
        expr = newer | (s.eqNullSafe(t) & expr)
    return expr


class _Stats:
    def __init__(self, spark: SparkSession):
        sc = spark.sparkContext
        self.splits = sc.accumulator(0)
        self.rows = sc.accumulator(0)


class _Joiner:
    """Joins the source rows of one (partition, bucket) with that bucket of the target, in Arrow."""

    def __init__(self, table: Table, src_names: list[str], tcols: list[str], on: list[str], full: bool,
                 out_schema: T.StructType, stats: _Stats):
        logical = table.arrow_schema()
        self.table, self.src_names, self.tcols, self.on, self.full = table, src_names, tcols, on, full
        self.pk = table.primary_keys
        self.xschema = exchange_schema(out_schema)
        self.on_schema = pa.schema([logical.field(c) for c in on])
        self.t_schema = pa.schema([pa.field(c, logical.field(c).type, True) for c in tcols])
        self.split_acc, self.rows_acc = stats.splits, stats.rows

    def check_unique(self, src: pa.Table, bucket: int) -> None:
        check_unique_keys(cast_to(src, self.on_schema), self.pk, f"bucket {bucket}")

    def join(self, src: pa.Table, split: Any, bucket: int) -> Iterator[pa.RecordBatch]:
        src = src.select(self.src_names)
        keys_src = cast_to(src, self.on_schema)
        if split is not None:
            target = read_split(self.table, split, self.tcols)
            self.split_acc.add(1)
            self.rows_acc.add(target.num_rows)
        else:
            target = self.t_schema.empty_table()
        full = self.full
        if target.num_rows == 0 and not full:
            ji = pa.array(np.arange(src.num_rows, dtype=np.int64))
            jt = pa.nulls(src.num_rows, pa.int64())
        elif src.num_rows == 0 and full:
            ji = pa.nulls(target.num_rows, pa.int64())
            jt = pa.array(np.arange(target.num_rows, dtype=np.int64))
        else:
            left = keys_src.append_column("__is", pa.array(np.arange(src.num_rows, dtype=np.int64)))
            right = cast_to(target, self.on_schema).append_column(
                "__it", pa.array(np.arange(target.num_rows, dtype=np.int64)))
            # Acero builds its hash table on the right input: the source side, the small one.
            j = right.join(left, self.on, join_type="full outer" if full else "right outer", use_threads=False)
            ji, jt = j.column("__is").combine_chunks(), j.column("__it").combine_chunks()
        if len(ji) == 0:
            return
        s_rows = src.take(ji)
        t_rows = target.take(jt)
        cols = {f"__s_{i}": s_rows.column(n) for i, n in enumerate(self.src_names)}
        cols.update({f"__t_{i}": t_rows.column(n) for i, n in enumerate(self.tcols)})
        cols["__has_s"] = pc.is_valid(ji)
        cols["__has_t"] = pc.is_valid(jt)
        cols[BUCKET_COLUMN] = pa.array(np.full(len(ji), bucket, dtype=np.int32))
        yield from to_exchange(pa.table(cols), self.xschema).to_batches(max_chunksize=65536)


def check_unique_keys(keys: pa.Table, pk: Sequence[str], where: str) -> None:
    """DuplicateKeyError when two rows of `keys` share the primary key `pk`."""
    if keys.num_rows < 2:
        return
    ks = keys.take(pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in pk]))
    runs = equal_runs([ks.column(k) for k in pk], ks.num_rows)
    if len(runs) != ks.num_rows:
        first = next(s for s, e in runs if e - s > 1)
        raise DuplicateKeyError(
            f"{DUPLICATE_MARKER}: the MERGE source has several rows for one target primary key "
            f"({key_text(ks, pk, first)}; {ks.num_rows - len(runs)} extra row(s) in {where}). "
            "Can't execute this MERGE: a target row would match more than one source row. "
            "Nothing was committed.")


def _join_task(table: Table, splits: dict[tuple, Any], joiner: _Joiner, has_marker: bool) -> Any:
    """Tasks fed with source rows shuffled by (partition, bucket)."""
    pkeys = table.partition_keys
    part_schema = pa.schema([table.arrow_schema().field(p) for p in pkeys])

    def join_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parts = [b for b in batches if b.num_rows]
        if not parts:
            return
        data = pa.Table.from_batches(parts)
        casted = cast_to(data, part_schema)
        for p in pkeys:
            data = data.set_column(data.column_names.index(p), p, casted.column(p))
        order = pc.sort_indices(data, sort_keys=[(p, "ascending") for p in pkeys] + [(BUCKET_COLUMN, "ascending")],
                                null_placement="at_start")
        data = data.take(order)
        groups = []
        for start, end in equal_runs([data.column(p) for p in pkeys] + [data.column(BUCKET_COLUMN)], data.num_rows):
            group = data.slice(start, end - start)
            partition = tuple(group.column(p)[0].as_py() for p in pkeys)
            bucket = int(group.column(BUCKET_COLUMN)[0].as_py())
            if has_marker:
                group = group.filter(pc.invert(pc.fill_null(group.column("__marker"), False)))
            joiner.check_unique(group, bucket)
            groups.append((partition, bucket, group))
        for partition, bucket, group in groups:
            yield from joiner.join(group, splits.get((partition, bucket)), bucket)

    return join_task


def _joined_from_small_source(spark: SparkSession, table: Table, src: DataFrame, splits: dict[tuple, Any],
                              joiner: _Joiner, full: bool, out_schema: T.StructType, num_tasks: int) -> DataFrame:
    """The joined rows for a small source: the driver collects it (Arrow), checks its keys, finds the buckets it
    touches and broadcasts it; tasks over the touched buckets read the target and join. No shuffle, no Python
    stage before the join."""
    logical = table.arrow_schema()
    pkeys = table.partition_keys
    data = src.toArrow()
    bucket_keys = table.bucket_keys
    key_schema = pa.schema([pa.field(k, logical.field(k).type, True) for k in bucket_keys])
    buckets = bucket_ids(cast_to(data, key_schema), table.core_options.bucket)
    parts = cast_to(data, pa.schema([logical.field(p) for p in pkeys]))
    order_keys = pa.table({**{f"__p{i}": parts.column(p) for i, p in enumerate(pkeys)},
                           "__b": pa.array(buckets, pa.int32())})
    order = pc.sort_indices(order_keys, sort_keys=[(c, "ascending") for c in order_keys.column_names],
                            null_placement="at_start")
    data = data.take(order)
    order_keys = order_keys.take(order)
    parts = parts.take(order)
    check_unique_keys(cast_to(data, joiner.on_schema), table.primary_keys, "the source")
    groups: dict[tuple, tuple[int, int]] = {}
    for start, end in equal_runs(order_keys.columns, order_keys.num_rows):
        partition = tuple(parts.column(p)[start].as_py() for p in pkeys)
        groups[(partition, int(order_keys.column("__b")[start].as_py()))] = (start, end)
    keys = list(groups) + ([k for k in splits if k not in groups] if full else [])
    if not keys:
        return spark.createDataFrame([], out_schema)
    sizes = [(splits[k].row_count if k in splits else 0) + (groups[k][1] - groups[k][0] if k in groups else 0)
             for k in keys]
    assignment = balanced_groups(sizes, num_tasks)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as w:
        w.write_table(data)
    shipped = spark.sparkContext.broadcast(sink.getvalue().to_pybytes())
    empty = data.schema.empty_table()
    task_splits = {k: splits.get(k) for k in keys}

    def join_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = None
        for batch in batches:
            for task_id in batch.column(0).to_pylist():
                if rows is None:
                    rows = pa.ipc.open_stream(shipped.value).read_all()
                for i in assignment[task_id]:
                    key = keys[i]
                    start, end = groups.get(key, (0, 0))
                    group = rows.slice(start, end - start) if end > start else empty
                    yield from joiner.join(group, task_splits[key], key[1])

    return spark.range(0, len(assignment), 1, len(assignment)).mapInArrow(join_task, out_schema)


def _plan(spec: MergeSpec, table: Table, source: DataFrame,
          info: Mapping[str, Any]) -> tuple[list[str], list[MergeClause]]:
    names = table.schema().field_names
    on = normalize_on(spec.on, table.primary_keys, names)
    if spec.clauses is None and info.get("kind") == "changes":
        # Mirror the changes: deleted rows delete, the others upsert.
        clauses = [matched_delete(condition=f"s.{CHANGE_COLUMN} = '-D'"), matched_update(set="*"),
                   not_matched_insert(values="*", condition=f"s.{CHANGE_COLUMN} <> '-D'")]
    else:
        clauses = parse_clauses(spec.clauses)
    validate_clauses(clauses, target_columns=names, primary_keys=table.primary_keys, on=on,
                     source_columns=source.columns)
    return on, clauses


def _driver_upsert(spec: MergeSpec, table: Table, tx: Transaction, result: dict[str, Any],
                   started: float) -> dict[str, Any] | None:
    """The merge done without Spark (driver_upsert.py), or None when it needs Spark."""
    names = table.schema().field_names
    clauses = parse_clauses(spec.clauses)
    on = normalize_on(spec.on, table.primary_keys, names)
    if not (is_plain_upsert(clauses) and set(on) == set(table.primary_keys)) or spec.num_tasks is not None:
        return None
    files = local_parquet_files(spec.source, spec.source_format, spec.source_options, spec.driver_bytes)
    if files is None:
        return None
    data = read_increment(files, table.arrow_schema())
    if data is None:
        return None
    validate_clauses(clauses, target_columns=names, primary_keys=table.primary_keys, on=on,
                     source_columns=data.column_names)
    planned = time.monotonic()
    snap, rows, seconds = upsert_in_driver(table, data, tx)
    result.update(mode="upsert", engine="driver", rows=rows, target_splits_read=0, target_rows_read=0,
                  source={"kind": "files", "path": spec.source if isinstance(spec.source, str)
                          else spec.source.get("path"), "format": "parquet", "files": len(files)},
                  timings=dict(seconds, plan=round(planned - started, 3)))
    return _finished(result, snap, tx.base, started)


def _finished(result: dict[str, Any], snap: Any, base: Any, started: float) -> dict[str, Any]:
    """`result` with the outcome of a merge that ran (committed `snap`, or nothing to commit) and its time."""
    if snap is None:
        result.update(status="no_changes", snapshot_id=base.id if base is not None else None)
    else:
        result.update(status="committed", snapshot_id=snap.id)
    result["seconds"] = round(time.monotonic() - started, 3)
    return result


def run_merge(spark: SparkSession | Callable[[], SparkSession], spec: MergeSpec | Mapping[str, Any]) -> dict[str, Any]:
    """Run one MERGE; returns a JSON-able result (status, snapshot id, row counts, what was read).

    `spark` may be a function returning the session, so that a merge that needs no Spark job never starts one.
    """
    started = time.monotonic()
    if not isinstance(spec, MergeSpec):
        spec = MergeSpec.from_dict(spec)
    catalog = Catalog(spec.warehouse, spec.options)
    table = catalog.get_table(spec.target)
    if not table.is_primary_key:
        raise UnsupportedTableError(f"MERGE needs a primary-key target; {table.identifier} is an append table")
    user, ident = spec.commit_user, spec.commit_identifier
    result: dict[str, Any] = {"target": table.identifier, "commit_user": user}
    tx = table.transaction(commit_id=CommitId.of(user, ident), commit_user=user)
    existing = tx.already_committed
    if existing is not None and not spec.reapply:
        result.update(status="already_committed", snapshot_id=existing.id, commit_identifier=ident,
                      message=f"commit {user!r}/{ident} is already in snapshot {existing.id} of "
                              f"{table.identifier}; nothing to do (reapply=True merges again)")
        print(result["message"], flush=True)
        return result
    if tx.commit_id is not None and spec.reapply:
        token = spec.reapply_token if spec.reapply_token is not None else time.time_ns()
        if existing is not None or spec.reapply_token is not None:
            ident = reapply_identifier(ident, token)
            tx = table.transaction(commit_id=CommitId(user, ident))
            again = tx.already_committed
            if again is not None:
                result.update(status="already_committed", snapshot_id=again.id, commit_identifier=ident,
                              message=f"the re-applied commit {user!r}/{ident} is already in snapshot "
                                      f"{again.id}; nothing to do")
                print(result["message"], flush=True)
                return result
    result["commit_identifier"] = ident
    base = tx.base
    done = _driver_upsert(spec, table, tx, result, started)
    if done is not None:
        return done
    if callable(spark):
        waited = time.monotonic()
        spark = spark()
        started += time.monotonic() - waited   # in-job time, as for a session handed in: without start-up
    result["engine"] = "spark"
    source, info = load_source(spark, spec.source, spec.source_format, spec.source_options, catalog,
                               empty_schema=spark_schema(table.arrow_schema()))
    on, clauses = _plan(spec, table, source, info)
    result["source"] = info
    if info.get("empty"):
        # A folder without data files (a day without changes): no source row can match or be inserted, so only
        # NOT MATCHED BY SOURCE clauses can apply -- and the others may name source columns an empty folder
        # does not have.
        clauses = [c for c in clauses if c.when == NOT_MATCHED_BY_SOURCE]
        if not clauses:
            result.update(mode="merge", rows={"inserted": 0, "updated": 0, "deleted": 0}, target_splits_read=0,
                          target_rows_read=0)
            return _finished(result, None, base, started)
    names = table.schema().field_names
    seq_fields = list(table.core_options.sequence_fields)
    stats = _Stats(spark)
    planned = time.monotonic()
    if is_plain_upsert(clauses) and set(on) == set(table.primary_keys):
        result["mode"] = "upsert"
        given = {f.name: f.dataType for f in source.schema.fields}
        for f in table.arrow_schema():
            column = given[_resolve(source.columns, f.name)]
            check_store_assignment(f.name, _arrow_type(column), f.type, source_name=column.simpleString())
        cols = [F.col(_resolve(source.columns, n)).alias(n) for n in names]
        # A small increment of files is read and written by one task: no shuffle, one Python worker.
        size = estimated_bytes(source) if info.get("kind") == "files" else None
        single = spec.num_tasks is None and size is not None and size <= spec.single_task_bytes
        result["single_task"] = single
        res = write_changes(spark, table, source.select(*cols), kind_column=None, transaction=tx,
                            duplicates="error", num_tasks=spec.num_tasks, single_task=single,
                            what="the MERGE source")
    else:
        result["mode"] = "merge"
        res = _general_merge(spark, spec, table, tx, source, on, clauses, seq_fields, stats, result, info)
    snap = res.snapshot
    result["rows"] = res.rows
    result["timings"] = dict(res.seconds, plan=round(planned - started, 3))
    result["target_splits_read"] = stats.splits.value
    result["target_rows_read"] = stats.rows.value
    return _finished(result, snap, base, started)


def _general_merge(spark: SparkSession, spec: MergeSpec, table: Table, tx: Transaction, source: DataFrame,
                   on: list[str], clauses: list[MergeClause], seq_fields: list[str], stats: _Stats,
                   result: dict[str, Any], info: Mapping[str, Any]) -> Any:
    base = tx.base
    names = table.schema().field_names
    target_types = {f.name: f.dataType for f in spark_schema(table.arrow_schema()).fields}
    src_cols = list(source.columns)
    src_lower = {c.lower(): c for c in src_cols}
    guard_fields: list[str] = []
    if spec.honour_sequence_field and seq_fields and all(f.lower() in src_lower for f in seq_fields):
        guard_fields = seq_fields
    tcols = _target_columns_needed(table, clauses, on, guard_fields)
    result["target_columns_read"] = tcols
    full = any(c.when == NOT_MATCHED_BY_SOURCE for c in clauses)
    # The source: key columns in the target's types (they are joined in Arrow), then its bucket.
    key_cols = {k: src_lower[k.lower()] for k in on}
    sel = []
    for c in src_cols:
        tname = next((k for k, v in key_cols.items() if v == c), None)
        sel.append(F.col(c).cast(target_types[tname]).alias(tname) if tname else F.col(c))
    src = source.select(*sel)
    src_names = list(src.columns)
    splits = {}
    if base is not None:
        for sp in ScanPlanner(table).plan(table.file_entries(base), None, base.id):
            splits[(sp.partition, sp.bucket)] = sp
    shuffle = int(spark.conf.get("spark.sql.shuffle.partitions", "200"))
    n = spec.num_tasks or (min(table.core_options.bucket, shuffle) if not table.partition_keys else shuffle)
    src_types = {f.name: f.dataType for f in src.schema.fields}
    joined_schema = T.StructType(
        [T.StructField(f"__s_{i}", src_types[c], True) for i, c in enumerate(src_names)] +
        [T.StructField(f"__t_{i}", target_types[c], True) for i, c in enumerate(tcols)] +
        [T.StructField("__has_s", T.BooleanType(), True), T.StructField("__has_t", T.BooleanType(), True),
         T.StructField(BUCKET_COLUMN, T.IntegerType(), True)])
    _check_assignments(spark, table, clauses, src_names, tcols, joined_schema)
    joiner = _Joiner(table, src_names, tcols, on, full, joined_schema, stats)
    size = estimated_bytes(source) if info.get("kind") == "files" else None
    small = spec.num_tasks is None and size is not None and size <= spec.single_task_bytes
    result["small_source"] = small
    if small:
        joined = _joined_from_small_source(spark, table, src, splits, joiner, full, joined_schema, n)
    else:
        src = assign_buckets(src, table, BUCKET_COLUMN)
        has_marker = False
        if full and splits:
            pschema = T.StructType([T.StructField(p, target_types[p], True) for p in table.partition_keys] +
                                   [T.StructField(BUCKET_COLUMN, T.IntegerType(), True)])
            markers = spark.createDataFrame([tuple(p) + (b,) for (p, b) in splits], pschema)
            src = src.withColumn("__marker", F.lit(False)).unionByName(
                markers.withColumn("__marker", F.lit(True)), allowMissingColumns=True)
            has_marker = True
        src = src.repartition(max(1, n), *[F.col(p) for p in table.partition_keys], F.col(BUCKET_COLUMN))
        joined = src.mapInArrow(_join_task(table, splits, joiner, has_marker), joined_schema)
    j = joined.select(
        F.struct(*[F.col(f"__s_{i}").alias(c) for i, c in enumerate(src_names)]).alias("s"),
        F.struct(*[F.col(f"__t_{i}").alias(c) for i, c in enumerate(tcols)]).alias("t"),
        "__has_s", "__has_t", BUCKET_COLUMN)
    has_s, has_t = F.col("__has_s"), F.col("__has_t")
    when_cond = {MATCHED: has_s & has_t, NOT_MATCHED: has_s & ~has_t, NOT_MATCHED_BY_SOURCE: ~has_s & has_t}
    if guard_fields:
        when_cond[MATCHED] = when_cond[MATCHED] & _sequence_guard(guard_fields,
                                                                  table.core_options.sequence_descending)
        result["sequence_guard"] = guard_fields
    action = None
    for idx, c in enumerate(clauses):
        cond = when_cond[c.when]
        if c.condition:
            cond = cond & F.coalesce(F.expr(c.condition).cast("boolean"), F.lit(False))
        action = F.when(cond, F.lit(idx)) if action is None else action.when(cond, F.lit(idx))
    j = j.withColumn("__action", action).where(F.col("__action").isNotNull())
    rebucket = False
    outputs = []
    for name in names:
        expr = None
        for idx, c in enumerate(clauses):
            value = _value(c, name, src_cols, tcols)
            if c.action == "insert" and name in table.primary_keys and isinstance(c.assignments, Mapping):
                given = {_resolve(names, k): v for k, v in c.assignments.items()}
                if not (is_identity(given[name], name) and name in on):
                    rebucket = True
            hit = F.col("__action") == idx
            expr = F.when(hit, value) if expr is None else expr.when(hit, value)
        outputs.append(expr.cast(target_types[name]).alias(name))
    kind = None
    for idx, c in enumerate(clauses):
        hit = F.col("__action") == idx
        kind = F.when(hit, F.lit(_KIND[c.action])) if kind is None else kind.when(hit, F.lit(_KIND[c.action]))
    out = j.select(*outputs, kind.cast("byte").alias("__kind"), F.col(BUCKET_COLUMN))
    if rebucket:
        out = out.drop(BUCKET_COLUMN)
    else:
        # A second, increment-sized shuffle by the same (partition, bucket): the tasks that write files start only
        # once every bucket was joined (so a duplicate source key fails the job before any file is written), and
        # they reuse the joining tasks' Python workers instead of starting a second worker per task.
        out = by_bucket(out, [F.col(p) for p in table.partition_keys] + [F.col(BUCKET_COLUMN)], spec.num_tasks)
    try:
        return write_changes(spark, table, out, kind_column="__kind", transaction=tx, duplicates="error",
                             bucket_column=None if rebucket else BUCKET_COLUMN, num_tasks=spec.num_tasks,
                             what="the MERGE output")
    except DuplicateKeyError:
        raise
    except Exception as e:  # noqa: BLE001
        err = unwrap_task_error(e)
        if err is e:
            raise
        raise err from None


def _arrow_type(t: T.DataType) -> pa.DataType | None:
    """The Arrow type of Spark type `t` for the store-assignment rules (None: no Arrow equivalent)."""
    if isinstance(t, T.NullType):
        return pa.null()
    try:
        return spark_to_arrow_type(t)
    except TypeError:
        return None


def _check_assignments(spark: SparkSession, table: Table, clauses: Sequence[MergeClause], src_names: list[str],
                       tcols: list[str], joined_schema: T.StructType) -> None:
    """StoreAssignmentError for the first value a clause assigns that Spark's MERGE would not store into its
    column. The types come from analysing the clauses' values over an empty frame of the joined rows' shape,
    before any job runs."""
    empty = spark.createDataFrame([], joined_schema).select(
        F.struct(*[F.col(f"__s_{i}").alias(c) for i, c in enumerate(src_names)]).alias("s"),
        F.struct(*[F.col(f"__t_{i}").alias(c) for i, c in enumerate(tcols)]).alias("t"))
    logical = table.arrow_schema()
    checks = [(c, f.name, _value(c, f.name, src_names, tcols)) for c in clauses if c.action != "delete"
              for f in logical]
    if not checks:
        return
    types = empty.select(*[v.alias(f"__v{i}") for i, (_, _, v) in enumerate(checks)]).schema.fields
    for (c, name, _), f in zip(checks, types):
        check_store_assignment(name, _arrow_type(f.dataType), logical.field(name).type,
                               source_name=f.dataType.simpleString(), what=f"the MERGE clause {c.describe()}")


def _value(c: MergeClause, name: str, src_cols: Sequence[str], tcols: Sequence[str]) -> Any:
    """The value clause `c` gives target column `name`."""
    s_name = _resolve(src_cols, name)
    t_has = name in tcols
    t_value = F.col("t").getField(name) if t_has else F.lit(None)
    if c.action == "delete":
        return t_value
    if c.is_star:
        return F.col("s").getField(s_name)
    given = {k.lower(): v for k, v in c.assignments.items()}
    if name.lower() in given:
        return F.expr(given[name.lower()])
    if c.action == "update":
        return t_value
    return F.lit(None)
