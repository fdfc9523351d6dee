"""Paimon's fixed-bucket assignment, vectorised over Arrow columns.

A row of a table with `bucket = N > 0` lives in bucket `abs(h % N)` (Java remainder, sign of the
dividend), where `h` is `BinaryRow.hashCode()` of the row's bucket key: the bucket-key columns (the
`bucket-key` option, else the primary key minus the partition keys) serialised as a BinaryRow and
hashed with MurmurHash3 (x86, 32 bit) over its 4-byte little-endian words with seed 42. A writer that
puts a row in any other bucket corrupts the table for Java readers (lookups and merges go to the wrong
bucket), so this must match Paimon bit for bit.

Rows are not hashed one at a time. All rows' BinaryRow bytes are laid out in one zeroed buffer, rows
of equal length next to each other; each run of equal-length rows is then a matrix of 32-bit words,
and the Murmur rounds run over its columns with numpy. Fixed-width keys and strings of up to 7 bytes
give rows of one length, so that case is a single matrix.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from airflow_paimon.format.binary_row import (
    MAX_INLINE_BYTES,
    WIDE_DECIMAL_BYTES,
    FieldKind,
    field_kind,
    null_bits_size,
)
from airflow_paimon.format.bucket_functions import hive_buckets, mod_buckets

__all__ = ["SEED", "bucket_ids", "buckets_from_hash_codes", "hash_bytes_by_words", "hash_codes"]

SEED = 42  # MurmurHashUtils.DEFAULT_SEED

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)
_ROUND_ADD = np.uint32(0xE6546B64)
_FMIX1 = np.uint32(0x85EBCA6B)
_FMIX2 = np.uint32(0xC2B2AE35)
_U64 = np.uint64


# --------------------------------------------------------------------------------------------
# Public API


def hash_codes(keys: pa.Table | pa.RecordBatch) -> np.ndarray:
    """`BinaryRow.hashCode()` of every row of `keys` (its columns, in order, are the bucket key), int32."""
    if isinstance(keys, pa.Table):
        if any(col.num_chunks > 1 for col in keys.columns):
            keys = keys.combine_chunks()
        batches = keys.to_batches()
        if not batches:
            return np.empty(keys.num_rows, dtype=np.int32)
        if len(batches) == 1:
            return _hash_parallel(batches[0])
        return np.concatenate([_hash_parallel(b) for b in batches])
    if isinstance(keys, pa.RecordBatch):
        return _hash_parallel(keys)
    raise TypeError(f"expected a pyarrow Table or RecordBatch, got {type(keys).__name__}")


PARALLEL_HASH_ROWS = 262_144


def _hash_parallel(batch: pa.RecordBatch) -> np.ndarray:
    """Large batches hashed in slices, one per core: numpy's rounds release the GIL, so slices hash at once."""
    workers = min(os.cpu_count() or 1, batch.num_rows // PARALLEL_HASH_ROWS)
    if workers <= 1:
        return _hash_batch(batch)
    step = -(-batch.num_rows // workers)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        parts = list(pool.map(lambda start: _hash_batch(batch.slice(start, step)),
                              range(0, batch.num_rows, step)))
    return np.concatenate(parts)


def bucket_ids(keys: pa.Table | pa.RecordBatch, num_buckets: int, function: str = "default") -> np.ndarray:
    """The fixed bucket (0 <= b < num_buckets) Paimon's bucket function (`bucket-function.type`: default, mod or
    hive; bucket_functions.py for the other two) gives each row, int32."""
    if function == "default":
        return buckets_from_hash_codes(hash_codes(keys), num_buckets)
    if num_buckets <= 0:
        raise ValueError(f"fixed bucket mode needs num_buckets > 0, got {num_buckets}")
    table = pa.Table.from_batches([keys]) if isinstance(keys, pa.RecordBatch) else keys
    return mod_buckets(table, num_buckets) if function == "mod" else hive_buckets(table, num_buckets)


