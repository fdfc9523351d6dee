"""`bucket-function.type = mod | hive`: the vectorised functions equal a row-at-a-time model of Paimon's Java
(ModBucketFunction, HiveBucketFunction, HiveHasher, Java's hashCode of each boxed value) on any values; the tables
take writes, each row in its function's bucket; a bucket key the function cannot take is refused with nothing
written. (test_bucket_functions_interop.py checks the same functions against pypaimon-rust's writes.)"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_paimon.format.bucketing import bucket_ids
from airflow_paimon.format.errors import InvalidOptionError

from .upkeep_helpers import tree_digest

INT32 = 2**32


def _signed32(v: int) -> int:
    v %= INT32
    return v - INT32 if v >= 2**31 else v


def _java_hash(value, arrow_type: pa.DataType) -> int:
    """Java's hash of one boxed value, as HiveBucketFunction.computeHash takes it (signed 32 bits)."""
    if value is None:
        return 0
    if pa.types.is_boolean(arrow_type):
        return 1 if value else 0
    if pa.types.is_date32(arrow_type):
        return (value - dt.date(1970, 1, 1)).days
    if pa.types.is_integer(arrow_type) and arrow_type.bit_width <= 32:
        return value
    if pa.types.is_int64(arrow_type):
        return _signed32(value ^ ((value % 2**64) >> 32))
    if pa.types.is_float32(arrow_type):
        if value == 0:
            return 0
        return 0x7FC00000 if math.isnan(value) else _signed32(struct.unpack("<I", struct.pack("<f", value))[0])
    if pa.types.is_float64(arrow_type):
        bits = 0x7FF8000000000000 if math.isnan(value) else struct.unpack("<Q", struct.pack("<d", value))[0]
        return 0 if value == 0 else _signed32(bits ^ (bits >> 32))
    if pa.types.is_string(arrow_type) or pa.types.is_binary(arrow_type):
        data = value.encode() if isinstance(value, str) else value
        h = 0
        for b in data:
            h = _signed32(31 * h + (b - 256 if b >= 128 else b))
        return h
    if pa.types.is_decimal(arrow_type):   # BigDecimal.stripTrailingZeros().hashCode()
        sign, digits, exponent = value.as_tuple()
        unscaled, scale = int("".join(map(str, digits))), -exponent
        if unscaled == 0:
            unscaled, scale = 0, 0
        while unscaled and unscaled % 10 == 0:
            unscaled, scale = unscaled // 10, scale - 1
        if scale < 0:
            unscaled, scale = unscaled * 10 ** -scale, 0
        words, magnitude = [], unscaled
        while magnitude:
            words.insert(0, magnitude & 0xFFFFFFFF)
            magnitude >>= 32
        h = 0
        for w in words:
            h = _signed32(31 * h + w)
        if sign:
            h = _signed32(-h)
        return _signed32(31 * h + scale)
    raise AssertionError(arrow_type)


def _model_hive(row: tuple, types: list[pa.DataType], buckets: int) -> int:
    h = 0
    for value, t in zip(row, types):
        h = _signed32(31 * h + _java_hash(value, t))
    return (h & 0x7FFFFFFF) % buckets


COLUMN_TYPES = {
    "i8": (pa.int8(), st.integers(-128, 127)),
    "i16": (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "i32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "i64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "b": (pa.bool_(), st.booleans()),
    "f": (pa.float32(), st.floats(width=32, allow_infinity=True, allow_nan=True)),
    "d": (pa.float64(), st.floats(allow_infinity=True, allow_nan=True)),
    "s": (pa.string(), st.text(max_size=30)),
    "bin": (pa.binary(), st.binary(max_size=30)),
    "dec": (pa.decimal128(20, 4), st.decimals(min_value=-10**15, max_value=10**15, places=4, allow_nan=False)),
    "dt": (pa.date32(), st.dates(min_value=dt.date(1, 1, 1))),
}


@st.composite
def keys(draw):
    names = draw(st.lists(st.sampled_from(sorted(COLUMN_TYPES)), min_size=1, max_size=4, unique=True))
    n = draw(st.integers(0, 25))
    columns = {name: draw(st.lists(st.none() | COLUMN_TYPES[name][1], min_size=n, max_size=n)) for name in names}
    return pa.table({name: pa.array(values, COLUMN_TYPES[name][0]) for name, values in columns.items()})


@settings(max_examples=300, deadline=None)
@given(keys(), st.integers(1, 40))
def test_hive_equals_the_model_of_paimons_java(table, buckets):
    types = [f.type for f in table.schema]
    want = [_model_hive(tuple(r.values()), types, buckets) for r in table.to_pylist()]
    assert bucket_ids(table, buckets, "hive").tolist() == want


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([pa.int32(), pa.int64()]), st.lists(st.none() | st.integers(-(2**31), 2**31 - 1)),
       st.integers(1, 40))
