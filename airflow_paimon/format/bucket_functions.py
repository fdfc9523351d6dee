"""Paimon's other fixed-bucket functions (`bucket-function.type`): `mod` and `hive`, vectorised over Arrow columns.

`mod` (ModBucketFunction): the only bucket-key column, INT or BIGINT, `Math.floorMod(key, N)`. `hive`
(HiveBucketFunction, with HiveHasher): per column a Hive hash, combined as `31 * hash + h` from 0 in 32-bit
arithmetic, then `(hash & Integer.MAX_VALUE) % N`; a NULL hashes to 0. The per-column hashes are Java's: the value
for BOOLEAN (0/1), TINYINT, SMALLINT, INT and DATE; `Long.hashCode` for BIGINT; the bits of FLOAT and DOUBLE
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
        bits = _decimals_hash(array)
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
    """`31 * h + b` over each value's signed bytes, mod 2**32 (`array`: binary; NULLs hash as the empty value).

    Values of up to `_STEPPED` bytes are hashed a byte position at a time across all of them (longest first, so
    that the values still going are a prefix): memory stays at a few words per value, and the steps are as many
    as the longest value's bytes. Longer values, each worth a step of its own, are summed one by one
    (`_long_bytes_hash`)."""
    buffers = array.buffers()
    n = len(array)
    out = np.zeros(n, dtype=np.uint64)
    if buffers[1] is None or n == 0:
        return out
    offsets = np.frombuffer(memoryview(buffers[1]), dtype=np.int32, count=n + 1, offset=4 * array.offset)
    offsets = offsets.astype(np.int64)
    lengths = np.diff(offsets)
    data = buffers[2]
    if data is None or not lengths.any():
        return out
    flat = np.frombuffer(memoryview(data), dtype=np.int8, count=int(offsets[-1]))
    stepped = np.flatnonzero((lengths > 0) & (lengths <= _STEPPED))
    order = stepped[np.argsort(-lengths[stepped], kind="stable")]
    starts, by_length = offsets[order], lengths[order]
    longest = int(by_length[0]) if len(order) else 0
    going = len(order) - np.searchsorted(by_length[::-1], np.arange(longest), side="right")   # per position
    h = np.zeros(len(order), dtype=np.uint64)
    for position, count in enumerate(going):
        b = flat[starts[:count] + position].astype(np.int64).view(np.uint64)
        h[:count] = h[:count] * np.uint64(31) + b
    out[order] = h
    for row in np.flatnonzero(lengths > _STEPPED):
        out[row] = _long_bytes_hash(flat[offsets[row]:offsets[row + 1]])
    result: np.ndarray = out & _M32
    return result


_STEPPED = 4096


def _long_bytes_hash(values: np.ndarray) -> int:
    """`31 * h + b` over one long value's signed bytes, mod 2**32: each byte weighted by 31 to the power of the
    bytes after it (the weights and the sum wrap at 2**64, which keeps them right mod 2**32)."""
    powers = np.ones(len(values), dtype=np.uint64)
    powers[1:] = np.cumprod(np.full(len(values) - 1, 31, dtype=np.uint64))
    return int((values.astype(np.int64).view(np.uint64) * powers[::-1]).sum() & _M32)


def _decimals_hash(array: pa.Array) -> np.ndarray:
    """`_decimal_hash` of each DECIMAL (0 for NULL): in numpy for unscaled values that fit 64 bits, which strip
    their trailing zeros in at most `scale` steps, value by value for the others."""
    scale = array.type.scale
    if not pa.types.is_decimal128(array.type) or scale < 0:
        return np.array([0 if v is None else _decimal_hash(v) for v in array.to_pylist()], dtype=np.uint64)
    data = array.buffers()[1]
    assert data is not None
    words = np.frombuffer(memoryview(data), dtype=np.int64, count=2 * len(array), offset=16 * array.offset)
    low, high = words[0::2], words[1::2]
    fits = high == (low >> np.int64(63))       # the high word only extends the low word's sign
    unscaled = np.where(fits, low, 0)
    scales = np.full(len(array), scale, dtype=np.int64)
    for _ in range(scale):                     # strip trailing zeros, down to scale 0 (Paimon's normalizeDecimal)
        strip = (unscaled % 10 == 0) & (scales > 0) & (unscaled != 0)
        if not strip.any():
            break
        unscaled = np.where(strip, unscaled // 10, unscaled)
        scales -= strip
    scales = np.where(unscaled == 0, 0, scales)
    magnitude = np.abs(unscaled).view(np.uint64)   # |-2**63| stays 2**63 as unsigned
    h = (np.uint64(31) * (magnitude >> np.uint64(32)) + (magnitude & _M32)) & _M32
    h = np.where(unscaled < 0, (np.uint64(0) - h) & _M32, h)
    out: np.ndarray = (np.uint64(31) * h + scales.view(np.uint64)) & _M32
    if not fits.all():
        values = array.to_pylist()
        for i in np.flatnonzero(~fits):
            value = values[i]
            out[i] = 0 if value is None else _decimal_hash(value)
    return out


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
