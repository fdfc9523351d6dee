"""Paimon's types (as stored in schema files) and their Arrow counterparts.

Atomic types are strings in a schema file (`"BIGINT NOT NULL"`); the nested types ARRAY, MAP and ROW are JSON
objects there, as Paimon's `DataTypeJsonParser` reads them: `{"type": "ARRAY", "element": ...}`,
`{"type": "MAP", "key": ..., "value": ...}`, `{"type": "ROW", "fields": [{"id", "name", "type"}, ...]}`, each
with " NOT NULL" appended to `type` when not nullable. They map to Arrow `list<element>`, `map<key, value>` and
`struct`. A table with other types (MULTISET, VARIANT, VECTOR, TIME, ...) opens (its snapshots, tags and upkeep
work) but its reads and writes are refused with a clear error, so a reader never returns half-understood data.

Data files carry Parquet field ids on nested fields too, as Paimon's `ParquetSchemaConverter` writes them: a ROW
field's own id; an array element, map key and map value an id derived from the enclosing column's id and depth.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Literal, Union

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
# A type as a schema file stores it: a string for atomic types, a JSON object for nested ones.
PaimonType = Union[str, dict[str, Any]]

# Paimon's SpecialFields: ids of array elements and map keys/values in data files.
_STRUCTURED_ID_BASE = (2**31 - 1) // 4
_STRUCTURED_DEPTH_LIMIT = 1 << 10

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


def is_nested(type_json: object) -> bool:
    return isinstance(type_json, dict)


def _nested_kind(type_json: dict[str, Any]) -> tuple[str, bool]:
    kind = str(type_json.get("type", "?"))
    nullable = "NOT NULL" not in kind.upper() and type_json.get("nullable") is not False
    return re.split(r"[\s<]", kind.strip(), maxsplit=1)[0].upper(), nullable


def paimon_to_arrow(type_str: object, field_name: str = "?") -> tuple[pa.DataType, bool]:
    """(arrow type, nullable) of a Paimon type as written in a schema file."""
    if isinstance(type_str, dict):
        return _nested_to_arrow(type_str, field_name, None, 0)
    if not isinstance(type_str, str):
        raise UnsupportedTableError(f"column {field_name!r}: type {type_str!r} is not a Paimon type")
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


def _nested_to_arrow(type_json: dict[str, Any], field_name: str, column_id: int | None,
                     depth: int) -> tuple[pa.DataType, bool]:
    """The Arrow type of a nested Paimon type; with `column_id`, nested fields carry Parquet field ids."""
    base, nullable = _nested_kind(type_json)

    def child(name: str, child_type: object, field_id: int | None, nullable_override: bool | None = None) -> pa.Field:
        if isinstance(child_type, dict):
            t, n = _nested_to_arrow(child_type, field_name, column_id, depth + 1)
        else:
            t, n = paimon_to_arrow(child_type, field_name)
        metadata = None if field_id is None else {b"PARQUET:field_id": str(field_id).encode()}
        return pa.field(name, t, nullable=n if nullable_override is None else nullable_override, metadata=metadata)

    def structured_id(sign: int) -> int | None:
        if column_id is None:
            return None
        return _STRUCTURED_ID_BASE + sign * (column_id * _STRUCTURED_DEPTH_LIMIT + depth + 1)

    if base == "ARRAY" and "element" in type_json:
        return pa.list_(child("element", type_json["element"], structured_id(1))), nullable
    if base == "MAP" and "key" in type_json and "value" in type_json:
        # Parquet has no null map keys: Paimon stores keys required whatever their declared nullability.
        key = child("key", type_json["key"], structured_id(-1), nullable_override=False)
        value = child("value", type_json["value"], structured_id(1))
        # pyarrow takes the key and item fields (their names, nullability, field ids); the stubs know only types.
        return pa.map_(key, value), nullable  # type: ignore[call-overload]
    if base == "ROW" and isinstance(type_json.get("fields"), list):
        fields = []
        for f in type_json["fields"]:
            if column_id is None:
                fields.append(child(str(f["name"]), f["type"], None))
            else:
                fields.append(_row_field_with_ids(f, field_name))
        return pa.struct(fields), nullable
    raise UnsupportedTableError(f"column {field_name!r}: nested type {type_text(type_json)} is not supported")


def _row_field_with_ids(f: dict[str, Any], column_name: str) -> pa.Field:
    field_id = int(f["id"])
    t = f["type"]
    if isinstance(t, dict):
        # Below a ROW field, element/key/value ids derive from that field's own id, as in Paimon.
        arrow_type, nullable = _nested_to_arrow(t, column_name, field_id, 0)
    else:
        arrow_type, nullable = paimon_to_arrow(t, column_name)
    return pa.field(str(f["name"]), arrow_type, nullable=nullable,
                    metadata={b"PARQUET:field_id": str(field_id).encode()})


def arrow_field_with_ids(name: str, type_json: PaimonType, field_id: int) -> pa.Field:
    """The Arrow field of a column as data files store it: Parquet field ids on the column and nested fields."""
    if isinstance(type_json, dict):
        t, nullable = _nested_to_arrow(type_json, name, field_id, 0)
    else:
        t, nullable = paimon_to_arrow(type_json, name)
    return pa.field(name, t, nullable=nullable, metadata={b"PARQUET:field_id": str(field_id).encode()})


def nested_field_ids(type_json: object) -> list[int]:
    """Ids of the ROW fields inside a type (they count towards a schema's highest field id)."""
    if not isinstance(type_json, dict):
        return []
    out: list[int] = []
    for key in ("element", "key", "value"):
        out += nested_field_ids(type_json.get(key))
    for f in type_json.get("fields") or ():
        out.append(int(f["id"]))
        out += nested_field_ids(f.get("type"))
    return out


def arrow_to_paimon(arrow_type: pa.DataType, nullable: bool, field_name: str = "?",
                    next_id: Callable[[], int] | None = None) -> PaimonType:
    """Paimon's serialisable type for an Arrow type (Java's canonical spelling); `next_id` numbers the fields of
    nested ROW types (without it, nested types are refused)."""
    t = arrow_type
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t) or pa.types.is_struct(t):
        if next_id is None:
            raise UnsupportedTableError(f"column {field_name!r}: nested Arrow type {t} cannot be given here")
        return _nested_to_paimon(t, nullable, field_name, next_id)
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


