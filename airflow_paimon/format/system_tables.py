"""Paimon's system tables (`t$snapshots`, `t$tags`, `t$files`, `t$manifests`, `t$schemas`, `t$options`; the change
tables `t$audit_log`, `t$binlog`, `t$consumers` live in change_tables.py) as Arrow.

Column names, order, types and nullability follow Paimon's Java system tables (`org.apache.paimon.table.system`):
BIGINT -> int64, INT -> int32, STRING -> string, TIMESTAMP(3) -> timestamp[ms] (no time zone). As in Java, times
are shown as local date-times of the machine reading them (`LocalDateTime.ofInstant(..., systemDefault())`),
text renderings of rows and statistics follow Java's `toString` conventions (`{a, b}` for partitions, `{k=v}`
maps sorted by column name, `[k]` for keys).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .binary_row import EMPTY_ROW, deserialize_row
from .change_tables import audit_log_table, binlog_table, consumers_table
from .errors import InvalidOptionError
from .manifest import FILE_SOURCE_APPEND, FILE_SOURCE_COMPACT, DataFileMeta
from .tag_file import java_duration_string

if TYPE_CHECKING:
    from .schema import TableSchema
    from .table import Table

_TS = pa.timestamp("ms")


def _f(name: str, t: pa.DataType, nullable: bool = True) -> pa.Field:
    return pa.field(name, t, nullable=nullable)


SNAPSHOTS_SCHEMA = pa.schema([
    _f("snapshot_id", pa.int64(), False),
    _f("schema_id", pa.int64(), False),
    _f("commit_user", pa.string(), False),
    _f("commit_identifier", pa.int64(), False),
    _f("commit_kind", pa.string(), False),
    _f("commit_time", _TS, False),
    _f("base_manifest_list", pa.string(), False),
    _f("delta_manifest_list", pa.string(), False),
    _f("changelog_manifest_list", pa.string()),
    _f("total_record_count", pa.int64()),
    _f("delta_record_count", pa.int64()),
    _f("changelog_record_count", pa.int64()),
    _f("watermark", pa.int64()),
    _f("next_row_id", pa.int64()),
    _f("operation", pa.string()),
    _f("writer_version", pa.string()),
])

TAGS_SCHEMA = pa.schema([
    _f("tag_name", pa.string(), False),
    _f("snapshot_id", pa.int64(), False),
    _f("schema_id", pa.int64(), False),
    _f("commit_time", _TS, False),
    _f("record_count", pa.int64()),
    _f("create_time", _TS),
    _f("time_retained", pa.string()),
])

FILES_SCHEMA = pa.schema([
    _f("partition", pa.string()),
    _f("bucket", pa.int32(), False),
    _f("file_path", pa.string(), False),
    _f("file_format", pa.string(), False),
    _f("schema_id", pa.int64(), False),
    _f("level", pa.int32(), False),
    _f("record_count", pa.int64(), False),
    _f("file_size_in_bytes", pa.int64(), False),
    _f("min_key", pa.string()),
    _f("max_key", pa.string()),
    _f("null_value_counts", pa.string(), False),
    _f("min_value_stats", pa.string(), False),
    _f("max_value_stats", pa.string(), False),
    _f("min_sequence_number", pa.int64()),
    _f("max_sequence_number", pa.int64()),
    _f("creation_time", _TS),
    _f("deleteRowCount", pa.int64()),
    _f("file_source", pa.string()),
    _f("first_row_id", pa.int64()),
    _f("write_cols", pa.list_(pa.string())),
])

MANIFESTS_SCHEMA = pa.schema([
    _f("file_name", pa.string(), False),
    _f("file_size", pa.int64(), False),
    _f("num_added_files", pa.int64(), False),
    _f("num_deleted_files", pa.int64(), False),
    _f("schema_id", pa.int64(), False),
    _f("min_partition_stats", pa.string()),
    _f("max_partition_stats", pa.string()),
    _f("min_row_id", pa.int64()),
    _f("max_row_id", pa.int64()),
])

SCHEMAS_SCHEMA = pa.schema([
    _f("schema_id", pa.int64(), False),
    _f("fields", pa.string(), False),
    _f("partition_keys", pa.string(), False),
    _f("primary_keys", pa.string(), False),
    _f("options", pa.string(), False),
    _f("comment", pa.string()),
    _f("update_time", _TS, False),
])

OPTIONS_SCHEMA = pa.schema([
    _f("key", pa.string(), False),
    _f("value", pa.string(), False),
])

SYSTEM_TABLES = {
    "snapshots": SNAPSHOTS_SCHEMA,
    "tags": TAGS_SCHEMA,
    "files": FILES_SCHEMA,
    "manifests": MANIFESTS_SCHEMA,
    "schemas": SCHEMAS_SCHEMA,
    "options": OPTIONS_SCHEMA,
}


def _local(millis: int | None) -> dt.datetime | None:
    """Epoch millis as the machine's local date-time (Java: LocalDateTime.ofInstant(.., systemDefault()))."""
    if millis is None:
        return None
    return dt.datetime.fromtimestamp(millis / 1000).replace(microsecond=(millis % 1000) * 1000)


