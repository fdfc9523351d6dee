"""Arrow <-> Spark schemas for Paimon's types, and casting Arrow data to what Spark accepts.

ARRAY, MAP and ROW map to Spark's ArrayType, MapType and StructType, element, key, value and field
nullability kept (Spark map keys are never null, as Paimon stores them).

Spark's Arrow exchange (``mapInArrow``) takes microsecond timestamps only: ``TIMESTAMP`` columns (no time zone)
travel as ``timestamp[us]`` / ``TimestampNTZType``, ``TIMESTAMP_LTZ`` columns as ``timestamp[us, tz=UTC]`` /
``TimestampType``. Paimon TIMESTAMP(7..9) values lose their sub-microsecond digits on the way through Spark.
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T


def arrow_to_spark_type(t: pa.DataType) -> T.DataType:
    if pa.types.is_boolean(t):
        return T.BooleanType()
    if pa.types.is_int8(t):
        return T.ByteType()
    if pa.types.is_int16(t):
        return T.ShortType()
    if pa.types.is_int32(t):
        return T.IntegerType()
    if pa.types.is_int64(t):
        return T.LongType()
    if pa.types.is_float32(t):
        return T.FloatType()
    if pa.types.is_float64(t):
        return T.DoubleType()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return T.StringType()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return T.BinaryType()
    if pa.types.is_decimal(t):
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_date32(t):
        return T.DateType()
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz is not None else T.TimestampNTZType()
    if pa.types.is_map(t):
        return T.MapType(arrow_to_spark_type(t.key_type), arrow_to_spark_type(t.item_type), t.item_field.nullable)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return T.ArrayType(arrow_to_spark_type(t.value_type), t.value_field.nullable)
    if pa.types.is_struct(t):
        return T.StructType([T.StructField(f.name, arrow_to_spark_type(f.type), f.nullable) for f in t])
    raise TypeError(f"no Spark type for Arrow type {t}")


def spark_to_arrow_type(t: T.DataType) -> pa.DataType:
    if isinstance(t, T.BooleanType):
        return pa.bool_()
    if isinstance(t, T.ByteType):
        return pa.int8()
    if isinstance(t, T.ShortType):
        return pa.int16()
    if isinstance(t, T.IntegerType):
        return pa.int32()
    if isinstance(t, T.LongType):
        return pa.int64()
    if isinstance(t, T.FloatType):
        return pa.float32()
    if isinstance(t, T.DoubleType):
        return pa.float64()
    if isinstance(t, (T.StringType, T.CharType, T.VarcharType)):
        return pa.string()
    if isinstance(t, T.BinaryType):
        return pa.binary()
    if isinstance(t, T.DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, T.DateType):
        return pa.date32()
    if isinstance(t, T.TimestampNTZType):
        return pa.timestamp("us")
    if isinstance(t, T.TimestampType):
        return pa.timestamp("us", tz="UTC")
    if isinstance(t, T.ArrayType):
        return pa.list_(pa.field("element", spark_to_arrow_type(t.elementType), t.containsNull))
    if isinstance(t, T.MapType):
        value = pa.field("value", spark_to_arrow_type(t.valueType), t.valueContainsNull)
        # pyarrow takes the item as a field (its nullability); the stubs know only types.
        return pa.map_(spark_to_arrow_type(t.keyType), value)  # type: ignore[call-overload]
    if isinstance(t, T.StructType):
        return pa.struct([pa.field(f.name, spark_to_arrow_type(f.dataType), f.nullable) for f in t.fields])
    raise TypeError(f"no Arrow type for Spark type {t.simpleString()}")


def spark_schema(schema: pa.Schema) -> T.StructType:
    """The Spark schema of Arrow data (every field nullable: Spark checks nothing else)."""
    return T.StructType([T.StructField(f.name, arrow_to_spark_type(f.type), True) for f in schema])


def exchange_schema(schema: T.StructType) -> pa.Schema:
    """The exact Arrow schema Spark expects back from ``mapInArrow`` for this Spark schema."""
    return pa.schema([pa.field(f.name, spark_to_arrow_type(f.dataType), True) for f in schema.fields])


def to_exchange(data: pa.Table | pa.RecordBatch, schema: pa.Schema) -> pa.Table:
    """`data` (columns by name) cast to the exchange schema: timestamps to microseconds, large types folded."""
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    arrays = []
    for f in schema:
        col = data.column(f.name)
        if col.type != f.type:
            safe = not pa.types.is_timestamp(col.type)
            col = pc.cast(col, f.type, safe=safe)
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=schema)


def cast_to(data: pa.Table, schema: pa.Schema, names: Sequence[str] | None = None) -> pa.Table:
    """Columns `names` (default: all of `schema`) of `data` cast to `schema`; absent columns become nulls.

    Timestamps are truncated to the target unit (Spark hands microseconds to TIMESTAMP(3) columns); every other
    cast must be lossless.
    """
    names = list(names) if names is not None else schema.names
    arrays, fields = [], []
    for name in names:
        f = schema.field(name)
        if name in data.column_names:
            col = data.column(name)
            if col.type != f.type:
                col = pc.cast(col, f.type, safe=not (pa.types.is_timestamp(f.type) and pa.types.is_timestamp(col.type)))
        else:
            col = pa.nulls(data.num_rows, f.type)
        arrays.append(col)
        fields.append(pa.field(name, f.type, True))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
