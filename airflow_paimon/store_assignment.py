"""Which source values a MERGE may store into a target column: Spark's ANSI store-assignment rules.

Spark SQL's ``MERGE``/``INSERT`` check every assigned value against its column with
``spark.sql.storeAssignmentPolicy`` (``ANSI`` by default): a value of the same type, a NULL, any number into a
numeric column (overflow then fails at run time), any atomic value into a string column, and dates and timestamps
among themselves are stored (cast); anything else -- a string into a number, a date or a boolean, a number into a
boolean or a date, binary into anything but string -- is refused before any row is read. The merge follows these
rules on every path (Spark, the application's driver and the in-process engine), so a source whose ``amount``
column is a string fails naming the column and both types instead of being cast silently.

Arrow types only: the Spark path maps its types with ``schema_map.spark_to_arrow_type`` first, the driver path
(which must not import pyspark) reads Arrow schemas directly.
"""

from __future__ import annotations

import pyarrow as pa

from airflow_paimon.format.errors import SchemaMismatchError

__all__ = ["StoreAssignmentError", "can_store_assign", "check_store_assignment", "sql_type_name"]


class StoreAssignmentError(SchemaMismatchError):
    """A source value cannot be stored into its target column under Spark's ANSI store-assignment rules."""


def _is_numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)


def _is_datetime(t: pa.DataType) -> bool:
    return pa.types.is_date(t) or pa.types.is_timestamp(t)


def _is_atomic(t: pa.DataType) -> bool:
    return (pa.types.is_boolean(t) or _is_numeric(t) or _is_string(t) or _is_binary(t) or _is_datetime(t)
            or pa.types.is_null(t))


def sql_type_name(t: pa.DataType | None, fallback: str = "unknown") -> str:
    """The Spark SQL name of Arrow type `t` (``bigint``, ``double``, ``timestamp_ntz``), for messages."""
    if t is None:
        return fallback
    names = {pa.int8(): "tinyint", pa.int16(): "smallint", pa.int32(): "int", pa.int64(): "bigint",
             pa.float32(): "float", pa.float64(): "double", pa.bool_(): "boolean", pa.date32(): "date",
             pa.null(): "void"}
    if t in names:
        return names[t]
    if _is_string(t):
        return "string"
    if _is_binary(t):
        return "binary"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    return str(t)


def can_store_assign(source: pa.DataType | None, target: pa.DataType) -> bool:
    """Whether Spark stores a value of type `source` into a column of type `target` (None: a type with no
    Arrow equivalent, e.g. an interval, which only a string column takes -- as its text)."""
    if source is None:
        return _is_string(target)
    if source == target or pa.types.is_null(source):
        return True
    if _is_numeric(source) and _is_numeric(target):
        return True
    if _is_string(target):
        return _is_atomic(source)
    if _is_datetime(source) and _is_datetime(target):
        return True
    return _is_binary(source) and _is_binary(target)


def check_store_assignment(column: str, source: pa.DataType | None, target: pa.DataType, *,
                           source_name: str | None = None, what: str = "the MERGE source") -> None:
    """StoreAssignmentError naming `column` and both types unless Spark would store `source` into `target`."""
    if can_store_assign(source, target):
        return
    given = sql_type_name(source, source_name or "unknown")
    wanted = sql_type_name(target)
    raise StoreAssignmentError(
        f"{what}: cannot store a {given} value into the {wanted} target column {column!r}; Spark's MERGE refuses "
        f"{given} -> {wanted} (ANSI store assignment). Nothing was committed. Give the source a {wanted} column "
        f"(e.g. CAST({column} AS {wanted.upper()}) in a SQL source, or fix the files), or assign an expression "
        "of a storable type.")