def java_string(value: Any) -> str:
    """A value as Paimon's cast to STRING (and Java's toString) renders it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        text = repr(value)
        return text if ("." in text or "e" in text) else text + ".0"
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None).isoformat(sep=" ")
    if isinstance(value, (dt.date, dt.time, decimal.Decimal)):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _row_string(values: Any) -> str:
    return "{" + ", ".join(java_string(v) for v in values) + "}"


def _map_string(items: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}={java_string(items[k])}" for k in sorted(items)) + "}"


def _rows(schema: pa.Schema, rows: list[dict[str, Any]]) -> pa.Table:
    columns = {f.name: [r.get(f.name) for r in rows] for f in schema}
    return pa.Table.from_pydict(columns, schema=schema)


# ---- the tables -----------------------------------------------------------------------------------------

def snapshots_table(table: "Table") -> pa.Table:
    rows = []
    for s in table.snapshots():
        rows.append({
            "snapshot_id": s.id, "schema_id": s.schema_id, "commit_user": s.commit_user,
            "commit_identifier": s.commit_identifier, "commit_kind": s.commit_kind,
            "commit_time": _local(s.time_millis), "base_manifest_list": s.base_manifest_list,
            "delta_manifest_list": s.delta_manifest_list, "changelog_manifest_list": s.changelog_manifest_list,
            "total_record_count": s.total_record_count, "delta_record_count": s.delta_record_count,
            "changelog_record_count": s.changelog_record_count, "watermark": s.watermark,
            "next_row_id": s.next_row_id, "operation": s.extra.get("operation"),
            "writer_version": s.extra.get("writerVersion"),
        })
    return _rows(SNAPSHOTS_SCHEMA, rows)


def tags_table(table: "Table") -> pa.Table:
    rows = []
    for t in sorted(table.tags.list(), key=lambda t: t.name):
        s = t.snapshot
        rows.append({
            "tag_name": t.name, "snapshot_id": s.id, "schema_id": s.schema_id,
            "commit_time": _local(s.time_millis), "record_count": s.total_record_count,
            "create_time": t.create_time, "time_retained":
                java_duration_string(t.time_retained) if t.time_retained is not None else None,
        })
    return _rows(TAGS_SCHEMA, rows)


def files_table(table: "Table", snapshot_id: int | None = None, tag: str | None = None,
                as_of: Any = None) -> pa.Table:
    snap = table.resolve_snapshot(snapshot_id, tag, as_of)
    if snap is None:
        return FILES_SCHEMA.empty_table()
    codec = table.partition_codec
    has_partitions = bool(table.partition_keys)
    rows: list[dict[str, Any]] = []
    for e in table.file_entries(snap):
        f = e.file
        part = codec.from_bytes(e.partition) if has_partitions else ()
        fs = table.schema_by_id(f.schema_id)
        key_names = fs.trimmed_primary_keys if fs.primary_keys else []
        min_key = max_key = None
        if key_names and f.min_key not in (b"", EMPTY_ROW):
            try:
                types = [fs.arrow_type(k) for k in key_names]
                min_key = "[" + ", ".join(java_string(v) for v in deserialize_row(f.min_key, types)) + "]"
                max_key = "[" + ", ".join(java_string(v) for v in deserialize_row(f.max_key, types)) + "]"
            except Exception:
                min_key = max_key = None
        nulls, mins, maxs = _value_stats(table, fs, f)
        if f.file_source == FILE_SOURCE_APPEND:
            source = "APPEND"
        elif f.file_source == FILE_SOURCE_COMPACT:
            source = "COMPACT"
        else:
            source = None
        rows.append({
            "partition": _row_string(part),
            "bucket": e.bucket,
            "file_path": table.data_file_path(part, e.bucket, f),
            "file_format": f.file_name.rsplit(".", 1)[-1] if "." in f.file_name else "",
            "schema_id": f.schema_id,
            "level": f.level,
            "record_count": f.row_count,
            "file_size_in_bytes": f.file_size,
            "min_key": min_key,
            "max_key": max_key,
            "null_value_counts": _map_string(nulls),
            "min_value_stats": _map_string(mins),
            "max_value_stats": _map_string(maxs),
            "min_sequence_number": f.min_sequence_number,
            "max_sequence_number": f.max_sequence_number,
            "creation_time": _local(f.creation_time_ms),
            "deleteRowCount": f.delete_row_count,
            "file_source": source,
            "first_row_id": f.first_row_id,
            "write_cols": list(f.write_cols) if f.write_cols is not None else None,
        })
    rows.sort(key=lambda r: (r["partition"], r["bucket"], -r["level"], r["file_path"]))
    return _rows(FILES_SCHEMA, rows)


def _value_stats(table: Table, file_schema: TableSchema,
                 f: DataFileMeta) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Per current column: null count, min and max from the file's value statistics (missing: null)."""
    current = table.schema().field_names
    nulls: dict[str, Any] = {n: None for n in current}
    mins: dict[str, Any] = {n: None for n in current}
    maxs: dict[str, Any] = {n: None for n in current}
    names = list(f.value_stats_cols) if f.value_stats_cols is not None else file_schema.field_names
    if not f.value_stats.min_values or not names:
        return nulls, mins, maxs
    try:
        types = [file_schema.arrow_type(n) for n in names]
        lo = deserialize_row(f.value_stats.min_values, types)
        hi = deserialize_row(f.value_stats.max_values, types)
    except Exception:
        return nulls, mins, maxs
    counts = list(f.value_stats.null_counts or ())
    by_id = {fld.name: fld.id for fld in file_schema.fields}
    current_by_id = {fld.id: fld.name for fld in table.schema().fields}
    for i, n in enumerate(names):
        target = current_by_id.get(by_id.get(n, -1))
        if target is None:
            continue
        mins[target] = lo[i]
        maxs[target] = hi[i]
        nulls[target] = counts[i] if i < len(counts) else None
    return nulls, mins, maxs


