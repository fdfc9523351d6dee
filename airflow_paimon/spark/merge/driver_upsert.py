"""Plain upserts of small increments inside the merge application's own process, without Spark jobs.

A daily increment of a few megabytes costs Spark far more to start (a SparkContext, a first job, a Python worker
importing pyarrow: about 10 s on two cores) than to merge, and a plain upsert reads nothing of the target: it
writes the increment as new level-0 files and merge-on-read does the rest. So when the source is local Parquet
files of at most `driver_bytes` whose columns already have the target's types, the application reads them with
pyarrow and writes and commits them itself, with the same format-library calls the Spark tasks make, so the
table comes out the same either way. Everything else -- other formats, object-store URIs, SQL or table sources,
nested folders, columns that need Spark's casts, merges with conditions -- runs on Spark, which then reports
its own errors for the source.

No pyspark imports: this path must not start the JVM side of the session.
"""

from __future__ import annotations

import os
import time
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_paimon.format import Table
from airflow_paimon.format.commit import Transaction
from airflow_paimon.format.snapshot import Snapshot
from airflow_paimon.format.versions import kinds_to_write
from airflow_paimon.merge import is_plain_upsert, normalize_on, parse_clauses, validate_clauses
from airflow_paimon.store_assignment import check_store_assignment

from .result import Written
from .spec import MergeSpec

__all__ = ["local_parquet_files", "read_increment", "upsert_in_driver", "upsert_small_local_source"]

# Names Spark's file listing skips (hidden and metadata files, files still being copied).
_SKIPPED_PREFIXES = ("_", ".")
_SKIPPED_SUFFIX = "._COPYING_"


def local_parquet_files(source: Any, source_format: str, source_options: Mapping[str, str] | None,
                        max_bytes: int) -> list[str] | None:
    """The Parquet files of a local source of at most `max_bytes`, or None when Spark should read it.

    A folder must hold files only (a nested layout, e.g. ``k=v/`` partition folders, is Spark's to discover).
    An existing folder without data files is an empty increment (``[]``), as it is on Spark.
    """
    if max_bytes <= 0 or source_options:
        return None
    if isinstance(source, Mapping):
        if set(source) - {"path", "format"} or (source.get("format") or source_format or "parquet") != "parquet":
            return None
        source = source.get("path")
    elif (source_format or "parquet").lower() != "parquet":
        return None
    if not isinstance(source, str) or not source:
        return None
    path = source[len("file://"):] if source.startswith("file://") else source
    if "://" in path or not os.path.exists(path):
        return None
    if os.path.isfile(path):
        files, size = [path], os.path.getsize(path)
    else:
        files, size = [], 0
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.name.startswith(_SKIPPED_PREFIXES) or entry.name.endswith(_SKIPPED_SUFFIX):
                    continue
                if not entry.is_file():
                    return None
                files.append(entry.path)
                size += entry.stat().st_size
        files.sort()
    return files if size <= max_bytes else None


def _same_values(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether Spark's read-and-cast and Arrow's cast give the same values (so the driver may read)."""
    if source == target:
        return True
    if pa.types.is_string(target) and pa.types.is_large_string(source):
        return True
    if pa.types.is_signed_integer(source) and pa.types.is_signed_integer(target):
        return source.bit_width <= target.bit_width
    return False


def _columns_to_read(schema: pa.Schema, target: pa.Schema) -> tuple[list[str], list[str]] | None:
    """The source columns that feed target columns, and those target names (Spark resolves names ignoring
    case); None when a name is ambiguous or a type needs a cast whose result could differ from Spark's.

    A type Spark's MERGE would not store into its column at all (a string into a double) is refused here, with
    the same error as on Spark, rather than left to Spark."""
    by_lower: dict[str, list[str]] = {}
    for name in schema.names:
        by_lower.setdefault(name.lower(), []).append(name)
    columns, names = [], []
    for f in target:
        found = by_lower.get(f.name.lower(), [])
        if len(found) > 1:
            return None
        if found:
            given = schema.field(found[0]).type
            check_store_assignment(f.name, given, f.type)
            if not _same_values(given, f.type):
                return None
            columns.append(found[0])
            names.append(f.name)
    return columns, names


def read_increment(files: Sequence[str], target: pa.Schema) -> pa.Table | None:
    """The rows of `files`, columns renamed to the target's names; None when the files' schemas differ or a
    column cannot be read as Spark would (Spark then reads the source)."""
    schema = None
    plan: tuple[list[str], list[str]] | None = None
    parts = []
    for f in files:
        # ParquetFile rather than read_table: the latter loads pyarrow.dataset, and with it pandas.
        try:
            parquet = pq.ParquetFile(f)
        except (pa.ArrowInvalid, OSError):
            return None
        with parquet:
            file_schema = pa.schema([pa.field(x.name, x.type) for x in parquet.schema_arrow])
            if schema is None:
                schema = file_schema
                plan = _columns_to_read(schema, target)
            elif file_schema != schema:
                return None
            if plan is None:
                return None
            parts.append(parquet.read(columns=plan[0]))
    if plan is None:
        return target.empty_table()
    data = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    return data.rename_columns(plan[1])


def upsert_in_driver(table: Table, data: pa.Table,
                     tx: Transaction) -> tuple[Snapshot | None, dict[str, int], dict[str, float]]:
    """Write `data` on the transaction's base as rows of new level-0 files and commit once: (new snapshot or
    None, rows, seconds).

    Rows are +I, or of the kind their ``rowkind.field`` column names; retractions the table ignores are dropped,
    and the counts are of the rows written, as the Spark tasks count them."""
    started = time.monotonic()
    data, kinds = kinds_to_write(table.core_options, data, None)
    messages = table.new_write().write(data, kinds, base_snapshot=tx.base, duplicates="error",
                                       what="the MERGE source")
    seconds = {"write": round(time.monotonic() - started, 3)}
    if kinds is None:
        rows = {"inserted": data.num_rows, "updated": 0, "deleted": 0}
    else:
        counts = np.bincount(kinds.to_numpy(zero_copy_only=False).astype(np.int64), minlength=4)
        rows = {"inserted": int(counts[0]), "updated": int(counts[2]), "deleted": int(counts[1] + counts[3])}
    if not messages:
        return None, rows, seconds
    started = time.monotonic()
    snap = tx.commit(messages)
    seconds["commit"] = round(time.monotonic() - started, 3)
    return snap, rows, seconds


def upsert_small_local_source(spec: MergeSpec, table: Table, tx: Transaction,
                              started: float) -> tuple[Written, dict[str, Any]] | None:
    """The merge done here, without Spark, and a description of its source; None when it needs Spark (not a
    plain upsert, a fixed number of tasks, or a source that is not small local Parquet read as Spark would)."""
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
    source = {"kind": "files", "path": spec.source if isinstance(spec.source, str) else spec.source.get("path"),
              "format": "parquet", "files": len(files)}
    return Written(snap, rows, "upsert", engine="driver", timings=dict(seconds, plan=round(planned - started, 3))), \
        source