def buckets_from_hash_codes(hashes: np.ndarray, num_buckets: int) -> np.ndarray:
    """Java's `Math.abs(hash % numBuckets)`: the remainder takes the dividend's sign, then abs."""
    if num_buckets <= 0:
        raise ValueError(f"fixed bucket mode needs num_buckets > 0, got {num_buckets}")
    return np.abs(np.fmod(np.asarray(hashes, dtype=np.int64), num_buckets)).astype(np.int32)


def hash_bytes_by_words(data: bytes, seed: int = SEED) -> int:
    """Murmur3-32 of `data` by 4-byte words (Paimon's `hashBytesByWords`), as a signed int.

    `data` is the BinaryRow without its arity prefix, i.e. `serialize_row(...)[4:]`.
    """
    if len(data) % 4:
        raise ValueError(f"hashing by words needs a multiple of 4 bytes, got {len(data)}")
    words = np.frombuffer(bytes(data), dtype="<u4").reshape(1, -1)
    return int(_murmur_rows(words, len(data), seed)[0])


# --------------------------------------------------------------------------------------------
# Murmur over a matrix of rows


def _murmur_rows(words: np.ndarray, nbytes: int, seed: int = SEED) -> np.ndarray:
    """Murmur3-32 of each row of `words` (m rows x nbytes/4 uint32 words); returns int32."""
    m = words.shape[0]
    # The per-word mixing does not depend on the running hash, so do it for the whole matrix at once,
    # laid out word-major so each round reads one contiguous row.
    k = np.array(words.T, dtype=np.uint32, order="C", copy=True)  # a copy: mixed in place below
    k *= _C1
    tmp = k >> 17
    k <<= 15
    k |= tmp
    del tmp
    k *= _C2

    h = np.full(m, seed & 0xFFFFFFFF, dtype=np.uint32)
    rot = np.empty(m, dtype=np.uint32)
    for i in range(k.shape[0]):
        h ^= k[i]
        np.right_shift(h, 19, out=rot)
        h <<= 13
        h |= rot
        h *= np.uint32(5)
        h += _ROUND_ADD

    h ^= np.uint32(nbytes)
    h ^= h >> 16
    h *= _FMIX1
    h ^= h >> 13
    h *= _FMIX2
    h ^= h >> 16
    return h.view(np.int32)


# --------------------------------------------------------------------------------------------
# Column encoding: each column becomes its 8-byte slot per row, plus, for values kept in the
# variable part, how many bytes each row needs there and a function that writes them.


@dataclass
class _VariablePart:
    lengths: np.ndarray  # int64 bytes per row in the variable part (multiples of 8)
    used: np.ndarray  # bool: rows whose slot points into the variable part
    # write(flat_words, dest_word_per_row): put this column's variable-part words in place
    write: Callable[[np.ndarray, np.ndarray], None]


@dataclass
class _Encoded:
    slot: np.ndarray  # uint64 per row; for variable-part rows the low 32 bits (length / nanos)
    nulls: np.ndarray | None  # bool per row, None when the column has no nulls
    var: _VariablePart | None = None  # None when no row of the column uses the variable part


def _normalise(arr: pa.Array) -> pa.Array:
    """Bring an array to a layout the encoders read directly (plain offsets, 128-bit decimals)."""
    t = arr.type
    if isinstance(arr, pa.DictionaryArray):
        return _normalise(arr.dictionary_decode())
    if pa.types.is_string_view(t):
        return arr.cast(pa.large_string())
    if pa.types.is_binary_view(t) or pa.types.is_fixed_size_binary(t):
        return arr.cast(pa.large_binary())
    if pa.types.is_decimal256(t) and t.precision <= 38:
        return arr.cast(pa.decimal128(t.precision, t.scale))
    return arr


def _view(buffer: pa.Buffer | None) -> memoryview:
    """A zero-copy view of an Arrow buffer; numpy's stubs only take pa.Buffer itself from Python 3.12 on."""
    if buffer is None:
        raise ValueError("the Arrow array has no buffer where its values should be")
    return memoryview(buffer)