def manifests_table(table: "Table", snapshot_id: int | None = None, tag: str | None = None,
                    as_of: Any = None) -> pa.Table:
    snap = table.resolve_snapshot(snapshot_id, tag, as_of)
    if snap is None:
        return MANIFESTS_SCHEMA.empty_table()
    metas = table.manifest_io.read_list(snap.base_manifest_list) + table.manifest_io.read_list(
        snap.delta_manifest_list)
    codec = table.partition_codec
    rows = []
    for m in metas:
        lo: str | None = "{}"
        hi: str | None = "{}"
        if table.partition_keys:
            try:
                lo = _row_string(codec.from_bytes(m.partition_stats.min_values))
                hi = _row_string(codec.from_bytes(m.partition_stats.max_values))
            except Exception:
                lo = hi = None
        rows.append({
            "file_name": m.file_name, "file_size": m.file_size, "num_added_files": m.num_added_files,
            "num_deleted_files": m.num_deleted_files, "schema_id": m.schema_id, "min_partition_stats": lo,
            "max_partition_stats": hi, "min_row_id": m.min_row_id, "max_row_id": m.max_row_id,
        })
    return _rows(MANIFESTS_SCHEMA, rows)


def _flat_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def schemas_table(table: "Table") -> pa.Table:
    rows = []
    sm = table.schema_manager
    for sid in sm.ids():
        s = sm.schema(sid)
        rows.append({
            "schema_id": s.id, "fields": _flat_json([f.to_json() for f in s.fields]),
            "partition_keys": _flat_json(list(s.partition_keys)), "primary_keys": _flat_json(list(s.primary_keys)),
            "options": _flat_json(dict(s.options)), "comment": s.comment, "update_time": _local(s.time_millis),
        })
    return _rows(SCHEMAS_SCHEMA, rows)


def options_table(table: "Table") -> pa.Table:
    opts = table.options()
    return _rows(OPTIONS_SCHEMA, [{"key": k, "value": opts[k]} for k in sorted(opts)])


CHANGE_TABLES = ("audit_log", "binlog", "consumers")


def system_table(table: "Table", name: str, snapshot_id: int | None = None, tag: str | None = None,
                 as_of: Any = None, *, start: Any = None, end: Any = None, mode: str = "auto") -> pa.Table:
    """One of Paimon's system tables; `files`, `manifests`, `audit_log` and `binlog` describe the latest snapshot,
    or the one given; `audit_log` and `binlog` also read a change range (start, end] (see change_tables.py)."""
    key = str(name).strip().lstrip("$").lower()
    if key not in SYSTEM_TABLES and key not in CHANGE_TABLES:
        raise InvalidOptionError(f"unknown system table {name!r}; known: "
                                 f"{', '.join('$' + n for n in (*SYSTEM_TABLES, *CHANGE_TABLES))}")
    travel = (snapshot_id, tag, as_of)
    ranged = start is not None or end is not None
    if ranged and key not in ("audit_log", "binlog"):
        raise InvalidOptionError(f"${key} has no change range; start and end apply to $audit_log and $binlog")
    if key in ("audit_log", "binlog"):
        if ranged and any(v is not None for v in travel):
            raise InvalidOptionError(f"${key}: give a change range (start, end) or a snapshot (snapshot_id, tag, "
                                     "as_of), not both")
        read = audit_log_table if key == "audit_log" else binlog_table
        return read(table, snapshot_id, tag, as_of, start=start, end=end, mode=mode)
    if key in ("files", "manifests"):
        fn = files_table if key == "files" else manifests_table
        return fn(table, snapshot_id, tag, as_of)
    if any(v is not None for v in travel):
        raise InvalidOptionError(f"${key} has no time travel; snapshot_id, tag and as_of apply to $files and "
                                 "$manifests")
    return {"snapshots": snapshots_table, "tags": tags_table, "schemas": schemas_table,
            "options": options_table, "consumers": consumers_table}[key](table)
