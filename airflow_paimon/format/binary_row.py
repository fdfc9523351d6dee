"""Paimon's BinaryRow byte layout, written and read one row at a time.

Paimon stores small rows as BinaryRow bytes inside its manifests: the partition of a data file
(`_PARTITION`), the smallest and largest primary key of a file (`_MIN_KEY`, `_MAX_KEY`) and the column
statistics (`_MIN_VALUES`, `_MAX_VALUES`). Java Paimon compares these rows byte for byte (a partition is
found again only if its bytes are equal), so the layout here follows Java's `BinaryRowWriter` exactly,
including the parts that look accidental (space reserved for a null high-precision decimal).

Layout of one row (all integers little-endian):

* null bit set: `((arity + 63 + 8) // 64) * 8` bytes. Byte 0 holds the RowKind (INSERT = 0); the null
  flag of field `i` is bit `i + 8` of the set.
* one 8-byte slot per field. Fixed-width values sit in the slot (unused bytes zero). Strings and
  binaries of at most 7 bytes are inlined: data in the low 7 bytes, `0x80 | length` in the eighth.
  Longer ones, decimals of precision > 18 and timestamps of precision > 3 keep `offset << 32 | low`
  in the slot, where `offset` points (from the row start) into the variable part.
* the variable part: each value padded with zeros to a multiple of 8 bytes, in field order.

The manifest form, which `serialize_row` returns, is that row prefixed with its arity as a big-endian
4-byte integer (Java's `SerializationUtils.serializeBinaryRow`). Hashes for bucketing are computed over
the row without the prefix.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import enum
import struct
from typing import Any, Sequence

import pyarrow as pa

__all__ = [
    "EMPTY_ROW",
    "FieldKind",
    "MAX_COMPACT_DECIMAL_PRECISION",
    "MAX_INLINE_BYTES",
    "deserialize_row",
    "field_kind",
    "fixed_part_size",
    "null_bits_size",
    "serialize_row",
    "unscaled_to_bytes",
]

ROW_KIND_INSERT = 0
HEADER_BITS = 8
# Strings and binaries up to this many bytes live inside their 8-byte slot.
MAX_INLINE_BYTES = 7
# Decimals up to this precision are stored as an unscaled long in the slot.
MAX_COMPACT_DECIMAL_PRECISION = 18
# A non-compact decimal always reserves this many bytes in the variable part.
WIDE_DECIMAL_BYTES = 16

_INLINE_MARK = 0x80 << 56
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_EPOCH_DATE = _dt.date(1970, 1, 1)
_DECIMAL_CTX = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_UP)
_NANOS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


class FieldKind(enum.Enum):
    """How one field is laid out in a BinaryRow; derived from its Arrow type by `field_kind`."""

    BOOLEAN = "boolean"
    TINYINT = "tinyint"
    SMALLINT = "smallint"
    INT = "int"
    BIGINT = "bigint"
    FLOAT = "float"
    DOUBLE = "double"
    DATE = "date"
    TIME = "time"
    TIMESTAMP = "timestamp"  # precision <= 3: epoch millis in the slot
    TIMESTAMP_WIDE = "timestamp_wide"  # precision > 3: millis in the variable part
    DECIMAL = "decimal"  # precision <= 18: unscaled long in the slot
    DECIMAL_WIDE = "decimal_wide"  # precision > 18: big-endian bytes in the variable part
    STRING = "string"
    BINARY = "binary"
    NESTED = "nested"  # ARRAY, MAP, ROW: only null here (statistics of nested values are never kept)


def field_kind(t: pa.DataType) -> FieldKind:
    """The BinaryRow layout of a field of Arrow type `t` (as the library maps Paimon types to Arrow)."""
    if pa.types.is_dictionary(t):
        return field_kind(t.value_type)
    if pa.types.is_boolean(t):
        return FieldKind.BOOLEAN
    if pa.types.is_int8(t):
        return FieldKind.TINYINT
    if pa.types.is_int16(t):
        return FieldKind.SMALLINT
    if pa.types.is_int32(t):
        return FieldKind.INT
    if pa.types.is_int64(t):
        return FieldKind.BIGINT
    if pa.types.is_float32(t):
        return FieldKind.FLOAT
    if pa.types.is_float64(t):
        return FieldKind.DOUBLE
    if pa.types.is_date32(t):
        return FieldKind.DATE
    if pa.types.is_time(t):
        return FieldKind.TIME
    if pa.types.is_timestamp(t):
        return FieldKind.TIMESTAMP if t.unit in ("s", "ms") else FieldKind.TIMESTAMP_WIDE
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise TypeError(f"Paimon decimals have at most 38 digits, got {t}")
        return FieldKind.DECIMAL if t.precision <= MAX_COMPACT_DECIMAL_PRECISION else FieldKind.DECIMAL_WIDE
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return FieldKind.STRING
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        return FieldKind.BINARY
    if pa.types.is_nested(t):
        return FieldKind.NESTED
    raise TypeError(f"Arrow type {t} has no BinaryRow layout here")


def null_bits_size(arity: int) -> int:
    """Bytes of the header + null bit set, rounded up to whole 8-byte words."""
    return ((arity + 63 + HEADER_BITS) // 64) * 8


def fixed_part_size(arity: int) -> int:
    """Bytes of a row before its variable part: the null bit set and one slot per field."""
    return null_bits_size(arity) + 8 * arity


def unscaled_to_bytes(unscaled: int) -> bytes:
    """Shortest big-endian two's complement bytes of `unscaled`, as Java's `BigInteger.toByteArray`.

    Java counts the sign bit once, so -128 is one byte (0x80); `int.bit_length` would ask for two.
    """
    magnitude_bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    return unscaled.to_bytes(magnitude_bits // 8 + 1, "big", signed=True)


def _round_to_word(n: int) -> int:
    return (n + 7) & ~7


def _unscaled(value: Any, precision: int, scale: int) -> int:
    """Unscaled integer of `value` at `scale`, rounding half-up as Java's `Decimal.fromBigDecimal` does."""
    d = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
    if not d.is_finite():
        raise ValueError(f"decimal value {value!r} is not finite")
    q = d.quantize(decimal.Decimal(1).scaleb(-scale), context=_DECIMAL_CTX)
    unscaled = int(q.scaleb(scale, context=_DECIMAL_CTX))
    if unscaled != 0 and len(str(abs(unscaled))) > precision:
        raise ValueError(f"decimal value {value!r} does not fit DECIMAL({precision}, {scale})")
    return unscaled


