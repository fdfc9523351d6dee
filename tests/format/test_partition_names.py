"""Partition directory names as Paimon spells them (InternalRowPartitionComputer + PartitionPathUtils), for both
values of `partition.legacy-name`.

The expected strings follow the Java sources: legacy names are the `toString()` of the internal value (DATE: an
Integer day number; TIMESTAMP: `LocalDateTime.toString()`), non-legacy names the cast to STRING
(`DateTimeUtils.formatDate` / `formatTimestamp(ts, precision)`), then Hive's path escaping.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format import UnsupportedTableError
from airflow_paimon.format.partition import PartitionCodec

D = dt.date(2026, 1, 1)
T = dt.datetime(2026, 1, 1, 2, 30)


def name(arrow_type: pa.DataType, paimon_type: str, value, legacy: bool, default: str = "__DEFAULT_PARTITION__"):
    codec = PartitionCodec(["p"], [arrow_type], default, [paimon_type], legacy)
    return codec.path([value])[2:-1]


@pytest.mark.parametrize("legacy, expected", [(True, "20454"), (False, "2026-01-01")])
def test_date(legacy, expected):
    assert name(pa.date32(), "DATE", D, legacy) == expected


@pytest.mark.parametrize("unit, ptype, value, legacy, expected", [
    # LocalDateTime.toString drops zero seconds and nanos, and shows the fraction in groups of three digits.
    ("ms", "TIMESTAMP(3)", T, True, "2026-01-01T02%3A30"),
    ("ms", "TIMESTAMP(3)", T.replace(second=5), True, "2026-01-01T02%3A30%3A05"),
    ("us", "TIMESTAMP(6)", T.replace(microsecond=120000), True, "2026-01-01T02%3A30%3A00.120"),
    ("us", "TIMESTAMP(6)", T.replace(microsecond=123400), True, "2026-01-01T02%3A30%3A00.123400"),
    ("ns", "TIMESTAMP(9)", 1767234600_000000007, True, "2026-01-01T02%3A30%3A00.000000007"),
    # formatTimestamp keeps the fraction down to the type's precision, trailing zeros beyond it dropped.
    ("ms", "TIMESTAMP(3)", T, False, "2026-01-01 02%3A30%3A00.000"),
    ("s", "TIMESTAMP(0)", T, False, "2026-01-01 02%3A30%3A00"),
    ("us", "TIMESTAMP(6)", T.replace(microsecond=120000), False, "2026-01-01 02%3A30%3A00.120000"),
    ("ms", "TIMESTAMP(1)", T.replace(microsecond=500000), False, "2026-01-01 02%3A30%3A00.5"),
    ("ms", "TIMESTAMP(2)", T.replace(microsecond=500000), False, "2026-01-01 02%3A30%3A00.50"),
    ("us", "TIMESTAMP(6)", T.replace(microsecond=123456), False, "2026-01-01 02%3A30%3A00.123456"),
    ("ns", "TIMESTAMP(9)", 1767234600_000000000, False, "2026-01-01 02%3A30%3A00.000000000"),
    ("ns", "TIMESTAMP(9)", 1767234600_000000007, False, "2026-01-01 02%3A30%3A00.000000007"),
    # Before the epoch.
    ("us", "TIMESTAMP(6)", dt.datetime(1969, 12, 31, 23, 59, 59, 999000), True, "1969-12-31T23%3A59%3A59.999"),
])
def test_timestamp(unit, ptype, value, legacy, expected):
    assert name(pa.timestamp(unit), ptype, value, legacy) == expected


@pytest.fixture
def berlin():
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Berlin"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


def test_timestamp_with_local_time_zone(berlin):
    instant = dt.datetime(2026, 7, 1, 2, 30, tzinfo=dt.timezone.utc)
    ltz = pa.timestamp("us", tz="UTC")
    # Legacy: Timestamp.toString, the UTC fields. Cast to STRING: the JVM's (here: the process's) time zone.
    assert name(ltz, "TIMESTAMP(6) WITH LOCAL TIME ZONE", instant, True) == "2026-07-01T02%3A30"
    assert name(ltz, "TIMESTAMP(6) WITH LOCAL TIME ZONE", instant, False) == "2026-07-01 04%3A30%3A00.000000"
    assert name(pa.timestamp("ms", tz="UTC"), "TIMESTAMP_LTZ(3)", instant, False) == "2026-07-01 04%3A30%3A00.000"


@pytest.mark.parametrize("legacy", [True, False])
def test_numbers_booleans_decimals_read_the_same_in_both_modes(legacy):
    assert name(pa.int32(), "INT", -7, legacy) == "-7"
    assert name(pa.int64(), "BIGINT", 2**40, legacy) == str(2**40)
    assert name(pa.bool_(), "BOOLEAN", True, legacy) == "true"
    assert name(pa.bool_(), "BOOLEAN", False, legacy) == "false"
    assert name(pa.decimal128(5, 2), "DECIMAL(5, 2)", decimal.Decimal("1.5"), legacy) == "1.50"
    assert name(pa.decimal128(10, 7), "DECIMAL(10, 7)", decimal.Decimal("1E-7"), legacy) == "0.0000001"
    assert name(pa.decimal128(20, 0), "DECIMAL(20, 0)", decimal.Decimal("1E+12"), legacy) == "1000000000000"


@pytest.mark.parametrize("value, expected", [
    (0.1, "0.1"), (1.0, "1.0"), (-2.5, "-2.5"), (100.0, "100.0"), (1234567.0, "1234567.0"),
    (12345678.0, "1.2345678E7"), (1e10, "1.0E10"), (0.001, "0.001"), (0.0001, "1.0E-4"), (1.5e-10, "1.5E-10"),
    (-0.0, "-0.0"), (0.0, "0.0"), (float("nan"), "NaN"), (float("inf"), "Infinity"), (float("-inf"), "-Infinity"),
    (1 / 3, "0.3333333333333333"),
])
def test_double_is_java_double_to_string(value, expected):
    assert name(pa.float64(), "DOUBLE", value, True) == expected


@pytest.mark.parametrize("value, expected", [
    (0.1, "0.1"), (1 / 3, "0.33333334"), (1e10, "1.0E10"), (16777216.0, "1.6777216E7"),
])
def test_float_is_java_float_to_string(value, expected):
    assert name(pa.float32(), "FLOAT", value, False) == expected


@pytest.mark.parametrize("value, expected", [
    ("a/b:c d%e=f", "a%2Fb%3Ac d%25e%3Df"),
    ('{x}[y]^"#*?\\\'', "%7Bx%7D%5By%5D%5E%22%23%2A%3F%5C%27"),
    ("tab\there\x00\x7f", "tab%09here%00%7F"),
    ("ünïcødé €", "ünïcødé €"),
    ("", "__DEFAULT_PARTITION__"),
    ("  \t", "__DEFAULT_PARTITION__"),
    ("\u00a0", "\u00a0"),  # a no-break space is not whitespace to Java
    (None, "__DEFAULT_PARTITION__"),
])
def test_strings_are_escaped_as_paimon_escapes_them(value, expected):
    assert name(pa.string(), "STRING", value, True) == expected
    assert name(pa.string(), "STRING", value, False) == expected


def test_null_uses_partition_default_name_and_keys_are_escaped():
    codec = PartitionCodec(["a:b", "d"], [pa.string(), pa.date32()], "NULL-PART", ["STRING", "DATE"], True)
    assert codec.path([None, None]) == "a%3Ab=NULL-PART/d=NULL-PART/"
    assert codec.path(["x", D]) == "a%3Ab=x/d=20454/"
    assert PartitionCodec([], [], "x").path([]) == ""


def test_bytes_partitions():
    assert name(pa.binary(), "BYTES", b"ab", False) == "ab"
    with pytest.raises(UnsupportedTableError, match="partition.legacy-name = false"):
        name(pa.binary(), "BYTES", b"ab", True)


@pytest.mark.parametrize("legacy, expected", [
    (True, {"d=20454/t=2026-01-01T02%3A30", "d=20455/t=2026-01-02T00%3A00%3A01.500"}),
    (False, {"d=2026-01-01/t=2026-01-01 02%3A30%3A00.000", "d=2026-01-02/t=2026-01-02 00%3A00%3A01.500"}),
])
def test_tables_write_and_read_paimon_directories(catalog, legacy, expected):
    schema = pa.schema([("id", pa.int64()), ("d", pa.date32()), ("t", pa.timestamp("ms"))])
    options = {} if legacy else {"partition.legacy-name": "false"}
    t = catalog.create_table("db.t", schema, partition_keys=["d", "t"], options=options)
    data = pa.table({"id": [1, 2], "d": [D, D + dt.timedelta(days=1)],
                     "t": [T, dt.datetime(2026, 1, 2, 0, 0, 1, 500000)]}, schema=schema)
    t.write(data)
    dirs = set()
    for root, _, files in os.walk(t.path):
        rel = os.path.relpath(root, t.path)
        if any(f.endswith(".parquet") for f in files):
            dirs.add(rel.rsplit("/", 1)[0])
            assert rel.rsplit("/", 1)[1] == "bucket-0"
    assert dirs == expected
    assert t.read().sort_by("id").equals(data)
    for e in t.file_entries(t.latest_snapshot()):
        assert pq.read_metadata(t.data_file_path(t.partition_codec.from_bytes(e.partition), e.bucket, e.file))