def _nested_to_paimon(t: pa.DataType, nullable: bool, field_name: str, next_id: Callable[[], int]) -> PaimonType:
    suffix = "" if nullable else " NOT NULL"
    if pa.types.is_map(t):
        key = arrow_to_paimon(normalize_arrow(t.key_type), False, field_name, next_id)
        value = arrow_to_paimon(normalize_arrow(t.item_type), t.item_field.nullable, field_name, next_id)
        return {"type": "MAP" + suffix, "key": key, "value": value}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        element = arrow_to_paimon(normalize_arrow(t.value_type), t.value_field.nullable, field_name, next_id)
        return {"type": "ARRAY" + suffix, "element": element}
    assert isinstance(t, pa.StructType)
    fields = []
    for f in t:
        # Java numbers a ROW's fields after their own nested fields (the builder takes the id last).
        field_type = arrow_to_paimon(normalize_arrow(f.type), f.nullable, field_name, next_id)
        fields.append({"id": next_id(), "name": f.name, "type": field_type})
    return {"type": "ROW" + suffix, "fields": fields}


def normalize_arrow(t: pa.DataType) -> pa.DataType:
    """The single Arrow type this library uses for values of type `t` (large variants folded in)."""
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_timestamp(t) and t.tz is not None and t.tz != "UTC":
        return pa.timestamp(t.unit, tz="UTC")
    if pa.types.is_large_list(t):
        return pa.list_(t.value_field.with_type(normalize_arrow(t.value_type)))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(normalize_arrow(t.value_type)))
    if pa.types.is_map(t):
        key, item = t.key_field.with_type(normalize_arrow(t.key_type)), t.item_field.with_type(
            normalize_arrow(t.item_type))
        return pa.map_(key, item)  # type: ignore[call-overload,no-any-return]  # fields, as above
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(normalize_arrow(f.type)) for f in t])
    return t
