"""The MERGE source read in this process: local Parquet files (a file, or a folder of files) whose column
types Arrow reads exactly as Spark does. Any other source (SQL, a Paimon table or its changes, CSV/JSON/ORC/Avro,
an object-store URI, a nested folder) is Spark's to read: `local_source` says why."""

from __future__ import annotations

import os
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["local_source", "LocalSource", "read_parquet"]

# Names Spark's file listing skips (hidden and metadata files, files still being copied).
_SKIPPED_PREFIXES = ("_", ".")
_SKIPPED_SUFFIX = "._COPYING_"


class LocalSource:
    """Files read here, or the reason they are not (`reason`)."""

    def __init__(self, files: list[str] | None, size: int = 0, reason: str | None = None,
                 path: str | None = None):
        self.files, self.size, self.reason, self.path = files, size, reason, path

    def describe(self) -> dict[str, Any]:
        return {"kind": "files", "path": self.path, "format": "parquet", "files": len(self.files or [])}


def _readable(t: pa.DataType) -> bool:
    """Types Spark reads from Parquet with the values Arrow reads."""
    return (pa.types.is_integer(t) and pa.types.is_signed_integer(t)) or pa.types.is_floating(t) or \
        pa.types.is_boolean(t) or pa.types.is_string(t) or pa.types.is_large_string(t) or \
        pa.types.is_binary(t) or pa.types.is_date32(t) or pa.types.is_decimal(t) or \
        (pa.types.is_timestamp(t) and t.unit in ("ms", "us"))


def local_source(source: Any, source_format: str | None, source_options: Mapping[str, str] | None) -> LocalSource:
    """The Parquet files of a local source, or why Spark must read it."""
    fmt = (source_format or "parquet").lower()
    if isinstance(source, Mapping):
        if set(source) - {"path", "format"}:
            return LocalSource(None, reason="the source is a table, its changes or a query, which Spark reads")
        fmt = (source.get("format") or fmt).lower()
        source = source.get("path")
    if fmt != "parquet":
        return LocalSource(None, reason=f"the source format is {fmt}; the in-process engine reads Parquet files")
    if source_options:
        return LocalSource(None, reason="the source has reader options, which Spark applies")
    if not isinstance(source, str) or not source:
        return LocalSource(None, reason="the source is not a path")
    path = source[len("file://"):] if source.startswith("file://") else source
    if "://" in path:
        return LocalSource(None, reason=f"the source {source} is not on the local filesystem")
    if not os.path.exists(path):
        return LocalSource(None, reason=f"the source {source} does not exist")
    if os.path.isfile(path):
        return LocalSource([path], os.path.getsize(path), path=source)
    files, size = [], 0
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.name.startswith(_SKIPPED_PREFIXES) or entry.name.endswith(_SKIPPED_SUFFIX):
                continue
            if not entry.is_file():
                return LocalSource(None, reason=f"the source folder {source} has sub-folders, which Spark discovers")
            files.append(entry.path)
            size += entry.stat().st_size
    if not files:
        return LocalSource(None, reason=f"the source folder {source} holds no data files")
    return LocalSource(sorted(files), size, path=source)


def read_parquet(files: list[str]) -> pa.Table | str:
    """The rows of `files` (string columns as Arrow's string type), or why Spark must read them."""
    parts, schema = [], None
    for f in files:
        try:
            parquet = pq.ParquetFile(f)
        except (pa.ArrowInvalid, OSError) as e:
            return f"{f} is not a Parquet file Arrow reads ({e})"
        with parquet:
            table = parquet.read()
        if schema is None:
            schema = table.schema
            odd = [x.name for x in schema if not _readable(x.type)]
            if odd:
                return f"the source columns {odd} have types Spark reads its own way"
        elif table.schema != schema:
            return "the source files have different schemas, which Spark reconciles"
        parts.append(table)
    data = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    fields = [pa.field(x.name, pa.string() if pa.types.is_large_string(x.type) else x.type) for x in data.schema]
    return data.cast(pa.schema(fields))



