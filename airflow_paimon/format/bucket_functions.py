"""Paimon's other fixed-bucket functions (`bucket-function.type`): `mod` and `hive`, vectorised over Arrow columns.

`mod` (ModBucketFunction): the only bucket-key column, INT or BIGINT, `Math.floorMod(key, N)`. `hive`
(HiveBucketFunction, with HiveHasher): per column a Hive hash, combined as `31 * hash + h` from 0 in 32-bit
arithmetic, then `(hash & Integer.MAX_VALUE) % N`; a NULL hashes to 0. The per-column hashes are Java's: the value
for BOOLEAN (0/1), TINYINT, SMALLINT, INT, DATE and TIME; `Long.hashCode` for BIGINT; the bits of FLOAT and DOUBLE
(`floatToIntBits`, `doubleToLongBits`: NaN canonical, -0.0 as 0); `31 * h + b` over the signed bytes of a
string's UTF-8 or of a BINARY; `BigDecimal.hashCode()` of a DECIMAL with its trailing zeros removed. Other types
(TIMESTAMP among them) are refused, as Paimon refuses them. A key sent to another bucket than Paimon's would be in
two buckets, so these match Paimon's Java bit for bit (the tests check them against pypaimon-rust's writes).
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pyarrow as pa

from .errors import InvalidOptionError

__all__ = ["BUCKET_FUNCTIONS", "hive_buckets", "mod_buckets"]

BUCKET_FUNCTIONS = ("default", "mod", "hive")
_M32 = np.uint64(0xFFFFFFFF)


def mod_buckets(keys: pa.Table, num_buckets: int) -> np.ndarray:
    """`floorMod` of the single INT or BIGINT bucket key (a NULL reads as 0, as from Paimon's BinaryRow), int32."""
    types = [f.type for f in keys.schema]
    if len(types) != 1 or not (pa.types.is_int32(types[0]) or pa.types.is_int64(types[0])):
        described = ", ".join(f"{f.name} {f.type}" for f in keys.schema)
        raise InvalidOptionError(f"bucket-function.type = 'mod' needs exactly one bucket-key column of type INT or "
                                 f"BIGINT (as in Paimon), not ({described})")
    values = _numbers(_whole(keys.column(0)), np.int64)
    out: np.ndarray = np.mod(values, num_buckets).astype(np.int32)
    return out


def hive_buckets(keys: pa.Table, num_buckets: int) -> np.ndarray:
    """Hive's bucket of each row of `keys` (the bucket-key columns, in order), int32."""
    total = np.zeros(keys.num_rows, dtype=np.uint64)
    for field, column in zip(keys.schema, keys.columns):
        total = (total * np.uint64(31) + _column_hash(field, _whole(column))) & _M32
    out: np.ndarray = ((total & np.uint64(0x7FFFFFFF)) % np.uint64(num_buckets)).astype(np.int32)
    return out


def _whole(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _numbers(array: pa.Array, dtype: type) -> np.ndarray:
    """The values as `dtype`, 0 where NULL (filled before leaving Arrow: with NULLs, integers would come out as
    floats, and large ones would lose their low bits)."""
    if array.null_count:
        array = array.fill_null(pa.scalar(0).cast(array.type))
    return np.asarray(array.to_numpy(zero_copy_only=False)).astype(dtype)


def _null_mask(array: pa.Array) -> np.ndarray:
    """Where the values are NULL."""
    if array.null_count == 0:
        return np.zeros(len(array), dtype=bool)
    return np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _column_hash(field: pa.Field, array: pa.Array) -> np.ndarray:
    """The 32-bit Hive hash of each value (as unsigned 64-bit integers below 2**32); 0 for NULL."""
    t = array.type
    if pa.types.is_dictionary(t):
        array = array.cast(t.value_type)
        t = array.type
    if pa.types.is_boolean(t):
        bits = _numbers(array, np.uint64)
    elif pa.types.is_integer(t) and t.bit_width <= 32 or pa.types.is_date32(t):
        bits = _numbers(array.cast(pa.int32()), np.int64).view(np.uint64)
    elif pa.types.is_int64(t):
        bits = _long_hash(_numbers(array, np.int64))
    elif pa.types.is_float32(t):
        values = _numbers(array, np.float32)
        values = np.where(values == 0, np.float32(0), values)       # -0.0 hashes as 0.0
        bits = np.where(np.isnan(values), np.uint64(0x7FC00000), values.view(np.uint32).astype(np.uint64))
    elif pa.types.is_float64(t):
        doubles = _numbers(array, np.float64)
        doubles = np.where(doubles == 0, np.float64(0), doubles)
        bits = _long_hash(np.where(np.isnan(doubles), np.int64(0x7FF8000000000000), doubles.view(np.int64)))
    elif pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t):
        bits = _bytes_hash(array.cast(pa.binary()))
    elif pa.types.is_decimal(t):
        bits = np.array([0 if v is None else _decimal_hash(v) for v in array.to_pylist()], dtype=np.uint64)
    else:
        raise InvalidOptionError(f"bucket-function.type = 'hive' cannot hash the bucket-key column {field.name!r} "
                                 f"of type {t} (nor can Paimon: only booleans, numbers, dates, strings, binaries "
                                 "and decimals)")
    out: np.ndarray = np.where(_null_mask(array), np.uint64(0), bits & _M32)
    return out


def _long_hash(values: np.ndarray) -> np.ndarray:
    """Java's `Long.hashCode`: the low 32 bits of `v ^ (v >>> 32)`."""
    unsigned = values.astype(np.int64).view(np.uint64)
    out: np.ndarray = (unsigned ^ (unsigned >> np.uint64(32))) & _M32
    return out


def _bytes_hash(array: pa.Array) -> np.ndarray:
    """`31 * h + b` over each value's signed bytes, mod 2**32: every byte weighted by 31 to the power of the
    bytes after it, summed per value (the weights and sums wrap at 2**64, which keeps them right mod 2**32).
    `array`: binary; NULLs hash as the empty value (0)."""
    buffers = array.buffers()
    offsets = np.frombuffer(memoryview(buffers[1]), dtype=np.int32, count=len(array) + 1, offset=4 * array.offset) \
        .astype(np.int64) if buffers[1] is not None else np.zeros(len(array) + 1, dtype=np.int64)
    out = np.zeros(len(array), dtype=np.uint64)
    if len(array) == 0 or offsets[-1] == offsets[0]:
        return out
    data = buffers[2]
    assert data is not None
    flat = np.frombuffer(memoryview(data), dtype=np.int8, count=int(offsets[-1] - offsets[0]), offset=int(offsets[0]))
    offsets = offsets - offsets[0]
    lengths = np.diff(offsets)
    after = np.repeat(offsets[1:], lengths) - np.arange(len(flat)) - 1     # per byte: the bytes after it
    powers = np.ones(int(lengths.max()), dtype=np.uint64)
    powers[1:] = np.cumprod(np.full(len(powers) - 1, 31, dtype=np.uint64))   # wraps at 2**64, as it may
    terms = flat.astype(np.int64).view(np.uint64) * powers[after]
    nonempty = lengths > 0
    out[nonempty] = np.add.reduceat(terms, offsets[:-1][nonempty])
    result: np.ndarray = out & _M32
    return result


def _decimal_hash(value: Decimal) -> int:
    """Java's `BigDecimal.hashCode()` (31 * unscaled.hashCode() + scale) of the value without trailing zeros
    (HiveHasher.normalizeDecimal: zero is 0 with scale 0, a negative scale becomes 0)."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    unscaled, scale = int("".join(map(str, digits)) or "0"), -exponent
    if unscaled == 0:
        scale = 0
    else:
        while unscaled % 10 == 0:
            unscaled, scale = unscaled // 10, scale - 1
        if scale < 0:
            unscaled, scale = unscaled * 10 ** -scale, 0
    if sign:
        unscaled = -unscaled
    magnitude = abs(unscaled)
    h = 0
    for shift in range((magnitude.bit_length() + 31) // 32 * 32 - 32, -1, -32):
        h = (31 * h + ((magnitude >> shift) & 0xFFFFFFFF)) & 0xFFFFFFFF
    if unscaled < 0:
        h = (-h) & 0xFFFFFFFF
    return (31 * h + scale) & 0xFFFFFFFF