def _fixed_values(arr: pa.Array, dtype: npt.DTypeLike, per_row: int = 1) -> np.ndarray:
    """The value buffer of a fixed-width array as numpy (read-only view), `per_row` items per row."""
    start = arr.offset * per_row
    count = start + len(arr) * per_row
    return np.frombuffer(_view(arr.buffers()[1]), dtype=dtype, count=count)[start:]


def _zero_nulls(values: np.ndarray, nulls: np.ndarray | None) -> np.ndarray:
    """Nulls are written as a zero slot; Arrow leaves whatever it likes under a null."""
    if nulls is None:
        return values
    return np.where(nulls, values.dtype.type(0), values)


def _encode(arr: pa.Array) -> _Encoded:
    arr = _normalise(arr)
    kind = field_kind(arr.type)
    n = len(arr)
    nulls = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else None

    if kind is FieldKind.BOOLEAN:
        values = arr.fill_null(False).to_numpy(zero_copy_only=False)
        return _Encoded(values.astype(_U64), nulls)
    if kind in _INT_WIDTHS:
        signed, unsigned = _INT_WIDTHS[kind]
        values = _zero_nulls(_fixed_values(arr, signed), nulls)
        return _Encoded(values.view(unsigned).astype(_U64), nulls)
    if kind is FieldKind.FLOAT:
        values = _zero_nulls(_fixed_values(arr, np.uint32), nulls)
        return _Encoded(values.astype(_U64), nulls)
    if kind is FieldKind.DOUBLE:
        return _Encoded(_zero_nulls(_fixed_values(arr, np.uint64), nulls), nulls)
    if kind is FieldKind.TIME:
        unit = arr.type.unit
        raw = _fixed_values(arr, np.int32 if unit in ("s", "ms") else np.int64).astype(np.int64)
        millis = raw * 1000 if unit == "s" else raw // {"ms": 1, "us": 1_000, "ns": 1_000_000}[unit]
        millis = _zero_nulls(millis.astype(np.int32), nulls)
        return _Encoded(millis.view(np.uint32).astype(_U64), nulls)
    if kind is FieldKind.TIMESTAMP:
        raw = _zero_nulls(_fixed_values(arr, np.int64), nulls)
        millis = raw * 1000 if arr.type.unit == "s" else raw
        return _Encoded(millis.view(_U64), nulls)
    if kind is FieldKind.TIMESTAMP_WIDE:
        return _encode_wide_timestamp(arr, nulls)
    if kind is FieldKind.DECIMAL:
        low = _fixed_values(arr, np.int64, per_row=2)[::2]
        return _Encoded(_zero_nulls(low, nulls).view(_U64), nulls)
    if kind is FieldKind.DECIMAL_WIDE:
        return _encode_wide_decimal(arr, nulls, n)
    return _encode_bytes(arr, nulls, n)


_INT_WIDTHS = {
    FieldKind.TINYINT: (np.int8, np.uint8),
    FieldKind.SMALLINT: (np.int16, np.uint16),
    FieldKind.INT: (np.int32, np.uint32),
    FieldKind.DATE: (np.int32, np.uint32),
    FieldKind.BIGINT: (np.int64, np.uint64),
}