def epoch_nanos(value: Any, unit: str) -> int:
    """Nanoseconds since the epoch, truncated (floor) to the type's unit.

    Aware datetimes are taken as instants (converted to UTC); naive ones as UTC wall-clock time, which is
    what Arrow stores for a timestamp without time zone. pandas Timestamps keep their nanoseconds; an
    int is read as a count of `unit`.
    """
    per_unit = _NANOS_PER_UNIT[unit]
    if isinstance(value, int) and not isinstance(value, bool):
        return value * per_unit
    if hasattr(value, "dtype") and str(getattr(value, "dtype", "")).startswith("datetime64"):
        import numpy as np

        return int(np.datetime64(value, "ns").astype("int64"))
    if not isinstance(value, _dt.datetime):
        raise TypeError(f"expected a datetime for a timestamp field, got {type(value).__name__}")
    if value.tzinfo is not None and value.utcoffset() is not None:
        delta = value - _EPOCH_UTC
    else:
        delta = value.replace(tzinfo=None) - _EPOCH
    nanos = ((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds) * 1_000
    nanos += int(getattr(value, "nanosecond", 0) or 0)
    return (nanos // per_unit) * per_unit


def _unit(t: pa.DataType) -> str:
    """The unit of a TIME or TIMESTAMP field (`field_kind` has chosen its layout from it)."""
    if pa.types.is_timestamp(t) or pa.types.is_time(t):
        unit: str = t.unit   # the stubs leave the unit's type parameter open
        return unit
    raise TypeError(f"Arrow type {t} is neither a time nor a timestamp")


def _decimal_digits(t: pa.DataType) -> tuple[int, int]:
    """(precision, scale) of a DECIMAL field."""
    if pa.types.is_decimal(t):
        return t.precision, t.scale
    raise TypeError(f"Arrow type {t} is not a decimal")


def _time_millis(value: Any, t: pa.DataType) -> int:
    """Millisecond of the day; Paimon stores TIME as an int of millis whatever its precision."""
    if isinstance(value, _dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    if isinstance(value, int) and not isinstance(value, bool):
        return value * _NANOS_PER_UNIT[_unit(t)] // 1_000_000
    raise TypeError(f"expected a datetime.time for a time field, got {type(value).__name__}")


def epoch_days(value: Any) -> int:
    if isinstance(value, _dt.datetime):
        value = value.date()
    if isinstance(value, _dt.date):
        return (value - _EPOCH_DATE).days
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(f"expected a datetime.date for a date field, got {type(value).__name__}")


def _as_bytes(value: Any, kind: FieldKind) -> bytes:
    if kind is FieldKind.STRING:
        if isinstance(value, str):
            return value.encode("utf-8")
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise TypeError(f"expected a str for a string field, got {type(value).__name__}")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"expected bytes for a binary field, got {type(value).__name__}")


_FIXED_FORMATS = {
    FieldKind.TINYINT: "<b",
    FieldKind.SMALLINT: "<h",
    FieldKind.INT: "<i",
    FieldKind.BIGINT: "<q",
    FieldKind.FLOAT: "<f",
    FieldKind.DOUBLE: "<d",
}


def serialize_row(values: Sequence[Any], types: Sequence[pa.DataType]) -> bytes:
    """Serialise one row to the manifest form of a Paimon BinaryRow (arity prefix + row bytes).

    `values` are Python values as `pyarrow.Array.to_pylist()` yields them, None for null. The RowKind
    byte is INSERT, as for every row Paimon keeps in a manifest.
    """
    if len(values) != len(types):
        raise ValueError(f"{len(values)} values for {len(types)} types")
    arity = len(types)
    null_size = null_bits_size(arity)
    fixed = bytearray(null_size + 8 * arity)
    fixed[0] = ROW_KIND_INSERT
    var = bytearray()
    cursor = len(fixed)  # offset of the next variable-part value, from the row start

    for pos, (value, t) in enumerate(zip(values, types)):
        if pa.types.is_dictionary(t):
            t = t.value_type
        kind = field_kind(t)
        slot_at = null_size + 8 * pos
        if value is None:
            bit = pos + HEADER_BITS
            fixed[bit // 8] |= 1 << (bit % 8)
            # Java's writer reserves (zeroed) variable-part space for null non-compact decimals and
            # timestamps and points the slot at it, so that the value can be set in place later.
            if kind is FieldKind.DECIMAL_WIDE:
                struct.pack_into("<Q", fixed, slot_at, cursor << 32)
                var += bytes(WIDE_DECIMAL_BYTES)
                cursor += WIDE_DECIMAL_BYTES
            elif kind is FieldKind.TIMESTAMP_WIDE:
                struct.pack_into("<Q", fixed, slot_at, cursor << 32)
                var += bytes(8)
                cursor += 8
            continue

        if kind is FieldKind.NESTED:
            raise TypeError(f"a nested value of type {t} has no BinaryRow form here (only null)")
        if kind is FieldKind.BOOLEAN:
            fixed[slot_at] = 1 if value else 0
        elif kind in _FIXED_FORMATS:
            struct.pack_into(_FIXED_FORMATS[kind], fixed, slot_at, value)
        elif kind is FieldKind.DATE:
            struct.pack_into("<i", fixed, slot_at, epoch_days(value))
        elif kind is FieldKind.TIME:
            struct.pack_into("<i", fixed, slot_at, _time_millis(value, t))
        elif kind is FieldKind.TIMESTAMP:
            struct.pack_into("<q", fixed, slot_at, epoch_nanos(value, _unit(t)) // 1_000_000)
        elif kind is FieldKind.TIMESTAMP_WIDE:
            millis, nano_of_milli = divmod(epoch_nanos(value, _unit(t)), 1_000_000)
            struct.pack_into("<Q", fixed, slot_at, (cursor << 32) | nano_of_milli)
            var += struct.pack("<q", millis)
            cursor += 8
        elif kind is FieldKind.DECIMAL:
            struct.pack_into("<q", fixed, slot_at, _unscaled(value, *_decimal_digits(t)))
        elif kind is FieldKind.DECIMAL_WIDE:
            data = unscaled_to_bytes(_unscaled(value, *_decimal_digits(t)))
            struct.pack_into("<Q", fixed, slot_at, (cursor << 32) | len(data))
            var += data + bytes(WIDE_DECIMAL_BYTES - len(data))
            cursor += WIDE_DECIMAL_BYTES
        else:  # STRING / BINARY
            data = _as_bytes(value, kind)
            if len(data) <= MAX_INLINE_BYTES:
                fixed[slot_at : slot_at + len(data)] = data
                fixed[slot_at + 7] = 0x80 | len(data)
            else:
                padded = _round_to_word(len(data))
                struct.pack_into("<Q", fixed, slot_at, (cursor << 32) | len(data))
                var += data + bytes(padded - len(data))
                cursor += padded

    return struct.pack(">i", arity) + bytes(fixed) + bytes(var)


def _timestamp_value(total_nanos: int, t: pa.DataType) -> Any:
    """A datetime (aware, UTC, for a zoned type), or a pandas Timestamp for 'ns' as Arrow itself gives."""
    if not pa.types.is_timestamp(t):
        raise TypeError(f"Arrow type {t} is not a timestamp")
    tz = _dt.timezone.utc if t.tz is not None else None
    if t.unit == "ns":
        try:
            import pandas as pd
        except ImportError:
            pass
        else:
            return pd.Timestamp(total_nanos, unit="ns", tz="UTC" if tz else None)
    value = _EPOCH + _dt.timedelta(microseconds=total_nanos // 1_000)
    return value.replace(tzinfo=tz) if tz else value


def _decimal_value(unscaled: int, scale: int) -> decimal.Decimal:
    return decimal.Decimal(unscaled).scaleb(-scale, context=_DECIMAL_CTX)


def deserialize_row(data: bytes, types: Sequence[pa.DataType]) -> list[Any]:
    """Read a manifest-form BinaryRow (arity prefix + row bytes) written by any Paimon writer.

    Empty `data` and rows of arity 0 read as an empty list (Paimon writes the empty row for tables
    without partitions and for files without statistics).
    """
    data = bytes(data)
    if not data:
        return []
    if len(data) < 4:
        raise ValueError(f"BinaryRow of {len(data)} bytes has no arity prefix")
    (arity,) = struct.unpack_from(">i", data, 0)
    if arity == 0:
        return []
    if arity != len(types):
        raise ValueError(f"BinaryRow has {arity} fields but {len(types)} types were given")
    row = memoryview(data)[4:]
    null_size = null_bits_size(arity)
    if len(row) < null_size + 8 * arity:
        raise ValueError(f"BinaryRow of arity {arity} is truncated ({len(row)} bytes)")

    out: list[Any] = []
    for pos, t in enumerate(types):
        bit = pos + HEADER_BITS
        if row[bit // 8] & (1 << (bit % 8)):
            out.append(None)
            continue
        if pa.types.is_dictionary(t):
            t = t.value_type
        kind = field_kind(t)
        slot_at = null_size + 8 * pos
        if kind is FieldKind.NESTED:
            out.append(None)  # a writer that kept nested statistics: unknown here, which is always safe
        elif kind is FieldKind.BOOLEAN:
            out.append(row[slot_at] != 0)
        elif kind in _FIXED_FORMATS:
            out.append(struct.unpack_from(_FIXED_FORMATS[kind], row, slot_at)[0])
        elif kind is FieldKind.DATE:
            out.append(_EPOCH_DATE + _dt.timedelta(days=struct.unpack_from("<i", row, slot_at)[0]))
        elif kind is FieldKind.TIME:
            millis = struct.unpack_from("<i", row, slot_at)[0]
            out.append((_dt.datetime.min + _dt.timedelta(milliseconds=millis)).time())
        elif kind is FieldKind.TIMESTAMP:
            out.append(_timestamp_value(struct.unpack_from("<q", row, slot_at)[0] * 1_000_000, t))
        elif kind is FieldKind.TIMESTAMP_WIDE:
            (slot,) = struct.unpack_from("<Q", row, slot_at)
            (millis,) = struct.unpack_from("<q", row, slot >> 32)
            out.append(_timestamp_value(millis * 1_000_000 + (slot & 0xFFFFFFFF), t))
        elif kind is FieldKind.DECIMAL:
            out.append(_decimal_value(struct.unpack_from("<q", row, slot_at)[0], _decimal_digits(t)[1]))
        elif kind is FieldKind.DECIMAL_WIDE:
            (slot,) = struct.unpack_from("<Q", row, slot_at)
            start, size = slot >> 32, slot & 0xFFFFFFFF
            unscaled = int.from_bytes(row[start : start + size], "big", signed=True)
            out.append(_decimal_value(unscaled, _decimal_digits(t)[1]))
        else:  # STRING / BINARY
            (slot,) = struct.unpack_from("<Q", row, slot_at)
            if slot & _INLINE_MARK:
                size = (slot >> 56) & 0x7F
                raw = bytes(row[slot_at : slot_at + size])
            else:
                start, size = slot >> 32, slot & 0xFFFFFFFF
                raw = bytes(row[start : start + size])
            out.append(raw.decode("utf-8") if kind is FieldKind.STRING else raw)
    return out


EMPTY_ROW: bytes = serialize_row([], [])
"""The 0-arity row as Paimon writes it (`BinaryRow.EMPTY_ROW`): zero arity, then one zeroed word."""
