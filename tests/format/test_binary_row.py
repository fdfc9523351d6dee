"""BinaryRow bytes and the vectorised bucket hash, checked without pypaimon.

The layout assertions spell out the bytes Java's BinaryRowWriter produces; the hash tests compare the
vectorised `hash_codes` against a deliberately plain Murmur3 over `serialize_row` bytes, so the two
code paths (one row at a time, whole columns at a time) check each other.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
import struct

import numpy as np
import pyarrow as pa
import pytest

from airflow_paimon.format import bucketing
from airflow_paimon.format.binary_row import (
    EMPTY_ROW,
    deserialize_row,
    fixed_part_size,
    null_bits_size,
    serialize_row,
    unscaled_to_bytes,
)
from airflow_paimon.format.bucketing import (
    bucket_ids,
    buckets_from_hash_codes,
    hash_bytes_by_words,
    hash_codes,
)

D = decimal.Decimal
UTC = dt.timezone.utc


# --------------------------------------------------------------------------------------------
# A plain reference Murmur3-32 by words (seed 42), written for readability, not speed.


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def reference_hash(row: bytes) -> int:
    assert len(row) % 4 == 0
    h = 42
    for i in range(0, len(row), 4):
        k = int.from_bytes(row[i : i + 4], "little")
        k = (k * 0xCC9E2D51) & 0xFFFFFFFF
        k = _rotl(k, 15)
        k = (k * 0x1B873593) & 0xFFFFFFFF
        h ^= k
        h = _rotl(h, 13)
        h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    h ^= len(row)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def java_bucket(h: int, n: int) -> int:
    # Java's h % n has the sign of h and the magnitude of abs(h) % n; Math.abs then drops the sign.
    return abs(h) % n


def row_hash(values: list, types: list[pa.DataType]) -> int:
    return reference_hash(serialize_row(values, types)[4:])


# --------------------------------------------------------------------------------------------
# Layout


def test_empty_row_is_arity_zero_and_one_zero_word():
    assert EMPTY_ROW == bytes(12)
    assert serialize_row([], []) == EMPTY_ROW
    assert deserialize_row(EMPTY_ROW, []) == []
    assert deserialize_row(b"", []) == []
    # A reader given the real column types still reads Paimon's empty stats row as "no values".
    assert deserialize_row(EMPTY_ROW, [pa.int32()]) == []


def test_sizes():
    assert null_bits_size(0) == 8
    assert null_bits_size(56) == 8
    assert null_bits_size(57) == 16
    assert fixed_part_size(3) == 8 + 24


def test_int_row_bytes():
    data = serialize_row([5, -1], [pa.int32(), pa.int8()])
    assert data[:4] == b"\x00\x00\x00\x02"
    row = data[4:]
    assert row[:8] == bytes(8)  # RowKind INSERT, no nulls
    assert row[8:16] == struct.pack("<i", 5) + bytes(4)
    # Narrow ints fill only their own bytes; the rest of the slot stays zero (no sign extension).
    assert row[16:24] == b"\xff" + bytes(7)
    assert len(row) == 24


def test_null_bits_and_zero_slot():
    row = serialize_row([None, 7, None], [pa.int64(), pa.int64(), pa.string()])[4:]
    assert row[1] == 0b101  # fields 0 and 2 -> bits 8 and 10
    assert row[8:16] == bytes(8)
    assert row[24:32] == bytes(8)


def test_many_fields_spill_into_second_null_word():
    types = [pa.int32()] * 60
    values = [None if i in (0, 55, 56, 59) else i for i in range(60)]
    data = serialize_row(values, types)
    assert len(data) == 4 + 16 + 60 * 8
    bits = int.from_bytes(data[4:20], "little")
    assert {i for i in range(60) if bits >> (i + 8) & 1} == {0, 55, 56, 59}
    assert deserialize_row(data, types) == values


def test_short_string_is_inlined_with_mark():
    row = serialize_row(["abc"], [pa.string()])[4:]
    assert row[8:16] == b"abc" + bytes(4) + bytes([0x80 | 3])
    row = serialize_row([""], [pa.string()])[4:]
    assert row[8:16] == bytes(7) + b"\x80"
    row = serialize_row(["1234567"], [pa.string()])[4:]
    assert row[8:16] == b"1234567\x87"
    assert len(row) == 16


def test_long_string_goes_to_variable_part():
    row = serialize_row([1, "12345678", b"abcdefghijk"], [pa.int32(), pa.string(), pa.binary()])[4:]
    fixed = 8 + 3 * 8
    assert struct.unpack_from("<Q", row, 16)[0] == (fixed << 32) | 8
    assert struct.unpack_from("<Q", row, 24)[0] == ((fixed + 8) << 32) | 11
    assert row[fixed : fixed + 8] == b"12345678"
    assert row[fixed + 8 :] == b"abcdefghijk" + bytes(5)


def test_compact_decimal_is_unscaled_long():
    row = serialize_row([D("-12.345")], [pa.decimal128(10, 3)])[4:]
    assert struct.unpack_from("<q", row, 8)[0] == -12345
    # Half-up rounding to the type's scale, as Java's Decimal.fromBigDecimal.
    row = serialize_row([D("1.2345")], [pa.decimal128(10, 3)])[4:]
    assert struct.unpack_from("<q", row, 8)[0] == 1235


def test_wide_decimal_uses_java_biginteger_bytes():
    t = pa.decimal128(38, 0)
    row = serialize_row([D(-128)], [t])[4:]
    assert struct.unpack_from("<Q", row, 8)[0] == (16 << 32) | 1
    assert row[16:] == b"\x80" + bytes(15)
    row = serialize_row([D(128)], [t])[4:]
    assert struct.unpack_from("<Q", row, 8)[0] == (16 << 32) | 2
    assert row[16:] == b"\x00\x80" + bytes(14)
    assert unscaled_to_bytes(0) == b"\x00"
    assert unscaled_to_bytes(-1) == b"\xff"
    assert unscaled_to_bytes(-129) == b"\xff\x7f"
    assert unscaled_to_bytes(-(2**127)) == b"\x80" + bytes(15)
    assert unscaled_to_bytes(2**127 - 1) == b"\x7f" + b"\xff" * 15


def test_null_wide_decimal_and_timestamp_reserve_space_like_java():
    types = [pa.decimal128(20, 2), pa.timestamp("us"), pa.int32()]
    row = serialize_row([None, None, None], types)[4:]
    fixed = 8 + 3 * 8
    assert row[1] == 0b111
    assert struct.unpack_from("<Q", row, 8)[0] == fixed << 32
    assert struct.unpack_from("<Q", row, 16)[0] == (fixed + 16) << 32
    assert row[24:32] == bytes(8)
    assert len(row) == fixed + 16 + 8 and row[fixed:] == bytes(24)


def test_timestamps_compact_and_not():
    when = dt.datetime(2024, 5, 6, 7, 8, 9, 123456)
    millis = 1714979289123
    row = serialize_row([when], [pa.timestamp("ms")])[4:]
    assert struct.unpack_from("<q", row, 8)[0] == millis
    row = serialize_row([when], [pa.timestamp("s")])[4:]
    assert struct.unpack_from("<q", row, 8)[0] == 1714979289000
    row = serialize_row([when], [pa.timestamp("us")])[4:]
    assert struct.unpack_from("<Q", row, 8)[0] == (16 << 32) | 456_000
    assert struct.unpack_from("<q", row, 16)[0] == millis
    # Before the epoch the millis floor and the nanos stay positive, as Java's Timestamp.
    before = dt.datetime(1969, 12, 31, 23, 59, 59, 999_500)
    row = serialize_row([before], [pa.timestamp("us")])[4:]
    assert struct.unpack_from("<q", row, 16)[0] == -1
    assert struct.unpack_from("<Q", row, 8)[0] & 0xFFFFFFFF == 500_000


def test_aware_datetimes_are_instants():
    t = pa.timestamp("us", tz="UTC")
    aware = dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert serialize_row([aware], [t]) == serialize_row([dt.datetime(2024, 1, 1, 10, tzinfo=UTC)], [t])
    assert deserialize_row(serialize_row([aware], [t]), [t]) == [aware]


def test_date_and_time():
    row = serialize_row([dt.date(1970, 1, 11)], [pa.date32()])[4:]
    assert row[8:16] == struct.pack("<i", 10) + bytes(4)
    row = serialize_row([dt.time(1, 2, 3, 4000)], [pa.time32("ms")])[4:]
    assert struct.unpack_from("<i", row, 8)[0] == 3_723_004


def test_deserialize_rejects_wrong_arity():
    with pytest.raises(ValueError):
        deserialize_row(serialize_row([1], [pa.int32()]), [pa.int32(), pa.int32()])
    with pytest.raises(ValueError):
        serialize_row([1, 2], [pa.int32()])


def test_decimal_overflow_is_an_error():
    with pytest.raises(ValueError):
        serialize_row([D("123.4")], [pa.decimal128(3, 1)])


# --------------------------------------------------------------------------------------------
# Round trips

ROUND_TRIP_CASES = [
    (pa.bool_(), [True, False]),
    (pa.int8(), [0, -128, 127]),
    (pa.int16(), [-32768, 32767, 3]),
    (pa.int32(), [-(2**31), 2**31 - 1, 0]),
    (pa.int64(), [-(2**63), 2**63 - 1, 42]),
    (pa.float32(), [0.5, -1.25, 3.4028234663852886e38, float("inf")]),
    (pa.float64(), [0.1, -2.5e-300, float("-inf")]),
    (pa.decimal128(10, 2), [D("12345678.90"), D("-0.01"), D("0.00")]),
    (pa.decimal128(18, 0), [D("999999999999999999"), D("-999999999999999999")]),
    (pa.decimal128(19, 4), [D("123456789012345.6789"), D("-0.0001")]),
    (pa.decimal128(38, 10), [D("1234567890123456789012345678.0123456789"), D("-128"), D("0E-10")]),
    (pa.date32(), [dt.date(2024, 2, 29), dt.date(1900, 1, 1), dt.date(1970, 1, 1)]),
    (pa.time32("ms"), [dt.time(23, 59, 59, 999000), dt.time(0, 0)]),
    (pa.timestamp("s"), [dt.datetime(2024, 1, 2, 3, 4, 5), dt.datetime(1960, 1, 1)]),
    (pa.timestamp("ms"), [dt.datetime(2024, 1, 2, 3, 4, 5, 678000)]),
    (pa.timestamp("us"), [dt.datetime(2024, 1, 2, 3, 4, 5, 678901), dt.datetime(1900, 6, 1, 0, 0, 0, 1)]),
    (pa.timestamp("ms", tz="UTC"), [dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)]),
    (pa.timestamp("us", tz="UTC"), [dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)]),
    (pa.string(), ["", "a", "1234567", "12345678", "héllo wörld, ünïcode ✓", "x" * 300]),
    (pa.large_string(), ["short", "a rather longer string"]),
    (pa.binary(), [b"", b"\x00\xff", b"\x01" * 7, b"\x02" * 8, bytes(range(256))]),
    (pa.large_binary(), [b"abc", b"abcdefghijklmnop"]),
]


@pytest.mark.parametrize("t, values", ROUND_TRIP_CASES, ids=[str(c[0]) for c in ROUND_TRIP_CASES])
def test_round_trip_each_type(t, values):
    for v in values + [None]:
        assert deserialize_row(serialize_row([v], [t]), [t]) == [v]
    # and as pyarrow gives them back
    for v in pa.array(values + [None], type=t).to_pylist():
        assert deserialize_row(serialize_row([v], [t]), [t]) == [v]


def test_round_trip_nanosecond_timestamps():
    pd = pytest.importorskip("pandas")
    for t in (pa.timestamp("ns"), pa.timestamp("ns", tz="UTC")):
        values = pa.array([1_700_000_000_123_456_789, -1, None], type=t).to_pylist()
        out = [deserialize_row(serialize_row([v], [t]), [t])[0] for v in values]
        assert out == values
        assert isinstance(out[0], pd.Timestamp) and out[0].nanosecond == 789


def test_round_trip_mixed_row_with_nulls():
    types = [t for t, _ in ROUND_TRIP_CASES]
    for seed in range(20):
        rng = random.Random(seed)
        values = [rng.choice(vals + [None]) for _, vals in ROUND_TRIP_CASES]
        assert deserialize_row(serialize_row(values, types), types) == values


# --------------------------------------------------------------------------------------------
# Vectorised hashing against the one-row-at-a-time path


def _random_column(rng: np.random.Generator, t: pa.DataType, n: int, null_rate: float) -> pa.Array:
    if pa.types.is_boolean(t):
        values = rng.integers(0, 2, n).astype(bool)
    elif pa.types.is_integer(t):
        info = np.iinfo(t.to_pandas_dtype())
        values = rng.integers(info.min, info.max, n, endpoint=True, dtype=info.dtype)
    elif pa.types.is_floating(t):
        values = rng.normal(0, 1e6, n).astype(t.to_pandas_dtype())
    elif pa.types.is_decimal(t):
        digits = t.precision
        py = random.Random(int(rng.integers(0, 2**32)))
        # magnitudes of every size up to the precision, either sign
        ints = [py.randrange(10 ** py.randint(1, digits)) * py.choice((1, -1)) for _ in range(n)]
        # a few values whose Java byte length is not Python's (negative powers of two)
        special = [-(2**7), -(2**15), -(2**63), 0, -1]
        for k, s in enumerate(special[: n // 10]):
            if len(str(abs(s))) <= digits:
                ints[k * 7 % n] = s
        return pa.array([None if rng.random() < null_rate else D(i).scaleb(-t.scale) for i in ints], type=t)
    elif pa.types.is_date32(t):
        values = rng.integers(-30_000, 30_000, n).astype(np.int32)
        return _with_nulls(pa.array(values).cast(t), rng, null_rate)
    elif pa.types.is_time(t):
        per_day = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}[t.unit]
        storage = pa.int32() if pa.types.is_time32(t) else pa.int64()
        values = pa.array(rng.integers(0, per_day, n), type=pa.int64()).cast(storage)
        return _with_nulls(values.view(t), rng, null_rate)
    elif pa.types.is_timestamp(t):
        per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[t.unit]
        seconds = rng.integers(-2_000_000_000, 4_000_000_000, n)
        values = seconds * per_second + rng.integers(0, per_second, n)
        return _with_nulls(pa.array(values, type=pa.int64()).cast(t), rng, null_rate)
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        lengths = rng.choice([0, 1, 3, 7, 8, 9, 15, 16, 17, 40, 100], n)
        alphabet = "abcdefghijklmnopqrstuvwxyzé✓"
        values = ["".join(rng.choice(list(alphabet), size=int(k))) for k in lengths]
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        lengths = rng.choice([0, 2, 7, 8, 12, 33], n)
        values = [rng.integers(0, 256, int(k), dtype=np.uint8).tobytes() for k in lengths]
    else:
        raise AssertionError(t)
    return _with_nulls(pa.array(values, type=t), rng, null_rate)


def _with_nulls(arr: pa.Array, rng: np.random.Generator, rate: float) -> pa.Array:
    if rate == 0:
        return arr
    mask = pa.array(rng.random(len(arr)) < rate)
    return pa.compute.if_else(mask, pa.scalar(None, arr.type), arr)


HASH_TYPES = [
    pa.bool_(),
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.float32(),
    pa.float64(),
    pa.decimal128(9, 2),
    pa.decimal128(18, 4),
    pa.decimal128(25, 5),
    pa.decimal128(38, 0),
    pa.date32(),
    pa.time32("ms"),
    pa.time64("us"),
    pa.timestamp("s"),
    pa.timestamp("ms"),
    pa.timestamp("us"),
    pa.timestamp("ns"),
    pa.timestamp("us", tz="UTC"),
    pa.string(),
    pa.large_string(),
    pa.binary(),
]


def _reference_hashes(table: pa.Table) -> list[int]:
    types = [f.type for f in table.schema]
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [row_hash([c[r] for c in columns], types) for r in range(table.num_rows)]


@pytest.mark.parametrize("t", HASH_TYPES, ids=str)
def test_hash_codes_match_reference_single_column(t):
    rng = np.random.default_rng(abs(hash(str(t))) % 2**32)
    table = pa.table({"k": _random_column(rng, t, 300, null_rate=0.1)})
    assert hash_codes(table).tolist() == _reference_hashes(table)


@pytest.mark.parametrize("seed", range(8))
def test_hash_codes_match_reference_mixed_tables(seed):
    rng = np.random.default_rng(seed)
    arity = int(rng.integers(1, 6))
    types = [HASH_TYPES[int(i)] for i in rng.integers(0, len(HASH_TYPES), arity)]
    n = 400
    table = pa.table({f"c{i}": _random_column(rng, t, n, null_rate=0.15) for i, t in enumerate(types)})
    expected = _reference_hashes(table)
    assert hash_codes(table).tolist() == expected
    # chunked tables, record batches and sliced arrays give the same answer
    chunked = pa.concat_tables([table.slice(0, 123), table.slice(123)])
    assert hash_codes(chunked).tolist() == expected
    batch = table.combine_chunks().to_batches()[0]
    assert hash_codes(batch.slice(50, 200)).tolist() == expected[50:250]
    buckets = bucket_ids(table, 7)
    assert buckets.dtype == np.int32
    assert buckets.tolist() == [java_bucket(h, 7) for h in expected]


@pytest.mark.parametrize("seed", range(3))
def test_large_batches_hash_in_slices_as_one(seed, monkeypatch):
    """Batches past PARALLEL_HASH_ROWS are hashed in slices on several threads; every slice boundary (inside a
    run of long strings, on a null) must give the hashes the whole batch gives."""
    rng = np.random.default_rng(seed)
    types = [pa.int64(), pa.string(), pa.decimal128(30, 4), pa.timestamp("us")]
    table = pa.table({f"c{i}": _random_column(rng, t, 1001, null_rate=0.1) for i, t in enumerate(types)})
    expected = _reference_hashes(table)
    monkeypatch.setattr(bucketing, "PARALLEL_HASH_ROWS", 97)
    monkeypatch.setattr(bucketing.os, "cpu_count", lambda: 4)
    assert hash_codes(table).tolist() == expected
    assert hash_codes(table.combine_chunks().to_batches()[0].slice(3, 700)).tolist() == expected[3:703]


def test_hash_codes_many_columns_and_dictionary():
    rng = np.random.default_rng(99)
    n = 200
    columns = {f"c{i}": _random_column(rng, pa.int32(), n, null_rate=0.3) for i in range(70)}
    columns["s"] = _random_column(rng, pa.string(), n, null_rate=0.2).dictionary_encode()
    table = pa.table(columns)
    plain = table.set_column(70, "s", table.column("s").cast(pa.string()))
    assert hash_codes(table).tolist() == _reference_hashes(plain)


def test_hash_of_known_rows_is_stable_and_scalar_helper_agrees():
    types = [pa.int32(), pa.string()]
    for values in ([1, "a"], [None, "a much longer string than seven"], [-5, None]):
        row = serialize_row(values, types)[4:]
        assert hash_bytes_by_words(row) == reference_hash(row)
        table = pa.table({"a": pa.array([values[0]], pa.int32()), "b": pa.array([values[1]], pa.string())})
        assert hash_codes(table).tolist() == [reference_hash(row)]


def test_empty_inputs():
    assert hash_codes(pa.table({"k": pa.array([], pa.int64())})).tolist() == []
    assert bucket_ids(pa.table({"k": pa.array([], pa.string())}), 3).tolist() == []


def test_java_remainder_semantics():
    hashes = np.array([-7, 7, -8, -(2**31), 2**31 - 1, 0], dtype=np.int32)
    # Java: -7 % 4 == -3 -> 3; Python's -7 % 4 would be 1.
    assert buckets_from_hash_codes(hashes, 4).tolist() == [3, 3, 0, 0, 3, 0]
    assert buckets_from_hash_codes(hashes, 5).tolist() == [2, 2, 3, 3, 2, 0]
    with pytest.raises(ValueError):
        buckets_from_hash_codes(hashes, 0)


def test_other_arrow_layouts_hash_like_the_plain_ones():
    strings = ["", "abc", "12345678", None, "a considerably longer value"]
    plain = hash_codes(pa.table({"k": pa.array(strings, pa.string())})).tolist()
    assert plain == [row_hash([s], [pa.string()]) for s in strings]
    assert hash_codes(pa.table({"k": pa.array(strings, pa.string_view())})).tolist() == plain
    assert hash_codes(pa.table({"k": pa.array(strings, pa.large_string())})).tolist() == plain
    fixed = [b"\x01" * 4, None, b"\xff" * 4]
    assert hash_codes(pa.table({"k": pa.array(fixed, pa.binary(4))})).tolist() == [
        row_hash([v], [pa.binary()]) for v in fixed
    ]
    decimals = [D("1.5"), None, D("-123456789012345678901.25")]
    assert hash_codes(pa.table({"k": pa.array(decimals, pa.decimal256(30, 2))})).tolist() == [
        row_hash([v], [pa.decimal128(30, 2)]) for v in decimals
    ]


@pytest.mark.parametrize("t", HASH_TYPES, ids=str)
def test_all_null_columns(t):
    expected = [row_hash([None, 1], [t, pa.int32()])] * 3
    for column in (pa.nulls(3, t), pa.array([None] * 3, t)):
        table = pa.table({"k": column, "x": pa.array([1, 1, 1], pa.int32())})
        assert hash_codes(table).tolist() == expected