def _encode_wide_timestamp(arr: pa.Array, nulls: np.ndarray | None) -> _Encoded:
    """Precision > 3: epoch millis (8 bytes) in the variable part, nano-of-millisecond in the slot.

    A null one still gets its 8 zero bytes and an offset, as Java's writer does.
    """
    raw = _zero_nulls(_fixed_values(arr, np.int64), nulls)
    per_milli = 1_000 if arr.type.unit == "us" else 1_000_000
    millis = raw // per_milli  # floor, so nano-of-millisecond is never negative
    nanos = (raw - millis * per_milli) * (1_000_000 // per_milli)
    n = len(raw)

    def write(flat: np.ndarray, dest: np.ndarray) -> None:
        flat[dest] = millis.view(_U64)

    return _Encoded(nanos.astype(_U64), nulls,
                    _VariablePart(np.full(n, 8, dtype=np.int64), np.ones(n, dtype=bool), write))


def _bit_length(x: np.ndarray) -> np.ndarray:
    """Exact bit length of each uint64 (0 for 0), by halving; floats would round above 2**53."""
    x = x.copy()
    bits = np.zeros(x.shape, dtype=np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        big = x >= (_U64(1) << _U64(s))
        bits += big * s
        np.right_shift(x, _U64(s), out=x, where=big)
    return bits + (x > 0)


def _encode_wide_decimal(arr: pa.Array, nulls: np.ndarray | None, n: int) -> _Encoded:
    """Precision > 18: the unscaled value's shortest big-endian two's complement bytes (Java's
    `BigInteger.toByteArray`) at the start of a zeroed 16-byte region of the variable part."""
    words = _fixed_values(arr, np.uint64, per_row=2)
    lo = _zero_nulls(words[0::2], nulls)
    hi = _zero_nulls(words[1::2], nulls)
    # Java counts the bits beyond the sign: those of the value, or of its complement if negative.
    negative = (hi >> _U64(63)).astype(bool)
    mag_hi = np.where(negative, ~hi, hi)
    mag_lo = np.where(negative, ~lo, lo)
    has_hi = mag_hi != 0
    bits = _bit_length(np.where(has_hi, mag_hi, mag_lo)) + 64 * has_hi
    size = bits // 8 + 1
    if nulls is not None:
        size = np.where(nulls, 0, size)

    # Shift the 128-bit value left so its `size` low bytes become the top bytes; written big-endian,
    # they then start the region and the rest is zero.
    shift = (8 * (WIDE_DECIMAL_BYTES - np.minimum(np.maximum(size, 1), 16))).astype(_U64)
    small = shift & _U64(63)
    carry = np.where(small > 0, lo >> ((_U64(64) - small) & _U64(63)), _U64(0))
    top = np.where(shift >= 64, lo << small, (hi << small) | carry)
    bottom = np.where(shift >= 64, _U64(0), lo << small)
    first, second = top.byteswap(), bottom.byteswap()

    def write(flat: np.ndarray, dest: np.ndarray) -> None:
        flat[dest] = first
        flat[dest + 1] = second

    return _Encoded(size.astype(_U64), nulls,
                    _VariablePart(np.full(n, WIDE_DECIMAL_BYTES, dtype=np.int64), np.ones(n, dtype=bool), write))


def _encode_bytes(arr: pa.Array, nulls: np.ndarray | None, n: int) -> _Encoded:
    """Strings and binaries: up to 7 bytes inline in the slot, longer in the variable part."""
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    buffers = arr.buffers()
    offsets = np.frombuffer(_view(buffers[1]), dtype=np.int64 if large else np.int32, count=arr.offset + n + 1)
    offsets = offsets[arr.offset :].astype(np.int64)
    raw = np.frombuffer(_view(buffers[2]), dtype=np.uint8) if buffers[2] is not None else np.empty(0, np.uint8)
    # The values' bytes, with 8 zero bytes after the last so every 8-byte read stays in bounds.
    size = int(offsets[-1] - offsets[0])
    data = np.zeros(size + 8 + (-size) % 8, dtype=np.uint8)
    data[:size] = raw[offsets[0] : offsets[-1]]
    starts = offsets[:-1] - offsets[0]
    lens = offsets[1:] - offsets[:-1]
    if nulls is not None:
        lens = np.where(nulls, 0, lens)
        inline = (lens <= MAX_INLINE_BYTES) & ~nulls
    else:
        inline = lens <= MAX_INLINE_BYTES

    slot = np.zeros(n, dtype=_U64)
    longest_inline = int(lens[inline].max()) if inline.any() else 0
    for j in range(longest_inline):
        byte = data[starts + j]
        byte = np.where(inline & (lens > j), byte, np.uint8(0))
        slot |= byte.astype(_U64) << _U64(8 * j)
    slot |= np.where(inline, (lens | 0x80).astype(_U64) << _U64(56), _U64(0))

    long_rows = lens > MAX_INLINE_BYTES
    if not long_rows.any():
        return _Encoded(slot, nulls)
    slot = np.where(long_rows, lens.astype(_U64), slot)
    var_len = np.where(long_rows, (lens + 7) & ~7, 0)

    def write(flat: np.ndarray, dest: np.ndarray) -> None:
        rows = np.flatnonzero(long_rows)
        src, dst, remaining = starts[rows], dest[rows], lens[rows]
        # Unaligned 8-byte reads at any byte offset: word k of a value starts at byte src + 8k.
        words = np.lib.stride_tricks.as_strided(
            np.frombuffer(data, dtype="<u8", count=len(data) // 8),
            shape=(len(data) - 7,),
            strides=(1,),
            writeable=False,
        )
        while src.size:
            word = words[src]
            tail = remaining < 8
            if tail.any():  # zero whatever follows the value in its last word
                keep_bits = (np.minimum(remaining, 8) * 8).astype(_U64)
                word = np.where(tail, word & ((_U64(1) << (keep_bits & _U64(63))) - _U64(1)), word)
            flat[dst] = word
            more = np.flatnonzero(remaining > 8)
            src, dst, remaining = src[more] + 8, dst[more] + 1, remaining[more] - 8

    return _Encoded(slot, nulls, _VariablePart(var_len.astype(np.int64), long_rows, write))


# --------------------------------------------------------------------------------------------
# Row layout and hashing


def _hash_batch(batch: pa.RecordBatch) -> np.ndarray:
    n = batch.num_rows
    if n == 0:
        return np.empty(0, dtype=np.int32)
    arity = batch.num_columns
    null_words = null_bits_size(arity) // 8
    fixed_words = null_words + arity
    columns = [_encode(batch.column(j)) for j in range(arity)]

    # Variable-part offsets: each column's values follow those of the columns before it.
    row_len = np.full(n, fixed_words * 8, dtype=np.int64)
    var_offset: dict[int, np.ndarray] = {}
    for j, col in enumerate(columns):
        if col.var is None:
            continue
        var_offset[j] = row_len.copy()
        row_len += col.var.lengths
        shifted = var_offset[j].astype(_U64) << _U64(32)
        col.slot = col.slot | np.where(col.var.used, shifted, _U64(0))

    uniform = not var_offset or row_len.min() == row_len.max()
    if uniform:
        width = int(row_len[0]) // 8
        start_word = np.arange(n, dtype=np.int64) * width
    else:
        words_per_row = row_len // 8
        if words_per_row.max() < 2**16:  # small integer keys sort by radix, several times faster
            words_per_row = words_per_row.astype(np.uint16)
        order = np.argsort(words_per_row, kind="stable")
        sorted_len = row_len[order]
        sorted_start = np.cumsum(sorted_len) - sorted_len
        start_word = np.empty(n, dtype=np.int64)
        start_word[order] = sorted_start // 8

    flat = np.zeros(int(row_len.sum()) // 8, dtype=_U64)
    matrix = flat.reshape(n, width) if uniform else None

    def put(word: int, values: np.ndarray) -> None:
        if matrix is not None:
            matrix[:, word] = values
        else:
            flat[start_word + word] = values

    # Header word(s): RowKind INSERT is 0, so only null bits are ever set.
    for w in range(null_words):
        bits = np.zeros(n, dtype=_U64)
        for j, col in enumerate(columns):
            bit = j + 8
            if col.nulls is not None and bit // 64 == w:
                bits |= col.nulls.astype(_U64) << _U64(bit % 64)
        if bits.any():
            put(w, bits)
    for j, col in enumerate(columns):
        put(null_words + j, col.slot)
        if col.var is not None:
            col.var.write(flat, start_word + var_offset[j] // 8)

    if uniform:
        return _murmur_rows(flat.view(np.uint32).reshape(n, 2 * width), 8 * width)
    out = np.empty(n, dtype=np.int32)
    bounds = np.concatenate(([0], np.flatnonzero(np.diff(sorted_len)) + 1, [n]))
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        nbytes = int(sorted_len[a])
        first = int(sorted_start[a]) // 8
        block = flat[first : first + (b - a) * nbytes // 8].view(np.uint32).reshape(b - a, nbytes // 4)
        out[order[a:b]] = _murmur_rows(block, nbytes)
    return out
