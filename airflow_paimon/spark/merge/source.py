"""The MERGE source as a Spark DataFrame: files, a SQL query, or a Paimon table (or what changed in it)."""

from __future__ import annotations

from typing import Any, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from airflow_paimon.format import Catalog

from ..tables import read_changes_df, read_table_df

__all__ = ["load_source"]


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
        return _table_source(spark, source, catalog)
    if "path" in source:
        return _file_source(spark, source, fmt, source_options, empty_schema)
    raise ValueError(f"source {source!r} names no path, table or sql")


def _table_source(spark: SparkSession, source: Mapping[str, Any],
                  catalog: Catalog | None) -> tuple[DataFrame, dict[str, Any]]:
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


def _file_source(spark: SparkSession, source: Mapping[str, Any], fmt: str, source_options: Mapping[str, str] | None,
                 empty_schema: T.StructType | None) -> tuple[DataFrame, dict[str, Any]]:
    fmt = (source.get("format") or fmt).lower()
    if fmt in ("paimon", "sql"):
        raise ValueError(f"source_format {fmt!r} needs a table identifier or a query, not a path")
    options = {"header": "true"} if fmt == "csv" else {}
    options.update({str(k): str(v) for k, v in (source_options or {}).items()})
    options.update({str(k): str(v) for k, v in (source.get("options") or {}).items()})
    reader = spark.read.format(fmt).options(**options)
    info: dict[str, Any] = {"kind": "files", "path": source["path"], "format": fmt}
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