def test_mod_is_the_floor_modulus(arrow_type, values, buckets):
    got = bucket_ids(pa.table({"k": pa.array(values, arrow_type)}), buckets, "mod").tolist()
    assert got == [(v or 0) % buckets for v in values]   # Python's % is Java's floorMod; NULL reads as 0


def test_some_known_values():
    # String.hashCode-like of UTF-8 "a": 97; BigDecimal("1.50") -> 1.5: 31 * 15 + 1 = 466; Long.hashCode(-1) = 0
    table = pa.table({"s": ["a"], "d": pa.array([decimal.Decimal("1.50")], pa.decimal128(10, 2)),
                      "l": pa.array([-1], pa.int64())})
    assert bucket_ids(table.select(["s"]), 1000, "hive").tolist() == [97]
    assert bucket_ids(table.select(["d"]), 1000, "hive").tolist() == [466]
    assert bucket_ids(table.select(["l"]), 1000, "hive").tolist() == [0]
    assert bucket_ids(table, 1000, "hive").tolist() == [((97 * 31 + 466) * 31) % 1000]
    assert bucket_ids(pa.table({"k": pa.array([-5, 5, 0], pa.int64())}), 4, "mod").tolist() == [3, 1, 0]


def test_values_longer_than_a_step_of_the_string_hash():
    """Values past 4,096 bytes are summed one by one, the others a byte position at a time: both as the model."""
    values = ["é" * 3000, "a" * 4096, "b" * 4097, None, "", "x" * 9000 + "€"]
    table = pa.table({"s": values}).slice(1)   # sliced: the offsets start past 0
    types = [pa.string()]
    assert bucket_ids(table, 997, "hive").tolist() == [_model_hive((v,), types, 997) for v in values[1:]]


SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("s", pa.string(), nullable=False),
                    ("v", pa.string())])


@pytest.mark.parametrize("function, bucket_key", [("mod", "k"), ("hive", "k,s"), ("hive", "s")])
@pytest.mark.parametrize("primary_key", [True, False])
def test_tables_take_writes_in_their_functions_buckets(catalog, function, bucket_key, primary_key):
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["k", "s"] if primary_key else [], options={
        "bucket": "5", "bucket-function.type": function.upper(), "bucket-key": bucket_key})
    rows = pa.table({"k": list(range(-20, 20)), "s": [f"é{k}" for k in range(-20, 20)], "v": ["a"] * 40},
                    schema=SCHEMA)
    t.write(rows)
    t.write(rows.slice(0, 10).set_column(2, "v", pa.array(["b"] * 10)))
    keys = bucket_key.split(",")
    for entry in t.file_entries(t.latest_snapshot()):
        path = t.data_file_path((), entry.bucket, entry.file)
        stored = _read_keys(path, keys)
        assert set(bucket_ids(stored, 5, function).tolist()) == {entry.bucket}
    got = t.read().sort_by([("k", "ascending"), ("v", "ascending")])
    if primary_key:
        assert got.column("v").to_pylist() == ["b"] * 10 + ["a"] * 30
    else:
        assert got.num_rows == 50


def _read_keys(path: str, keys: list[str]) -> pa.Table:
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=keys).cast(pa.schema([SCHEMA.field(k) for k in keys]))


@pytest.mark.parametrize("function, schema, message", [
    ("mod", pa.schema([pa.field("k", pa.string(), nullable=False), ("v", pa.string())]),
     "'mod' needs exactly one bucket-key column of type INT or BIGINT"),
    ("hive", pa.schema([pa.field("k", pa.timestamp("us"), nullable=False), ("v", pa.string())]),
     "'hive' cannot hash the bucket-key column 'k' of type timestamp"),
])
def test_a_bucket_key_the_function_cannot_take_is_refused_with_nothing_written(catalog, function, schema, message):
    t = catalog.create_table("db.t", schema, primary_keys=["k"], options={
        "bucket": "3", "bucket-function.type": function})
    before = tree_digest(t.path)
    with pytest.raises(InvalidOptionError, match=message):
        t.write(pa.table({"k": pa.array([dt.datetime(2026, 1, 1)] if function == "hive" else ["x"],
                                        schema.field("k").type), "v": ["a"]}, schema=schema))
    assert tree_digest(t.path) == before
