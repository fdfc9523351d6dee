"""Paimon's type strings (as stored in schema files) and their Arrow counterparts.

Only atomic types are read and written; a table with nested types (ARRAY, MAP, ROW, MULTISET, VARIANT) or TIME
columns opens (its snapshots, tags and upkeep work) but its reads and writes are refused with a clear error, so a
reader never returns half-understood data.
"""

from __future__ import annotations

import re
from typing import Literal

import pyarrow as pa

from .errors import UnsupportedTableError

_SIMPLE: dict[str, pa.DataType] = {
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "INTEGER": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "STRING": pa.string(),
    "BYTES": pa.binary(),
    "DATE": pa.date32(),
}
_UNIT_OF_PRECISION: list[Literal["s", "ms", "us", "ns"]] = ["s", "ms", "ms", "ms", "us", "us", "us", "ns", "ns", "ns"]
_PRECISION_OF_UNIT = {"s": 0, "ms": 3, "us": 6, "ns": 9}


def split_nullability(type_str: str) -> tuple[str, bool]:
    s = type_str.strip()
    if s.upper().endswith(" NOT NULL"):
        return s[: -len(" NOT NULL")].strip(), False
    if s.upper().endswith(" NULL"):
        return s[: -len(" NULL")].strip(), True
    return s, True


def type_text(type_json: object) -> str:
    """Paimon's SQL spelling of a type as a schema file stores it (nested types are JSON objects there)."""
    if not isinstance(type_json, dict):
        return str(type_json)
    kind = str(type_json.get("type", "?"))
    base = kind.split()[0]
    if base in ("ARRAY", "MULTISET"):
        text = f"{base}<{type_text(type_json.get('element'))}>"
    elif base == "MAP":
        text = f"MAP<{type_text(type_json.get('key'))}, {type_text(type_json.get('value'))}>"
    elif base == "ROW":
        text = "ROW<" + ", ".join(f"`{f.get('name')}` {type_text(f.get('type'))}"
                                  for f in type_json.get("fields") or ()) + ">"
    else:
        text = base
    return text + " NOT NULL" if kind.endswith("NOT NULL") or type_json.get("nullable") is False else text


def paimon_to_arrow(type_str: object, field_name: str = "?") -> tuple[pa.DataType, bool]:
    """(arrow type, nullable) of a Paimon type as written in a schema file."""
    if not isinstance(type_str, str):
        raise UnsupportedTableError(f"column {field_name!r}: nested type {type_text(type_str)} is not supported")
    base, nullable = split_nullability(type_str)
    upper = re.sub(r"\s+", " ", base.upper())
    if upper in _SIMPLE:
        return _SIMPLE[upper], nullable
    if re.fullmatch(r"(VAR)?CHAR(\(\d+\))?", upper):
        return pa.string(), nullable
    if re.fullmatch(r"(VAR)?BINARY(\(\d+\))?", upper):
        return pa.binary(), nullable
    m = re.fullmatch(r"DECIMAL(?:\((\d+)(?:, ?(\d+))?\))?", upper)
    if m:
        precision = int(m.group(1) or 10)
        scale = int(m.group(2) or 0)
        return pa.decimal128(precision, scale), nullable
    m = re.fullmatch(r"TIMESTAMP(_LTZ)?(?:\((\d)\))?( WITH LOCAL TIME ZONE| WITHOUT TIME ZONE)?", upper)
    if m:
        precision = int(m.group(2)) if m.group(2) is not None else 6
        ltz = bool(m.group(1)) or m.group(3) == " WITH LOCAL TIME ZONE"
        unit = _UNIT_OF_PRECISION[precision]
        return (pa.timestamp(unit, tz="UTC") if ltz else pa.timestamp(unit)), nullable
    raise UnsupportedTableError(f"column {field_name!r}: type {type_str!r} is not supported")


def arrow_to_paimon(arrow_type: pa.DataType, nullable: bool, field_name: str = "?") -> str:
    """Paimon's serialisable type string for an Arrow type (Java's canonical spelling)."""
    t = arrow_type
    if pa.types.is_boolean(t):
        s = "BOOLEAN"
    elif pa.types.is_int8(t):
        s = "TINYINT"
    elif pa.types.is_int16(t):
        s = "SMALLINT"
    elif pa.types.is_int32(t):
        s = "INT"
    elif pa.types.is_int64(t):
        s = "BIGINT"
    elif pa.types.is_float32(t):
        s = "FLOAT"
    elif pa.types.is_float64(t):
        s = "DOUBLE"
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        s = "STRING"
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        s = "BYTES"
    elif pa.types.is_decimal(t) and t.precision <= 38:
        s = f"DECIMAL({t.precision}, {t.scale})"
    elif pa.types.is_date32(t):
        s = "DATE"
    elif pa.types.is_timestamp(t):
        precision = _PRECISION_OF_UNIT[t.unit]
        s = f"TIMESTAMP({precision})" if t.tz is None else f"TIMESTAMP({precision}) WITH LOCAL TIME ZONE"
    else:
        raise UnsupportedTableError(f"column {field_name!r}: Arrow type {t} has no supported Paimon type")
    return s if nullable else s + " NOT NULL"


def normalize_arrow(t: pa.DataType) -> pa.DataType:
    """The single Arrow type this library uses for values of type `t` (large variants folded in)."""
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_timestamp(t) and t.tz is not None and t.tz != "UTC":
        return pa.timestamp(t.unit, tz="UTC")
    return t
